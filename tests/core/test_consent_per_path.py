"""Per-path consent, already-granted paths, one grant per path, and refusals that say why (PROTOCOL.md)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import (
    CallbackConsenter,
    ConsentDecision,
    ConsentRequest,
    DenyingConsenter,
)
from jupyter_fsbroker.core.errors import InvalidParams, PermissionDenied, to_jsonrpc_error
from jupyter_fsbroker.core.limits import Limits

from .conftest import error_of, make_broker


@pytest.fixture
def sales(data: Path) -> Path:
    (data / "sales.csv").write_text("region,amount\nnorth,10\n")
    (data / "sales.report.md").write_text("old report\n")
    (data / "raw").mkdir()
    (data / "raw" / "a.csv").write_text("a\n")
    return data


class Recorder:
    """A consenter that records each request and answers with *decide* (default: everything asked)."""

    def __init__(self, decide=None) -> None:  # type: ignore[no-untyped-def]
        self.requests: list[ConsentRequest] = []
        self._decide = decide or (lambda r: ConsentDecision.approve_all(r))

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        self.requests.append(request)
        future: Future[ConsentDecision] = Future()
        future.set_result(self._decide(request))
        return future


PER_PATH = {
    "message": "Profile the sales and write the report",
    "requestedPaths": [
        {"path": "data/sales.csv", "operations": ["read"]},
        {"path": "data/sales.report.md", "operations": ["write"]},
    ],
}


def test_per_path_items_grant_each_path_only_what_was_asked(broker: Broker, sales: Path) -> None:
    asked = Recorder()
    conn = broker.connect("analysis", consenter=asked)
    result = conn.handle("files/consent", PER_PATH)
    assert result["granted"] is True
    assert result["approvedPaths"] == ["data/sales.csv", "data/sales.report.md"]
    assert result["operations"] == ["read", "write"]  # the union, for clients of the flat form
    assert result["approved"] == [
        {"path": "data/sales.csv", "operations": ["read"]},
        {"path": "data/sales.report.md", "operations": ["write"]},
    ]
    [request] = asked.requests
    assert request.per_path and request.operations == ("read", "write")
    assert [request.operations_of(item) for item in request.items] == [("read",), ("write",)]
    assert conn.handle("files/read", {"path": "data/sales.csv"})["content"].startswith("region")
    conn.handle("files/write", {"path": "data/sales.report.md", "content": "new"})
    # Write on the raw data was never asked, so never granted; nor read on the report.
    assert error_of(conn, "files/write", {"path": "data/sales.csv", "content": "x"}).reason == "not_granted"
    assert error_of(conn, "files/read", {"path": "data/sales.report.md"}).reason == "not_granted"
    assert sorted((g.path, g.operations) for g in conn.grants()) == [
        ("data/sales.csv", ("read",)),
        ("data/sales.report.md", ("write",)),
    ]


def test_the_user_narrows_one_path(broker: Broker, sales: Path) -> None:
    def read_only_on_data(request: ConsentRequest) -> ConsentDecision:
        return ConsentDecision.per_path({"data/sales.csv": ("read",), "data/sales.report.md": ("write",)})

    conn = broker.connect("analysis", consenter=Recorder(read_only_on_data))
    result = conn.handle(
        "files/consent",
        {
            "message": "flat",
            "requestedPaths": ["data/sales.csv", "data/sales.report.md"],
            "operations": ["read", "write"],
        },
    )
    assert result["approved"] == [
        {"path": "data/sales.csv", "operations": ["read"]},
        {"path": "data/sales.report.md", "operations": ["write"]},
    ]
    refused = error_of(conn, "files/write", {"path": "data/sales.csv", "content": "x"})
    assert refused.reason == "not_granted" and refused.data["cause"] == "consent_narrowed"
    assert "write" in refused.message and "data/sales.csv" in refused.message
    assert "approved less" in refused.message


def test_flat_requests_keep_their_flat_answer(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=Recorder())
    result = conn.handle(
        "files/consent", {"requestedPaths": ["data/sales.csv", "data/raw"], "operations": ["read"]}
    )
    assert result == {
        "granted": True,
        "approvedPaths": ["data/sales.csv", "data/raw"],
        "operations": ["read"],
    }


def test_already_granted_paths_are_approved_without_asking(broker: Broker, sales: Path) -> None:
    asked = Recorder()
    conn = broker.connect("analysis", consenter=asked)
    conn.handle("files/consent", {"requestedPaths": ["data/raw"], "operations": ["read"]})
    assert len(asked.requests) == 1
    # Everything asked is covered already: nobody is asked, the answer comes at once.
    again = conn.handle("files/consent", {"requestedPaths": ["data/raw/a.csv"], "operations": ["read"]})
    assert again == {"granted": True, "approvedPaths": ["data/raw/a.csv"], "operations": ["read"]}
    assert len(asked.requests) == 1
    # Partly covered: only the rest is put to the user; the answer lists both.
    both = conn.handle(
        "files/consent", {"requestedPaths": ["data/raw", "data/sales.csv"], "operations": ["read"]}
    )
    assert both["approvedPaths"] == ["data/raw", "data/sales.csv"]
    last = asked.requests[-1]
    assert [item.path for item in last.items] == ["data/sales.csv"]
    assert [item.path for item in last.already] == ["data/raw"]


def test_already_granted_needs_no_one_to_answer(tmp_path: Path, sales: Path) -> None:
    with make_broker(tmp_path) as b:
        b.add_root(sales, name="data")
        b.allow("data/raw", ops=("read", "watch"))
        conn = b.connect("cli", consenter=DenyingConsenter())
        assert conn.handle("files/consent", {"requestedPaths": ["data/raw"], "operations": ["read"]})[
            "granted"
        ]
        refused = conn.handle(
            "files/consent", {"requestedPaths": ["data/raw"], "operations": ["read", "write"]}
        )
        assert refused == {"granted": False, "approvedPaths": [], "operations": []}
        denied = error_of(conn, "files/write", {"path": "data/raw/a.csv", "content": "x"})
        assert denied.data["cause"] == "no_one_to_ask" and "no one could be asked" in denied.message


def test_one_grant_per_connection_and_path(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=Recorder())
    conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read"]})
    first = conn.grants()
    conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["write"]})
    [merged] = conn.grants()
    assert merged.id == first[0].id and merged.operations == ("read", "write")
    # A directory grant absorbs what it covers; a file below it adds nothing.
    conn.handle("files/consent", {"requestedPaths": ["data/raw/a.csv"], "operations": ["read"]})
    conn.handle("files/consent", {"requestedPaths": ["data"], "operations": ["read", "write"]})
    assert [(g.path, g.operations) for g in conn.grants()] == [("data", ("read", "write"))]
    conn.handle("files/consent", {"requestedPaths": ["data/raw", "data/sales.csv"], "operations": ["read"]})
    assert len(conn.grants()) == 1


def test_revoke_reports_exactly_what_was_taken_and_leaves_nothing_behind(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=Recorder())
    for _ in range(3):  # repeated consents: no duplicates to keep read alive after a revoke
        conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read", "write"]})
    [grant] = conn.grants()
    revoked = broker.grants.revoke(grant.id)
    assert revoked.operations == ("read", "write")
    assert conn.grants() == ()
    refused = error_of(conn, "files/read", {"path": "data/sales.csv"})
    assert refused.reason == "not_granted" and refused.data["cause"] == "revoked"
    assert "the user revoked it" in refused.message


def test_revoke_some_operations_narrows_the_grant(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=Recorder())
    conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read", "write"]})
    [before] = conn.revoke("data/sales.csv", ("write",))
    assert before.operations == ("read", "write")
    [after] = conn.grants()
    assert after.id == before.id and after.operations == ("read",)
    assert conn.handle("files/read", {"path": "data/sales.csv"})["eof"] is True
    assert (
        error_of(conn, "files/write", {"path": "data/sales.csv", "content": "x"}).data["cause"] == "revoked"
    )


def test_a_denied_consent_is_named_in_the_next_refusal(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=Recorder(lambda r: ConsentDecision.deny()))
    first = error_of(conn, "files/read", {"path": "data/sales.csv"})
    assert "cause" not in first.data and "data/sales.csv" in first.message and "read" in first.message
    refused = conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read"]})
    assert refused == {"granted": False, "approvedPaths": [], "operations": []}
    error = error_of(conn, "files/read", {"path": "data/sales.csv"})
    wire = to_jsonrpc_error(error)
    assert wire["data"]["reason"] == "not_granted"  # still one a consent may cure: a server may ask again
    assert wire["data"]["cause"] == "consent_denied"
    assert wire["message"] == "no read access to data/sales.csv: the user denied it"
    records = [r for r in broker.audit.records() if r.method == "files/consent"]
    assert (records[-1].decision, records[-1].reason, records[-1].cause) == (
        "deny",
        "consent_refused",
        "consent_denied",
    )
    assert records[-1].to_json()["cause"] == "consent_denied"
    # Approved later, the note goes.
    conn.consenter = Recorder()
    conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read"]})
    assert conn.handle("files/read", {"path": "data/sales.csv"})["eof"] is True


def test_a_consent_that_times_out_says_so(tmp_path: Path, sales: Path) -> None:
    class Silent:
        def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
            return Future()

    with make_broker(tmp_path, limits=Limits(consent_timeout=0.2)) as b:
        b.add_root(sales, name="data")
        conn = b.connect("analysis", consenter=Silent())
        conn.handle("files/consent", {"requestedPaths": ["data/sales.csv"], "operations": ["read"]})
        error = error_of(conn, "files/read", {"path": "data/sales.csv"})
        assert error.data["cause"] == "consent_timeout" and "timed out" in error.message


def test_a_closed_connection_says_why(broker: Broker, sales: Path) -> None:
    broker.allow("data", ops=("read",))
    conn = broker.connect("analysis")
    conn.close("closed by the user")
    error = error_of(conn, "files/read", {"path": "data/sales.csv"})
    assert error.reason == "connection_closed" and "closed by the user" in error.message


@pytest.mark.parametrize(
    "items",
    [
        [{"operations": ["read"]}],
        [{"path": "data/sales.csv", "operations": ["fly"]}],
        [{"path": "data/sales.csv", "operations": []}],
        [{"path": "data/sales.csv", "operations": "read"}],
        [42],
    ],
)
def test_malformed_items_are_invalid_params(broker: Broker, sales: Path, items: list[object]) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(ConsentDecision.approve_all))
    with pytest.raises(InvalidParams):
        conn.handle("files/consent", {"requestedPaths": items})


def test_an_object_item_without_operations_asks_for_the_requests(broker: Broker, sales: Path) -> None:
    asked = Recorder()
    conn = broker.connect("analysis", consenter=asked)
    result = conn.handle(
        "files/consent", {"requestedPaths": [{"path": "data/sales.csv"}], "operations": ["read", "watch"]}
    )
    assert result["approved"] == [{"path": "data/sales.csv", "operations": ["read", "watch"]}]
    with pytest.raises(PermissionDenied):
        conn.handle("files/write", {"path": "data/sales.csv", "content": "x"})
