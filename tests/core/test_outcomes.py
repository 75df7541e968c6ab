"""One vocabulary for how a request ended: the words and tones every view shows, from real consent flows."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from jupyter_fsbroker.core.audit import AuditRecord
from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.consent import (
    CallbackConsenter,
    ConsentDecision,
    ConsentRequest,
    withdrawal_reason,
)
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.outcomes import (
    ALLOWED,
    ASKED,
    FAILED,
    NOT_YET,
    REFUSED,
    TIMED_OUT,
    WITHDRAWN,
    RecordOutcome,
    outcome,
    outcomes,
)

from .conftest import error_of

READ_SALES = {"requestedPaths": ["data/sales.csv"], "operations": ["read"]}


@pytest.fixture
def sales(data: Path) -> Path:
    (data / "sales.csv").write_text("region,amount\nnorth,10\n")
    (data / ".env").write_text("TOKEN=x\n")
    return data


def shown(broker: Broker) -> list[tuple[str, str | None, str, str]]:
    """Each record as a view shows it: method, path, word, tone."""
    records = broker.audit.records()
    return [
        (r.method, r.canonical or r.path, o.word, o.tone)
        for r, o in zip(records, outcomes(records), strict=True)
    ]


def test_the_words_and_tones() -> None:
    assert RecordOutcome("allowed", "green") == ALLOWED
    assert (ASKED.word, ASKED.tone) == ("asked for consent", "grey")
    assert (NOT_YET.word, NOT_YET.tone) == ("not granted yet", "grey")
    assert (WITHDRAWN.word, WITHDRAWN.tone) == ("withdrawn", "grey")
    assert (TIMED_OUT.word, TIMED_OUT.tone) == ("timed out", "grey")
    assert (FAILED.word, FAILED.tone) == ("failed", "grey")
    assert REFUSED.to_json() == {"word": "refused", "tone": "red"}


def test_a_refusal_before_consent_is_asked_for_consent_and_the_approval_allowed(
    broker: Broker, sales: Path
) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(ConsentDecision.approve_all))
    error_of(conn, "files/read", {"path": "data/sales.csv"})
    assert shown(broker)[-1][2:] == ("not granted yet", "grey")  # no consent asked yet
    conn.handle("files/consent", READ_SALES)
    conn.handle("files/read", {"path": "data/sales.csv"})
    assert [row[2:] for row in shown(broker)] == [
        ("asked for consent", "grey"),
        ("allowed", "green"),
        ("allowed", "green"),
    ]


def test_the_users_denial_is_red_and_does_not_stick_to_the_next_flow(broker: Broker, sales: Path) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(lambda request: ConsentDecision.deny()))
    error_of(conn, "files/read", {"path": "data/sales.csv"})
    conn.handle("files/consent", READ_SALES)
    # The next call starts the same way; the server still learns why on the wire...
    again = error_of(conn, "files/read", {"path": "data/sales.csv"})
    assert again.data["cause"] == "consent_denied"
    conn.consenter = CallbackConsenter(ConsentDecision.approve_all)
    conn.handle("files/consent", READ_SALES)
    records = broker.audit.records()
    # ... but the record is this request's own: no earlier consent's cause, grey, not red.
    assert [(r.method, r.decision, r.reason, r.cause) for r in records] == [
        ("files/read", "deny", "not_granted", None),
        ("files/consent", "deny", "consent_refused", "consent_denied"),
        ("files/read", "deny", "not_granted", None),
        ("files/consent", "allow", None, None),
    ]
    assert [row[2:] for row in shown(broker)] == [
        ("asked for consent", "grey"),
        ("refused", "red"),
        ("asked for consent", "grey"),
        ("allowed", "green"),
    ]


def test_the_rules_refusals_are_red(broker: Broker, sales: Path) -> None:
    broker.allow("data", ops=("read",))
    conn = broker.connect("analysis")
    error_of(conn, "files/read", {"path": "/etc/passwd"})
    error_of(conn, "files/read", {"path": "data/.env"})
    error_of(conn, "files/read", {"path": "data/missing.csv"})  # allowed, and failed: not a refusal
    broker.grants.revoke(broker.grants.grants()[0].id)
    error_of(conn, "files/read", {"path": "data/sales.csv"})  # the user took the grant back
    assert [row[2:] for row in shown(broker)] == [
        ("refused", "red"),
        ("refused", "red"),
        ("failed", "grey"),
        ("refused", "red"),
    ]
    assert broker.audit.records()[-1].cause == "revoked"


def test_a_consent_record_names_the_first_path_put_to_the_user(broker: Broker, sales: Path) -> None:
    broker.allow("data/sales.csv", ops=("read",))
    asked: list[ConsentRequest] = []

    def approve(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        return ConsentDecision.approve_all(request)

    conn = broker.connect("analysis", consenter=CallbackConsenter(approve))
    conn.handle(
        "files/consent",
        {
            "requestedPaths": [
                {"path": "data/sales.csv", "operations": ["read"]},
                {"path": "data/sales.report.md", "operations": ["write"]},
            ]
        },
    )
    [request] = asked
    assert [item.path for item in request.items] == ["data/sales.report.md"]
    [record] = broker.audit.records()
    assert (record.path, record.canonical, record.root) == (
        "data/sales.report.md",
        "data/sales.report.md",
        "data",
    )


class Holding:
    """A consenter that never answers: the prompt stays up until it is withdrawn."""

    def __init__(self) -> None:
        self.shown = threading.Event()
        self.futures: list[Future[ConsentDecision]] = []

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        self.futures.append(future)
        self.shown.set()
        return future


def test_a_consent_cancelled_with_its_call_is_recorded_withdrawn(broker: Broker, sales: Path) -> None:
    holding = Holding()
    conn = broker.connect("analysis", consenter=holding)

    async def cancel_while_asking() -> None:
        task = asyncio.ensure_future(conn.ahandle("files/consent", READ_SALES))
        assert await asyncio.get_running_loop().run_in_executor(None, holding.shown.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_while_asking())
    # The prompt says which withdrawal it was: the server's cancellation, not the connection closing.
    assert [withdrawal_reason(future) for future in holding.futures] == ["the server cancelled its request"]
    [record] = broker.audit.records()
    assert (record.decision, record.reason, record.cause) == ("deny", "consent_refused", "consent_withdrawn")
    assert outcome(record) == WITHDRAWN
    # Like any withdrawn prompt, it explains the next refusal on the wire.
    assert error_of(conn, "files/read", {"path": "data/sales.csv"}).data["cause"] == "consent_withdrawn"


def test_a_consent_withdrawn_by_the_closing_connection_is_recorded_withdrawn(
    broker: Broker, sales: Path
) -> None:
    holding = Holding()
    conn = broker.connect("analysis", consenter=holding)
    failed: list[BaseException] = []

    def ask(connection: Connection) -> None:
        try:
            connection.handle("files/consent", READ_SALES)
        except FilesError as exc:  # pragma: no cover - a refusal is an answer, not an error
            failed.append(exc)

    worker = threading.Thread(target=ask, args=(conn,))
    worker.start()
    assert holding.shown.wait(10)
    conn.close()
    worker.join(10)
    assert not worker.is_alive() and not failed
    [record] = broker.audit.records(server="analysis")
    assert (record.decision, record.cause) == ("deny", "consent_withdrawn")
    assert [withdrawal_reason(future) for future in holding.futures] == ["the connection closed"]
    assert outcome(record) == WITHDRAWN


def test_a_consent_no_one_answered_is_timed_out() -> None:
    record = AuditRecord(
        1.0,
        "analysis",
        "c1",
        "files/consent",
        "data",
        "data",
        "data",
        "deny",
        reason="consent_refused",
        cause="consent_timeout",
    )
    assert outcome(record) == TIMED_OUT
