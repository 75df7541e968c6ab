"""``files/changes``: a watch's events handed over by cursor, for a wire without notifications.

The cursor, ``waitMs``, ``maxEvents``, ``dropped``, ``unknown_watch`` and ``bad_cursor`` as
PROTOCOL.md says ("Watching: ``files/changes``"); a ``files/changes`` that waits holds no thread
and no other request.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.change_log import ChangeLog
from jupyter_fsbroker.core.changes import ChangeEvent
from jupyter_fsbroker.core.errors import FilesError
from tests.core.conftest import error_of
from tests.support.brokers import ALL_OPS


@pytest.fixture
def modern(broker: Broker) -> Connection:
    """A connection with everything granted that has no notifications: it keeps every watch's events."""
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("modern")
    conn.keep_changes()
    return conn


def _event(watch_id: str, n: int) -> ChangeEvent:
    return ChangeEvent(
        watch_id=watch_id, path=f"data/f{n}", event="modified", timestamp=f"2026-12-03T12:00:0{n}.000Z"
    )


def _paths(result: dict[str, Any]) -> list[str]:
    return [event["path"] for event in result["events"]]


def test_changes_hands_over_the_events_after_each_cursor(data: Path, modern: Connection) -> None:
    watch_id = modern.handle("files/watch", {"path": "data"})["watchId"]
    modern.handle("files/write", {"path": "data/a.txt", "content": "1"})
    first = modern.handle("files/changes", {"watchId": watch_id, "waitMs": 30_000})
    assert _paths(first) == ["data/a.txt"] and first["dropped"] is False
    assert first["events"][0]["watchId"] == watch_id and first["events"][0]["event"] == "created"
    # Nothing new after the cursor: an answer at once without waitMs, the same cursor.
    again = modern.handle("files/changes", {"watchId": watch_id, "cursor": first["cursor"]})
    assert again == {"events": [], "cursor": first["cursor"], "dropped": False}
    modern.handle("files/write", {"path": "data/b.txt", "content": "2"})
    second = modern.handle(
        "files/changes", {"watchId": watch_id, "cursor": first["cursor"], "waitMs": 30_000}
    )
    assert _paths(second) == ["data/b.txt"]
    # Without a cursor: from the watch's start.
    assert _paths(modern.handle("files/changes", {"watchId": watch_id})) == ["data/a.txt", "data/b.txt"]
    records = [r for r in modern.broker.audit.records() if r.method == "files/changes"]
    assert len(records) == 4 and all(r.decision == "allow" for r in records)


def test_events_kept_before_a_revocation_are_not_handed_over(data: Path, broker: Broker) -> None:
    (data / "pub").mkdir()
    broker.allow("data", ops=("read", "write"))
    grant = broker.allow("data/pub", ops=("watch",))
    conn = broker.connect("modern")
    conn.keep_changes()
    watch_id = conn.handle("files/watch", {"path": "data/pub"})["watchId"]
    conn.handle("files/write", {"path": "data/pub/a.txt", "content": "1"})
    first = conn.handle("files/changes", {"watchId": watch_id, "waitMs": 30_000})
    assert _paths(first) == ["data/pub/a.txt"]
    broker.grants.revoke(grant.id)
    # Kept while granted, asked for after the revocation: passed over, the cursor moves on.
    assert conn.handle("files/changes", {"watchId": watch_id})["events"] == []


def test_max_events_pages_and_dropped_says_events_were_lost() -> None:
    log = ChangeLog(capacity=3)
    log.keep_all()
    for n in range(5):
        log.add(_event("w_1", n))
    # Events 0 and 1 went first: an answer from before them says so.
    page = log.take("w_1", None, 2)
    assert [e.path for e in page.events] == ["data/f2", "data/f3"] and page.dropped is True
    rest = log.take("w_1", page.cursor, 10)
    assert [e.path for e in rest.events] == ["data/f4"] and rest.dropped is False
    assert log.take("w_1", rest.cursor, 10).events == ()


def test_unknown_watches_and_cursors_are_refused(broker: Broker, modern: Connection) -> None:
    watch_id = modern.handle("files/watch", {"path": "data"})["watchId"]
    other = broker.connect("other")
    assert error_of(other, "files/changes", {"watchId": watch_id}).reason == "unknown_watch"
    assert error_of(modern, "files/changes", {"watchId": "w_nope"}).reason == "unknown_watch"
    for cursor in ("e99", "nonsense", "e-1"):
        error = error_of(modern, "files/changes", {"watchId": watch_id, "cursor": cursor})
        assert (error.code, error.reason) == (-32602, "bad_cursor")
    assert error_of(modern, "files/changes", {"watchId": watch_id, "maxEvents": 0}).code == -32602
    modern.handle("files/unwatch", {"watchId": watch_id})
    assert error_of(modern, "files/changes", {"watchId": watch_id}).reason == "unknown_watch"


def test_with_notifications_a_watch_is_kept_from_its_first_changes(data: Path, broker: Broker) -> None:
    broker.allow("data", ops=ALL_OPS)
    heard: list[ChangeEvent] = []
    conn = broker.connect("legacy", notify=heard.append)
    watch_id = conn.handle("files/watch", {"path": "data"})["watchId"]
    start = conn.handle("files/changes", {"watchId": watch_id})
    assert start["events"] == []
    (data / "x.txt").write_text("x")
    got = conn.handle("files/changes", {"watchId": watch_id, "cursor": start["cursor"], "waitMs": 30_000})
    assert _paths(got) == ["data/x.txt"]
    assert [e.path for e in heard] == ["data/x.txt"]  # and notified as ever


@pytest.mark.anyio
async def test_a_waiting_changes_holds_no_other_request(data: Path, modern: Connection) -> None:
    (data / "r.txt").write_text("read me")
    watch_id = (await modern.ahandle("files/watch", {"path": "data"}))["watchId"]
    waiting = asyncio.ensure_future(modern.ahandle("files/changes", {"watchId": watch_id, "waitMs": 30_000}))
    # Many more requests than the broker has worker threads, while it waits: none is held.
    reads = await asyncio.gather(*(modern.ahandle("files/read", {"path": "data/r.txt"}) for _ in range(64)))
    assert all(read["content"] == "read me" for read in reads)
    assert not waiting.done()
    await modern.ahandle("files/write", {"path": "data/w.txt", "content": "new"})
    answer = await waiting
    assert _paths(answer) == ["data/w.txt"]


@pytest.mark.anyio
async def test_closing_the_connection_ends_a_waiting_changes(modern: Connection) -> None:
    watch_id = (await modern.ahandle("files/watch", {"path": "data"}))["watchId"]
    waiting = asyncio.ensure_future(modern.ahandle("files/changes", {"watchId": watch_id, "waitMs": 30_000}))
    await asyncio.sleep(0)  # one turn of this loop: the request runs up to its wait
    modern.close("closed by the user")
    with pytest.raises(FilesError) as info:
        await asyncio.wait_for(waiting, 10)
    assert info.value.reason == "connection_closed"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_log_ignores_watches_it_does_not_keep() -> None:
    log = ChangeLog()
    log.add(_event("w_1", 0))  # not kept: a connection with notifications, no files/changes yet
    assert log.take("w_1", None, 10).events == ()
