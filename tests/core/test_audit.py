from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from jupyter_fsbroker.core.audit import USER_ACTOR, AuditLog, AuditRecord, new_audit_id
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.wire.timestamps import iso_utc as iso_utc_ms


def rec(
    server: str = "s1",
    method: str = "files/read",
    *,
    decision: str = "allow",
    nbytes: int = 0,
    path: str | None = "data/x.csv",
    time: float = 1_796_040_000.123456,
    error: str | None = None,
) -> AuditRecord:
    return AuditRecord(
        time=time,
        server=server,
        connection_id="c1",
        method=method,
        path=path,
        canonical=path,
        root="data" if path else None,
        decision=decision,
        error=error,
        bytes=nbytes,
    )


def test_iso_utc_ms() -> None:
    assert iso_utc_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_utc_ms(1.9999) == "1970-01-01T00:00:01.999Z"


def test_to_json_camel_case() -> None:
    r = AuditRecord(
        time=0.25,
        server="srv",
        connection_id="conn-1",
        method="files/write",
        path="/abs/data/x.csv",
        canonical="data/x.csv",
        root="data",
        decision="deny",
        error="PERMISSION_DENIED",
        reason="not_granted",
        bytes=12,
        duration_ms=1.23456,
        lock_id="lock_abc",
    )
    assert r.to_json() == {
        "time": "1970-01-01T00:00:00.250Z",
        "server": "srv",
        "connectionId": "conn-1",
        "method": "files/write",
        "path": "/abs/data/x.csv",
        "canonical": "data/x.csv",
        "root": "data",
        "decision": "deny",
        "error": "PERMISSION_DENIED",
        "reason": "not_granted",
        "bytes": 12,
        "durationMs": 1.235,
        "lockId": "lock_abc",
    }
    json.dumps(r.to_json())


def test_ring_buffer_and_filters() -> None:
    log = AuditLog(capacity=3)
    for i in range(5):
        log.append(rec(server="a" if i % 2 == 0 else "b", nbytes=i))
    records = log.records()
    assert [r.bytes for r in records] == [2, 3, 4]
    assert [r.bytes for r in log.records(server="a")] == [2, 4]
    assert [r.bytes for r in log.records(limit=2)] == [3, 4]
    assert log.records(limit=0) == ()
    assert [r.bytes for r in log.records(server="b", limit=5)] == [3]
    with pytest.raises(ValueError):
        log.records(limit=-1)


def test_totals_count_everything_ever_appended() -> None:
    log = AuditLog(capacity=1)
    log.append(rec("a", "files/read", nbytes=100))
    log.append(rec("a", "files/write", nbytes=10))
    log.append(rec("a", "files/create", nbytes=5))
    log.append(rec("a", "files/list", nbytes=999))
    log.append(rec("a", "files/read", decision="deny", error="PERMISSION_DENIED"))
    log.append(rec("b", "files/read", nbytes=7))
    assert len(log.records()) == 1
    assert log.totals() == {
        "a": {"read": 100, "written": 15, "allowed": 4, "denied": 1},
        "b": {"read": 7, "written": 0, "allowed": 1, "denied": 0},
    }
    # A copy, not the live state.
    log.totals()["a"]["read"] = 0
    assert log.totals()["a"]["read"] == 100


def test_bad_capacity() -> None:
    with pytest.raises(ConfigError):
        AuditLog(capacity=0)


def test_subscribe_and_unsubscribe(caplog: pytest.LogCaptureFixture) -> None:
    log = AuditLog()
    seen: list[AuditRecord] = []

    def bad(record: AuditRecord) -> None:
        raise RuntimeError("boom")

    unsubscribe = log.subscribe(seen.append)
    log.subscribe(bad)
    first = rec()
    with caplog.at_level(logging.ERROR, logger="jupyter_fsbroker.core.audit"):
        log.append(first)
    assert seen == [first]
    assert "listener failed" in caplog.text
    unsubscribe()
    unsubscribe()
    log.append(rec())
    assert seen == [first]


def test_listener_called_outside_lock() -> None:
    log = AuditLog()
    inner: list[int] = []
    # A listener that reads the log must not deadlock.
    log.subscribe(lambda r: inner.append(len(log.records())))
    log.append(rec())
    assert inner == [1]


def test_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path=path) as log:
        assert log.path == str(path)
        log.append(rec(nbytes=3))
        # Flushed per record: readable before close.
        lines = path.read_text().splitlines()
        assert len(lines) == 1
        log.append(rec(method="files/delete", decision="deny", error="NOT_FOUND", path="data/é.csv"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = path.read_text().splitlines()
    assert [json.loads(line)["method"] for line in lines] == ["files/read", "files/delete"]
    assert json.loads(lines[1])["path"] == "data/é.csv"
    assert "content" not in json.loads(lines[0])
    # Appends to an existing file.
    with AuditLog(path=path) as log:
        log.append(rec())
    assert len(path.read_text().splitlines()) == 3


def test_close_is_idempotent_and_memory_still_works(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path=path)
    log.close()
    log.close()
    log.append(rec())
    assert len(log.records()) == 1
    assert path.read_text() == ""


def test_unopenable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        AuditLog(path=tmp_path / "missing" / "audit.jsonl")


#: A device every write to fails with ENOSPC: a full disk, for real, on any Linux.
FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")


@needs_dev_full
def test_failing_write_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with AuditLog(path=FULL) as log:
        with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker.core.audit"):
            log.append(rec())
            log.append(rec())
        assert len(log.records()) == 2
        assert caplog.text.count("cannot write to the audit file") == 1
        assert "No space left on device" in caplog.text


@needs_dev_full
def test_an_intent_that_cannot_be_written_raises() -> None:
    with AuditLog(path=FULL) as log:
        with pytest.raises(OSError) as info:
            log.begin("a_1", time=1.0, server="s", connection_id="c1", method="files/write", path="data/x")
        assert info.value.errno == errno.ENOSPC
        assert log.records() == ()  # an intent is never a record


def test_an_intent_is_a_line_its_record_pairs_with(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path=path) as log:
        log.begin(
            "a_0123",
            time=1_796_040_000.5,
            server="s1",
            connection_id="c1",
            method="files/read",
            path="data/x.csv",
        )
        log.append(dataclasses.replace(rec(), audit_id="a_0123"))
        assert [r.audit_id for r in log.records()] == ["a_0123"]
    intent, record = (json.loads(line) for line in path.read_text().splitlines())
    assert intent == {
        "phase": "intent",
        "auditId": "a_0123",
        "time": "2026-11-30T12:00:00.500Z",
        "server": "s1",
        "connectionId": "c1",
        "method": "files/read",
        "path": "data/x.csv",
    }
    assert record["auditId"] == "a_0123" and "phase" not in record
    assert new_audit_id() != new_audit_id() and new_audit_id().startswith("a_")


def test_begin_without_a_file_or_after_close_raises(tmp_path: Path) -> None:
    with AuditLog() as log, pytest.raises(OSError):
        log.begin("a_1", time=1.0, server="s", connection_id="c1", method="files/read", path=None)
    log = AuditLog(path=tmp_path / "audit.jsonl")
    log.close()
    with pytest.raises(OSError):
        log.begin("a_1", time=1.0, server="s", connection_id="c1", method="files/read", path=None)


def test_the_users_and_the_brokers_records_are_not_counted_as_a_servers(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path=path) as log:
        log.append(rec(nbytes=5))
        user_server, user = USER_ACTOR
        log.append(dataclasses.replace(rec(user_server, "trash/restore", nbytes=9), actor=user))
        assert log.totals() == {"s1": {"read": 5, "written": 0, "allowed": 1, "denied": 0}}
        assert len(log.records()) == 2
    server_line, user_line = (json.loads(line) for line in path.read_text().splitlines())
    assert "actor" not in server_line
    assert (user_line["actor"], user_line["server"], user_line["method"]) == (
        "user",
        "(you)",
        "trash/restore",
    )


def test_thread_safety(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(capacity=10_000, path=path)
    count: list[int] = []
    log.subscribe(lambda r: count.append(1))

    def work(server: str) -> None:
        for _ in range(500):
            log.append(rec(server, nbytes=1))

    threads = [threading.Thread(target=work, args=(f"s{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    assert len(log.records()) == 2000
    assert len(count) == 2000
    assert all(
        log.totals()[f"s{i}"] == {"read": 500, "written": 0, "allowed": 500, "denied": 0} for i in range(4)
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 2000
    for line in lines:
        json.loads(line)
