"""The panel protocol's messages as the kernel reads them: versions first, then shapes, nothing guessed."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_fsbroker.kernel.panel import messages as proto


def action(**fields: Any) -> dict[str, Any]:
    return {"version": proto.PROTOCOL_VERSION, "type": "action", "id": "a1", **fields}


def test_hello_refresh_and_each_action_are_read() -> None:
    assert proto.parse({"version": 1, "type": "hello", "client": "jupyterlab"}).client == "jupyterlab"
    assert proto.parse({"version": 1, "type": "refresh"}).type == "refresh"
    assert proto.parse(action(action="disconnect", connection="c1")).target == "c1"
    assert proto.parse(action(action="revoke", grant="g_1")).target == "g_1"
    assert proto.parse(action(action="force_unlock", lock="lock_1")).target == "lock_1"
    answer = proto.parse(
        action(
            action="answer_consent",
            consent="consent_1",
            approved=[{"path": "data/a.csv", "operations": ["write", "read"]}],
            duration=900,
        )
    )
    assert answer.approved == (proto.Approval("data/a.csv", ("read", "write")),)  # canonical order
    assert answer.duration == 900.0
    denied = proto.parse(action(action="answer_consent", consent="consent_1", approved=[], duration=None))
    assert (denied.approved, denied.duration) == ((), None)


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
