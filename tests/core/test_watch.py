"""Tests of jupyter_fsbroker.core.watch (real inotify events, no sleeping)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jupyter_fsbroker.core.errors import (
    ClosedError,
    InvalidParams,
    NotFound,
    PermissionDenied,
    WrongType,
)
from jupyter_fsbroker.core.roots import Root, RootSet
from jupyter_fsbroker.core.watch import EVENTS, ChangeEvent, WatchInfo, WatchManager

TIMEOUT = 30.0  # seconds: a safety net for events expected at once (inotify, the dispatcher thread)

Accept = Callable[[Root, tuple[str, ...]], bool]


def accept_all(root: Root, parts: tuple[str, ...]) -> bool:
    return True


def no_tmp(root: Root, parts: tuple[str, ...]) -> bool:
    return not parts[-1].startswith(".tmp")


def write(path: Path, text: str = "x") -> None:
    with open(path, "a") as f:
        f.write(text)


def collect_until(
    q: queue.Queue[ChangeEvent], pred: Callable[[ChangeEvent], bool], timeout: float = TIMEOUT
) -> list[ChangeEvent]:
    """Take events from *q* until one matches *pred*; return all of them (the match last)."""
    deadline = time.monotonic() + timeout
    got: list[ChangeEvent] = []
    while True:
        remaining = deadline - time.monotonic()
        try:
            event = q.get(timeout=max(remaining, 0.001))
        except queue.Empty:
            raise AssertionError(f"timed out waiting for an event; got {got}") from None
        got.append(event)
        if pred(event):
            return got


def until(path: str, kind: str | None = None) -> Callable[[ChangeEvent], bool]:
    return lambda e: e.path == path and (kind is None or e.event == kind)


def pairs(events: list[ChangeEvent]) -> list[tuple[str, str]]:
    return [(e.event, e.path) for e in events]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def root(data: Path) -> Iterator[Root]:
    roots = RootSet()
    yield roots.add(data, name="data")
    roots.close()


@pytest.fixture
def manager() -> Iterator[WatchManager]:
    with WatchManager() as m:
        yield m


def add(
    m: WatchManager,
    root: Root,
    q: queue.Queue[ChangeEvent],
    parts: tuple[str, ...] = (),
    *,
    owner: str = "c1",
    is_dir: bool = True,
    recursive: bool = False,
    events: frozenset[str] = EVENTS,
    accept: Accept = accept_all,
) -> str:
    return m.add(
        owner=owner,
        root=root,
        parts=parts,
        is_dir=is_dir,
        recursive=recursive,
        events=events,
        sink=q.put,
        accept=accept,
    )


#: The wire spells an event's time to the millisecond.
MILLISECOND = 0.001


# -- the wire form ---------------------------------------------------------------------


def test_to_params() -> None:
    ts = datetime(2026, 11, 29, 12, 30, 0, 123000, tzinfo=UTC).timestamp()
    ev = ChangeEvent("w_1", "data/x.csv", "modified", "2026-11-29T12:30:00.123Z")
    assert ev.to_params() == {
        "watchId": "w_1",
        "path": "data/x.csv",
        "event": "modified",
        "timestamp": "2026-11-29T12:30:00.123Z",
    }
    assert ev.time == pytest.approx(ts, abs=1e-6)
    moved = ChangeEvent("w_1", "data/y.csv", "moved", "2026-11-29T12:30:01.123Z", old_path="data/x.csv")
    params = moved.to_params()
    assert params["oldPath"] == "data/x.csv"
    assert ChangeEvent.from_params(params) == moved
    assert {"created", "modified", "deleted", "moved"} == EVENTS


# -- basic events ---------------------------------------------------------------------------


def test_create_modify_move_delete(manager: WatchManager, root: Root, data: Path) -> None:
    q: queue.Queue[ChangeEvent] = queue.Queue()
    wid = add(manager, root, q)
    assert wid.startswith("w_") and len(wid) == 18

    write(data / "a.txt", "hello")
    got = collect_until(q, until("data/a.txt"))
    assert got[-1].event == "created"
    assert got[-1].watch_id == wid

    write(data / "a.txt", " again")
    collect_until(q, until("data/a.txt", "modified"))

    os.rename(data / "a.txt", data / "b.txt")
    moved = collect_until(q, until("data/b.txt"))[-1]
    assert moved.event == "moved"
    assert moved.old_path == "data/a.txt"
    assert moved.to_params()["oldPath"] == "data/a.txt"

    os.unlink(data / "b.txt")
    collect_until(q, until("data/b.txt", "deleted"))


def test_directory_entries(manager: WatchManager, root: Root, data: Path) -> None:
    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q)
    os.mkdir(data / "d1")
    assert collect_until(q, until("data/d1"))[-1].event == "created"
    os.rename(data / "d1", data / "d2")
    moved = collect_until(q, until("data/d2"))[-1]
    assert (moved.event, moved.old_path) == ("moved", "data/d1")
    write(data / "d2" / "inner.txt")  # the directory's own "modified" is noise: not reported
    os.mkdir(data / "sentinel")
    got = collect_until(q, until("data/sentinel"))
    assert all(e.path != "data/d2" for e in got), pairs(got)


# -- coalescing -------------------------------------------------------------------------


def test_burst_is_coalesced(root: Root, data: Path) -> None:
    (data / "a.txt").write_text("start")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    with WatchManager(coalesce=0.2) as m:
        add(m, root, q)
        with open(data / "a.txt", "a") as f:
            for i in range(49):
                f.write(f"line {i}\n")
                f.flush()
            before_last = time.time()
            f.write("last\n")
            f.flush()
        write(data / "zz.txt")  # sentinel: delivered after every event of the burst
        got = collect_until(q, until("data/zz.txt"))
        burst = [e for e in got if e.path == "data/a.txt"]
        assert 1 <= len(burst) <= 3, pairs(got)
        assert all(e.event == "modified" for e in burst)
        assert burst[-1].time >= before_last - MILLISECOND

        # created followed by modified stays created
        with open(data / "new.txt", "w") as f:
            for i in range(10):
                f.write(f"{i}\n")
                f.flush()
        write(data / "zz2.txt")
        got = collect_until(q, until("data/zz2.txt"))
        assert [e.event for e in got if e.path == "data/new.txt"] == ["created"]


# -- scope ------------------------------------------------------------------------------------


def test_file_watch_reports_only_that_file(manager: WatchManager, root: Root, data: Path) -> None:
    (data / "a.txt").write_text("a")
    (data / "b.txt").write_text("b")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q, ("a.txt",), is_dir=False)
    write(data / "b.txt")
    write(data / "a.txt")
    got = collect_until(q, until("data/a.txt"))
    assert pairs(got) == [("modified", "data/a.txt")]

    os.unlink(data / "b.txt")
    os.unlink(data / "a.txt")
    got = collect_until(q, until("data/a.txt", "deleted"))
    assert {e.path for e in got} == {"data/a.txt"}

    # a file watch may start before the file exists
    q2: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q2, ("later.txt",), is_dir=False)
    write(data / "other.txt")
    write(data / "later.txt")
    assert pairs(collect_until(q2, until("data/later.txt"))) == [("created", "data/later.txt")]


def test_recursive_and_not(manager: WatchManager, root: Root, data: Path) -> None:
    (data / "sub").mkdir()
    flat: queue.Queue[ChangeEvent] = queue.Queue()
    deep: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, flat, recursive=False)
    add(manager, root, deep, recursive=True)
    sub_q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, sub_q, ("sub",), recursive=False)

    write(data / "sub" / "g.txt")
    write(data / "top.txt")

    got_flat = collect_until(flat, until("data/top.txt"))
    assert pairs(got_flat) == [("created", "data/top.txt")]

    got_deep = collect_until(deep, until("data/top.txt"))
    assert ("created", "data/sub/g.txt") in pairs(got_deep)
    assert "data/sub" not in [e.path for e in got_deep]  # the directory's own "modified" is noise

    assert pairs(collect_until(sub_q, until("data/sub/g.txt"))) == [("created", "data/sub/g.txt")]


# -- atomic replace, accept, events filter -------------------------------------------------


def test_atomic_replace_is_modified(manager: WatchManager, root: Root, data: Path) -> None:
    (data / "a.txt").write_text("old")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q, accept=no_tmp)
    tmp = data / ".tmp-xyz"
    tmp.write_text("new content")
    os.replace(tmp, data / "a.txt")
    write(data / "zz.txt")
    got = collect_until(q, until("data/zz.txt"))
    assert pairs(got) == [("modified", "data/a.txt"), ("created", "data/zz.txt")]


def test_atomic_replace_onto_watched_file(manager: WatchManager, root: Root, data: Path) -> None:
    (data / "a.txt").write_text("old")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q, ("a.txt",), is_dir=False)
    (data / "a.txt.new").write_text("new")  # accepted, but outside this file watch
    os.replace(data / "a.txt.new", data / "a.txt")
    assert pairs(collect_until(q, until("data/a.txt"))) == [("modified", "data/a.txt")]
    os.rename(data / "a.txt", data / "gone.txt")
    assert pairs(collect_until(q, until("data/a.txt", "deleted"))) == [("deleted", "data/a.txt")]


def test_accept_suppresses_revoked_paths(manager: WatchManager, root: Root, data: Path) -> None:
    revoked = {"secret.txt"}
    seen: list[tuple[str, ...]] = []

    def accept(r: Root, parts: tuple[str, ...]) -> bool:
        assert r == root
        seen.append(parts)
        return parts[-1] not in revoked

    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q, accept=accept)
    write(data / "secret.txt")
    write(data / "visible.txt")
    got = collect_until(q, until("data/visible.txt"))
    assert pairs(got) == [("created", "data/visible.txt")]
    assert ("secret.txt",) in seen  # asked at flush time, and refused

    # a grant revoked later: checked again when the next event is delivered
    revoked.add("visible.txt")
    write(data / "visible.txt")
    write(data / "other.txt")
    got = collect_until(q, until("data/other.txt"))
    assert pairs(got) == [("created", "data/other.txt")]


def test_events_filter(manager: WatchManager, root: Root, data: Path) -> None:
    (data / "m.txt").write_text("m")
    (data / "z.txt").write_text("z")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q, events=frozenset({"deleted"}))
    write(data / "new.txt")
    write(data / "m.txt")
    os.rename(data / "m.txt", data / "n.txt")  # without "moved": deleted (old) + created (new, filtered)
    os.unlink(data / "z.txt")
    got = collect_until(q, until("data/z.txt"))
    assert pairs(got) == [("deleted", "data/m.txt"), ("deleted", "data/z.txt")]


def test_sink_errors_are_logged(
    manager: WatchManager, root: Root, data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    q: queue.Queue[ChangeEvent] = queue.Queue()
    failed = threading.Event()

    def sink(event: ChangeEvent) -> None:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("sink broke")
        q.put(event)

    with caplog.at_level(logging.ERROR, logger="jupyter_fsbroker.core.watch"):
        manager.add(
            owner="c1",
            root=root,
            parts=(),
            is_dir=True,
            recursive=False,
            events=EVENTS,
            sink=sink,
            accept=accept_all,
        )
        write(data / "first.txt")
        assert failed.wait(TIMEOUT)
        write(data / "second.txt")
        collect_until(q, until("data/second.txt"))
    assert any("sink failed" in r.getMessage() for r in caplog.records)


# -- lifecycle --------------------------------------------------------------------------------


def test_remove_stops_delivery_and_threads(root: Root, data: Path) -> None:
    before = set(threading.enumerate())
    m = WatchManager()
    qa: queue.Queue[ChangeEvent] = queue.Queue()
    qb: queue.Queue[ChangeEvent] = queue.Queue()
    wa = add(m, root, qa, owner="a")
    wb = add(m, root, qb, owner="b")
    write(data / "f1.txt")
    collect_until(qa, until("data/f1.txt"))
    collect_until(qb, until("data/f1.txt"))

    m.remove(wa, owner="a")
    assert m.count("a") == 0
    write(data / "f2.txt")
    collect_until(qb, until("data/f2.txt"))
    assert qa.empty()

    m.remove(wb, owner="b")
    assert m.watches() == ()
    extra = set(threading.enumerate()) - before
    assert {t.name for t in extra} <= {"fsbroker-watch-dispatch"}, extra

    m.close()
    assert set(threading.enumerate()) - before == set()


def test_remove_owner(manager: WatchManager, root: Root, data: Path) -> None:
    q1: queue.Queue[ChangeEvent] = queue.Queue()
    q2: queue.Queue[ChangeEvent] = queue.Queue()
    add(manager, root, q1, owner="o1")
    add(manager, root, q1, owner="o1", recursive=True)
    w2 = add(manager, root, q2, owner="o2")
    assert manager.count("o1") == 2
    assert manager.remove_owner("o1") == 2
    assert manager.remove_owner("nobody") == 0
    assert manager.count("o1") == 0
    assert manager.count("o2") == 1
    write(data / "f.txt")
    collect_until(q2, until("data/f.txt"))
    assert q1.empty()
    assert [w.watch_id for w in manager.watches()] == [w2]


def test_close_joins_everything(root: Root, data: Path) -> None:
    before = set(threading.enumerate())
    q: queue.Queue[ChangeEvent] = queue.Queue()
    m = WatchManager()
    add(m, root, q)
    add(m, root, q, recursive=True)
    write(data / "f.txt")
    collect_until(q, until("data/f.txt"))
    assert set(threading.enumerate()) - before  # observer, emitters, dispatcher
    m.close()
    assert set(threading.enumerate()) - before == set()
    assert m.watches() == ()
    m.close()  # idempotent
    with pytest.raises(ClosedError):
        add(m, root, q)
    assert set(threading.enumerate()) - before == set()


def test_unknown_watch_or_wrong_owner(manager: WatchManager, root: Root) -> None:
    q: queue.Queue[ChangeEvent] = queue.Queue()
    wid = add(manager, root, q, (), owner="c1", recursive=True)
    with pytest.raises(NotFound) as info:
        manager.remove("w_0000000000000000", owner="c1")
    assert info.value.reason == "unknown_watch"
    with pytest.raises(NotFound) as info:
        manager.remove(wid, owner="c2")
    assert info.value.reason == "unknown_watch"
    assert manager.count("c1") == 1
    assert manager.watches() == (
        WatchInfo(watch_id=wid, owner="c1", path="data", recursive=True, events=EVENTS),
    )
    manager.remove(wid, owner="c1")
    with pytest.raises(NotFound):
        manager.remove(wid, owner="c1")


def test_add_errors(manager: WatchManager, root: Root, data: Path, tmp_path: Path) -> None:
    q: queue.Queue[ChangeEvent] = queue.Queue()
    (data / "f.txt").write_text("f")
    outside = tmp_path / "outside"
    outside.mkdir()
    (data / "link").symlink_to(outside)
    with pytest.raises(NotFound):
        add(manager, root, q, ("missing",))
    with pytest.raises(WrongType):
        add(manager, root, q, ("f.txt",))
    with pytest.raises(WrongType):
        add(manager, root, q, (), is_dir=False)
    with pytest.raises(PermissionDenied):
        add(manager, root, q, ("link",))
    with pytest.raises(InvalidParams):
        add(manager, root, q, events=frozenset({"renamed"}))
    assert manager.watches() == ()


# -- delivery at once ---------------------------------------------------------------------------


def test_a_change_to_a_quiet_file_is_delivered_at_once(root: Root, data: Path) -> None:
    """The first change of a quiet path does not wait for the window (here a minute long)."""
    (data / "a.txt").write_text("a")
    (data / "old.txt").write_text("old")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    with WatchManager(coalesce=60.0) as m:
        add(m, root, q)
        write(data / "a.txt")
        assert pairs(collect_until(q, until("data/a.txt"))) == [("modified", "data/a.txt")]
        os.rename(data / "a.txt", data / "b.txt")
        moved = collect_until(q, until("data/b.txt"))[-1]
        assert (moved.event, moved.old_path) == ("moved", "data/a.txt")
        # A new file is held for the window (it is usually written right after it appears),
        # and so is a path that changed lately: a change of another quiet path overtakes them.
        write(data / "new.txt")
        write(data / "b.txt")
        os.unlink(data / "old.txt")
        assert pairs(collect_until(q, until("data/old.txt"))) == [("deleted", "data/old.txt")]


def test_what_follows_the_first_change_is_coalesced_to_the_last_state(root: Root, data: Path) -> None:
    (data / "a.txt").write_text("a")
    q: queue.Queue[ChangeEvent] = queue.Queue()
    with WatchManager(coalesce=0.3) as m:
        add(m, root, q)
        write(data / "a.txt")
        first = collect_until(q, until("data/a.txt"))[-1]
        for _ in range(20):
            write(data / "a.txt")
        before_last = time.time()
        os.unlink(data / "a.txt")
        write(data / "zz.txt")  # delivered with the same window, after it
        got = collect_until(q, until("data/zz.txt"))
        assert first.event == "modified"
        assert pairs(got) == [("deleted", "data/a.txt"), ("created", "data/zz.txt")]
        assert got[0].time >= before_last - MILLISECOND
