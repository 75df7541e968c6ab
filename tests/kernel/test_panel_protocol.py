"""The panel protocol's messages as the kernel reads them: versions first, then shapes, nothing guessed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_fsbroker.kernel.panel import messages as proto
from tests.support.env import REPO

#: One of each message of ``labextension/PROTOCOL.md``, shared with the extension's jest tests.
FIXTURE = json.loads((REPO / "labextension" / "fixtures" / "panel-messages.json").read_text(encoding="utf-8"))
FROM_PANEL: dict[str, Any] = FIXTURE["panelToKernel"]
TO_PANEL: dict[str, Any] = FIXTURE["kernelToPanel"]


def action(**fields: Any) -> dict[str, Any]:
    return {"version": proto.PROTOCOL_VERSION, "type": "action", "id": "a1", **fields}


def test_hello_refresh_and_each_action_of_the_shared_fixture_are_read() -> None:
    assert proto.parse(FROM_PANEL["hello"]).client == "jupyterlab"
    assert proto.parse(FROM_PANEL["refresh"]).type == "refresh"
    for name, target in (("disconnect", "c1"), ("revoke", "g_1"), ("force_unlock", "lock_1")):
        incoming = proto.parse(FROM_PANEL[name])
        assert (incoming.type, incoming.action, incoming.target, incoming.id) == (
            "action",
            name,
            target,
            FROM_PANEL[name]["id"],
        )
    answer = proto.parse(FROM_PANEL["answer_consent"])
    assert (answer.action, answer.target) == ("answer_consent", "consent_1")
    assert answer.approved == (proto.Approval("data/sales.csv", ("read",)),)
    assert answer.duration == 900.0
    hello = proto.parse(FROM_PANEL["hello_page"])
    assert (hello.origin, hello.base_url, hello.callback_page) == (
        "https://hub.example.com",
        "/user/ada/",
        True,
    )
    out = proto.parse(FROM_PANEL["sign_out"])
    assert (out.action, out.target) == ("sign_out", "c2")
    response = proto.parse(FROM_PANEL["sign_in_response"])
    assert (response.action, response.target) == ("sign_in_response", "Zk3x9Q-signin")
    assert response.address.startswith("?code=") and "c0de" not in repr(response)
    cancel = proto.parse(FROM_PANEL["cancel_call"])
    assert (cancel.action, cancel.target) == ("cancel_call", "call1")
    assert set(FROM_PANEL) == {
        "hello",
        "hello_page",
        "refresh",
        "disconnect",
        "revoke",
        "force_unlock",
        "answer_consent",
        "sign_out",
        "sign_in_response",
        "cancel_call",
    }


def test_a_hello_without_a_usable_page_says_nothing_of_one() -> None:
    for page in ({}, {"origin": "javascript:x", "baseUrl": "/"}, {"origin": "https://h", "baseUrl": 3}):
        hello = proto.parse(
            {"version": 1, "type": "hello", "client": "jupyterlab", "callbackPage": True, **page}
        )
        assert (hello.origin, hello.base_url, hello.callback_page) == ("", "", False)
    with pytest.raises(proto.ProtocolError, match="address"):
        proto.parse(action(action="sign_in_response", signIn="s1"))


def test_an_answer_is_read_in_canonical_order_and_an_empty_one_denies() -> None:
    answer = proto.parse(
        action(
            action="answer_consent",
            consent="consent_1",
            approved=[{"path": "data/a.csv", "operations": ["write", "read"]}],
            duration=900,
        )
    )
    assert answer.approved == (proto.Approval("data/a.csv", ("read", "write")),)  # canonical order
    denied = proto.parse(action(action="answer_consent", consent="consent_1", approved=[], duration=None))
    assert (denied.approved, denied.duration) == ((), None)


def test_the_kernel_writes_each_message_of_the_shared_fixture() -> None:
    assert proto.snapshot(1, TO_PANEL["snapshot"]["state"]) == TO_PANEL["snapshot"]
    assert proto.snapshot(2, TO_PANEL["snapshot_sign_in"]["state"]) == TO_PANEL["snapshot_sign_in"]
    assert proto.result("a3", True, "Lock released.") == TO_PANEL["result"]
    assert proto.error("bad_message", TO_PANEL["error"]["message"]) == TO_PANEL["error"]
    assert (
        proto.error("version_mismatch", TO_PANEL["version_mismatch"]["message"])
        == TO_PANEL["version_mismatch"]
    )
    assert proto.closing(TO_PANEL["closing"]["reason"]) == TO_PANEL["closing"]


@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_another_version_is_a_version_mismatch(version: object) -> None:
    with pytest.raises(proto.ProtocolError) as caught:
        proto.parse({"version": version, "type": "refresh"})
    assert caught.value.code == "version_mismatch"
    error = proto.error(caught.value.code, str(caught.value))
    assert error["supported"] == [proto.PROTOCOL_VERSION] and error["version"] == proto.PROTOCOL_VERSION


@pytest.mark.parametrize(
    "message",
    [
        "refresh",
        {"version": 1, "type": "gossip"},
        action(action="format_disk", target="/"),
        action(action="disconnect"),
        action(action="revoke", grant=""),
        action(action="answer_consent", consent="c", approved="all", duration=None),
        action(action="answer_consent", consent="c", approved=[{"path": "x", "operations": ["own"]}]),
        action(action="answer_consent", consent="c", approved=[], duration=-1),
        action(action="answer_consent", consent="c", approved=[], duration=10**9),
        action(action="answer_consent", consent="c", approved=[], duration=True),
        {"version": 1, "type": "action", "action": "disconnect", "connection": "c1"},  # no id
    ],
)
def test_malformed_messages_are_refused(message: object) -> None:
    with pytest.raises(proto.ProtocolError) as caught:
        proto.parse(message)
    assert caught.value.code == "bad_message"


def test_every_message_the_kernel_sends_carries_the_version() -> None:
    sent = [
        proto.snapshot(3, {}),
        proto.result("a1", True, "Lock released."),
        proto.error("bad_message", "no"),
        proto.closing("unloaded"),
    ]
    assert [m["version"] for m in sent] == [proto.PROTOCOL_VERSION] * 4
    assert [m["type"] for m in sent] == ["snapshot", "result", "error", "closing"]
