"""``audit_required``: a request whose audit cannot be written first is refused and changes nothing.

The failing audit file is ``/dev/full``, a device on which every write fails with ENOSPC, as on
a full disk; ``tests/reliability/test_audit_fails.py`` makes a file fail in the middle of a run.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.errors import ConfigError, FilesError
from tests.support.brokers import ALL_OPS, make_broker

FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")


def shared(broker: Broker, data: Path) -> Broker:
    broker.add_root(data, name="data")
    broker.allow("data", ops=ALL_OPS)
    return broker


def test_required_and_written_first_one_record_per_request(tmp_path: Path, data: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    (data / "x.txt").write_text("old")
    with shared(make_broker(tmp_path, audit_path=str(audit), audit_required=True), data) as broker:
        conn = broker.connect("writer")
        conn.handle("files/read", {"path": "data/x.txt"})
        conn.handle("files/write", {"path": "data/x.txt", "content": "new"})
        with pytest.raises(FilesError):
            conn.handle("files/read", {"path": "data/missing.txt"})
        records = broker.audit.records()
    assert [(r.method, r.decision, r.error) for r in records] == [
        ("files/read", "allow", None),
        ("files/write", "allow", None),
        ("files/read", "allow", "NOT_FOUND"),
    ]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    intents = [line for line in lines if line.get("phase") == "intent"]
    outcomes = [line for line in lines if "phase" not in line]
    assert len(intents) == len(outcomes) == 3
    for intent, outcome, record in zip(intents, outcomes, records, strict=True):
        # Each intent comes before its outcome, and the two carry the same id.
        assert lines.index(intent) < lines.index(outcome)
        assert intent["auditId"] == outcome["auditId"] == record.audit_id
        assert (intent["method"], intent["path"], intent["server"]) == (
            outcome["method"],
            outcome["path"],
            "writer",
        )
    assert len({r.audit_id for r in records}) == 3


def test_required_and_unwritable_refuses_and_changes_nothing(
    tmp_path: Path, data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (data / "x.txt").write_text("old")
    with shared(make_broker(tmp_path, audit_path=str(FULL), audit_required=True), data) as broker:
        conn = broker.connect("writer")
        with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker.core"):
            for method, params in (
                ("files/write", {"path": "data/x.txt", "content": "new"}),
                ("files/delete", {"path": "data/x.txt"}),
                ("files/create", {"path": "data/y.txt", "type": "file"}),
                ("files/read", {"path": "data/x.txt"}),
            ):
                with pytest.raises(FilesError) as info:
                    conn.handle(method, params)
                error = info.value
                assert (error.name, error.code, error.reason) == (
                    "PERMISSION_DENIED",
                    -32101,
                    "audit_unavailable",
                )
                assert "/dev/full" not in error.message and "audit record" in error.message
        assert (data / "x.txt").read_text() == "old"
        assert sorted(os.listdir(data)) == ["x.txt"]
        assert broker.trash.list() == ()
        records = broker.audit.records()
        assert [(r.decision, r.reason) for r in records] == [("deny", "audit_unavailable")] * 4
        assert "No space left on device" in caplog.text


def test_not_required_a_failing_audit_is_logged_and_requests_go_on(
    tmp_path: Path, data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (data / "x.txt").write_text("old")
    with shared(make_broker(tmp_path, audit_path=str(FULL)), data) as broker:
        conn = broker.connect("writer")
        with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker.core.audit"):
            conn.handle("files/write", {"path": "data/x.txt", "content": "new"})
        assert (data / "x.txt").read_text() == "new"
        assert "cannot write to the audit file" in caplog.text
        assert [(r.method, r.decision) for r in broker.audit.records()] == [("files/write", "allow")]


def test_the_users_restore_is_refused_too(tmp_path: Path, data: Path) -> None:
    (data / "x.txt").write_text("old")
    with shared(make_broker(tmp_path), data) as broker:
        broker.connect("deleter").handle("files/delete", {"path": "data/x.txt"})
    with make_broker(tmp_path, audit_path=str(FULL), audit_required=True) as broker:
        [entry] = broker.trash.list()
        with pytest.raises(ConfigError, match="the audit file cannot be written"):
            broker.trash.restore(entry)
        with pytest.raises(ConfigError, match="the audit file cannot be written"):
            broker.trash.empty()
        assert broker.trash.list() == (entry,)
        assert not (data / "x.txt").exists()


def test_required_needs_a_file_and_stays_as_the_broker_started(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="audit_required needs an audit file"):
        make_broker(tmp_path, audit_required=True)
    with make_broker(tmp_path, audit_path=str(tmp_path / "a.jsonl")) as broker:
        with pytest.raises(ConfigError, match="cannot change while the broker runs"):
            broker.configure(audit_required=True)
        assert broker.config.audit_required is False
