"""Settings changed while the broker runs (``Broker.configure``) reach every part that reads them.

Each test checks what a server would meet after the change, not the stored value: a lock
conflict that fails at once or is waited out, a rate that refuses, a delete that no longer
goes to the trash.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.errors import ClosedError, ConfigError, FileLocked, FilesError
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.core.locks import Hold
from jupyter_fsbroker.core.rootpath import RootPath
from jupyter_fsbroker.core.sensitive import SensitiveNames

from .conftest import ALL_OPS, error_of, make_broker

#: A lock wait no test may ever sit out: waiting it would show as a hung test, not a slow one.
FOREVER = 3600.0
#: How long a test waits for something that happens at once before it gives up.
PATIENCE = 60.0


@pytest.fixture
def shared(tmp_path: Path, data: Path) -> Iterator[Broker]:
    """A broker with ``data`` shared and every operation pre-approved; its lock wait is long."""
    with make_broker(tmp_path, limits=Limits(lock_wait=FOREVER)) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        yield broker


def busy(broker: Broker, name: str) -> Hold:
    """Another operation's lock on ``data/<name>``, as while it runs (a transient exclusive lock)."""
    root = broker.roots.get("data")
    assert root is not None
    where = RootPath(root, (name,))
    return broker.locks.hold(where.key, "exclusive", owner="c-other", owner_label="other", path=where.rel)


def write(broker: Broker, name: str, content: str) -> Callable[[], dict[str, Any]]:
    conn = broker.connect("writer")
    return lambda: conn.handle("files/write", {"path": f"data/{name}", "content": content})


def waiting_for_a_lock(thread: threading.Thread) -> bool:
    """Whether *thread* is inside the lock manager's wait for a conflicting lock to go."""
    assert thread.ident is not None
    frame = sys._current_frames().get(thread.ident)
    inside_wait = False
    while frame is not None:
        name = frame.f_code.co_name
        if name == "wait" and frame.f_code.co_filename.endswith("threading.py"):
            inside_wait = True
        elif name == "hold" and frame.f_code.co_filename.endswith("locks.py"):
            return inside_wait
        frame = frame.f_back
    return False


def test_lowering_the_lock_wait_makes_a_conflict_fail_at_once(shared: Broker, data: Path) -> None:
    (data / "x.txt").write_text("old")
    shared.configure(lock_wait=0)
    send = write(shared, "x.txt", "new")
    with ThreadPoolExecutor(1) as pool, busy(shared, "x.txt"):
        # With the old wait, this would sit until the holder lets go (an hour).
        error = pool.submit(send).exception(timeout=PATIENCE)
        assert isinstance(error, FileLocked), repr(error)
        assert error.data["lockedBy"] == "other"
    assert (data / "x.txt").read_text() == "old"


def test_raising_the_lock_wait_makes_a_conflict_wait_for_the_holder(tmp_path: Path, data: Path) -> None:
    (data / "x.txt").write_text("old")
    with make_broker(tmp_path, limits=Limits(lock_wait=0)) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        send = write(broker, "x.txt", "new")
        broker.configure(lock_wait=FOREVER)
        outcome: Future[dict[str, Any]] = Future()

        def run() -> None:
            try:
                outcome.set_result(send())
            except BaseException as exc:
                outcome.set_exception(exc)

        holder = busy(broker, "x.txt")
        writer = threading.Thread(target=run, name="waiting-writer")
        try:
            writer.start()
            # With the old wait (0) the write would fail at once and never be seen waiting.
            deadline = time.monotonic() + PATIENCE
            while not waiting_for_a_lock(writer):
                assert not outcome.done(), f"the write did not wait: {outcome.exception()!r}"
                assert time.monotonic() < deadline, "the write never waited for the lock"
                time.sleep(0.001)
            assert (data / "x.txt").read_text() == "old"
        finally:
            holder.release()
            writer.join(PATIENCE)
        assert outcome.result(timeout=0)["bytesWritten"] == 3
        assert (data / "x.txt").read_text() == "new"


def test_rates_of_open_connections_follow(shared: Broker, data: Path) -> None:
    (data / "x.txt").write_text("x")
    opened_before = shared.connect("before")
    opened_before.handle("files/stat", {"path": "data/x.txt"})
    shared.configure(ops_per_second=0.001, ops_burst=1)
    opened_after = shared.connect("after")
    for conn in (opened_before, opened_after):
        conn.handle("files/stat", {"path": "data/x.txt"})  # the one operation of the new burst
        error = error_of(conn, "files/stat", {"path": "data/x.txt"})
        assert (error.name, error.reason) == ("RATE_LIMITED", "ops_rate")
        assert error.data["retryAfterMs"] > 1000


def test_permanent_delete_follows(shared: Broker, data: Path) -> None:
    conn = shared.connect("deleter")
    (data / "kept.txt").write_text("to the trash")
    (data / "gone.txt").write_text("for good")
    assert conn.handle("files/delete", {"path": "data/kept.txt"})["trashed"] is True
    shared.configure(permanent_delete=True)
    assert conn.handle("files/delete", {"path": "data/gone.txt"})["trashed"] is False
    assert [item.name for item in shared.trash.list()] == ["kept.txt"]
    assert not (data / "gone.txt").exists()


def test_counts_and_sizes_follow(shared: Broker, data: Path) -> None:
    conn = shared.connect("watcher")
    (data / "a").mkdir()
    (data / "b").mkdir()
    (data / "x.bin").write_bytes(b"0123456789")
    conn.handle("files/watch", {"path": "data/a"})
    shared.configure(max_watches=1, max_chunk_bytes=4, default_read_bytes=4)
    error = error_of(conn, "files/watch", {"path": "data/b"})
    assert (error.name, error.reason) == ("RATE_LIMITED", "too_many_watches")
    read = conn.handle("files/read", {"path": "data/x.bin", "encoding": "base64", "length": 100})
    assert read["bytesRead"] == 4
    error = error_of(conn, "files/write", {"path": "data/y.bin", "content": "0123456789"})
    assert (error.name, error.data["maxBytes"]) == ("TOO_LARGE", 4)


def test_consent_timeout_follows(tmp_path: Path, data: Path) -> None:
    seen: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        seen.append(request)
        return ConsentDecision.approve_all(request)

    with make_broker(tmp_path) as broker:
        broker.add_root(data, name="data")
        conn = broker.connect("asker", consenter=CallbackConsenter(decide))
        broker.configure(consent_timeout=7)
        conn.handle("files/consent", {"requestedPaths": ["data"], "operations": ["read"]})
        assert seen[0].timeout == 7
        assert seen[0].deadline == seen[0].created_at + 7


def test_sensitive_names_follow(shared: Broker, data: Path) -> None:
    conn = shared.connect("reader")
    (data / "report.csv").write_text("a,b\n")
    conn.handle("files/read", {"path": "data/report.csv"})
    shared.configure(sensitive=SensitiveNames(("*.csv",)))
    error = error_of(conn, "files/read", {"path": "data/report.csv"})
    assert (error.name, error.reason) == ("PERMISSION_DENIED", "sensitive")


def test_limits_given_whole_and_by_name(shared: Broker) -> None:
    new = shared.configure(limits=Limits(max_watches=5), max_uploads=3)
    assert (new.limits.max_watches, new.limits.max_uploads) == (5, 3)
    assert shared.config is new


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"lock_wait": -1}, "lock_wait"),
        ({"ops_per_second": 0}, "ops_per_second"),
        ({"permanent_delete": "yes"}, "permanent_delete"),
        ({"coalesce": -0.5}, "coalesce"),
        ({"limits": 5}, "limits"),
        ({"sensitive": ["*.csv"]}, "sensitive"),
        ({"no_such_setting": 1}, "no_such_setting"),
        ({"trash_dir": "/elsewhere"}, "trash_dir"),
        ({"workers": 2}, "workers"),
        ({"advertise_roots": True}, "advertise_roots"),  # servers were told at connect time
        ({"lock_wait": 0, "audit_capacity": 5}, "audit_capacity"),
    ],
)
def test_bad_changes_are_refused_and_change_nothing(
    shared: Broker, data: Path, changes: dict[str, Any], words: str
) -> None:
    before = shared.config
    with pytest.raises(ConfigError, match=words):
        shared.configure(**changes)
    assert shared.config is before
    # The lock wait was not touched either: a conflict is still waited out, not failed at once.
    assert shared.locks.wait == FOREVER


def test_configure_after_close(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    broker.close()
    with pytest.raises(ClosedError):
        broker.configure(lock_wait=1)


def test_a_refused_change_is_a_config_error_not_a_files_error(shared: Broker) -> None:
    with pytest.raises(ConfigError) as info:
        shared.configure(max_chunk_bytes=10**9)
    assert not isinstance(info.value, FilesError)


def test_advertise_roots_is_undecided_by_default_and_takes_only_a_bool(tmp_path: Path) -> None:
    with make_broker(tmp_path) as broker:
        assert broker.config.advertise_roots is None  # the connection decides: see protocol/roots_offer.py
    with pytest.raises(ConfigError, match="advertise_roots must be True, False or None, not 'yes'"):
        make_broker(tmp_path, advertise_roots="yes")
    with pytest.raises(ConfigError, match="not 1"):
        make_broker(tmp_path, advertise_roots=1)
