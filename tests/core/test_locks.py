"""Tests of jupyter_fsbroker.core.locks: in-process locks, kept locks, and locks across processes."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from jupyter_fsbroker.core.config import default_lock_dir  # noqa: E402
from jupyter_fsbroker.core.errors import (  # noqa: E402
    ClosedError,
    FileLocked,
    NotFound,
    to_jsonrpc_error,
)
from jupyter_fsbroker.core.locks import Hold, LockInfo, LockManager, LockMode  # noqa: E402

KEY = "/srv/root/data/x.csv"
PATH = "data/x.csv"
MODES: tuple[LockMode, ...] = ("shared", "exclusive")
LOCK_ID_RE = re.compile(r"^lock_[0-9a-f]{32}$")
#: A wait no test lives to see the end of: a call given it that returns early did not wait it out
#: (timings on a loaded machine stretch by seconds; halfway through this wait they cannot mislead).
PATIENT = 60.0


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "locks"


@pytest.fixture
def mgr(lock_dir: Path) -> Iterator[LockManager]:
    manager = LockManager(lock_dir, wait=2.0)
    yield manager
    manager.close()


def hold_a(mgr: LockManager, mode: LockMode = "exclusive", key: str = KEY, wait: float | None = None) -> Hold:
    return mgr.hold(key, mode, owner="conn-a", owner_label="Server A", path=PATH, wait=wait)


def hold_b(mgr: LockManager, mode: LockMode = "exclusive", key: str = KEY, wait: float | None = None) -> Hold:
    return mgr.hold(key, mode, owner="conn-b", owner_label="Server B", path=PATH, wait=wait)


def lock_files(lock_dir: Path) -> list[str]:
    return sorted(os.listdir(lock_dir))


def assert_no_lock_id(exc: BaseException, lock_id: str) -> None:
    assert lock_id not in str(exc)
    assert lock_id not in repr(exc)
    if isinstance(exc, FileLocked | NotFound):
        assert lock_id not in json.dumps(to_jsonrpc_error(exc))


# ---------------------------------------------------------------------------- basics


def test_lock_dir_is_created_private(tmp_path: Path) -> None:
    where = tmp_path / "a" / "b" / "locks"
    with LockManager(where) as manager:
        assert where.is_dir()
        assert (where.stat().st_mode & 0o777) == 0o700
        assert manager.lock_dir == str(where)


def test_shared_and_shared_coexist(mgr: LockManager, lock_dir: Path) -> None:
    with hold_a(mgr, "shared"), hold_b(mgr, "shared"), hold_b(mgr, "shared"):
        infos = mgr.held()
        assert len(infos) == 3
        assert {info.mode for info in infos} == {"shared"}
        assert all(info.lock_id is None and not info.kept for info in infos)
        assert mgr.is_locked(KEY)
        assert len(lock_files(lock_dir)) == 1
    assert mgr.held() == ()
    assert not mgr.is_locked(KEY)
    assert lock_files(lock_dir) == []


def test_shared_blocks_exclusive_and_back(mgr: LockManager) -> None:
    with hold_a(mgr, "shared"):
        start = time.monotonic()
        with pytest.raises(FileLocked) as info:
            hold_b(mgr, "exclusive", wait=0.2)
        assert time.monotonic() - start >= 0.19
        assert info.value.data["lockedBy"] == "Server A"
        assert info.value.data["retryAfterMs"] == 100
        assert info.value.reason == "locked"
        assert info.value.path == PATH
    with hold_a(mgr, "exclusive"), pytest.raises(FileLocked):
        hold_b(mgr, "shared", wait=0.1)
    with hold_a(mgr, "exclusive"), pytest.raises(FileLocked):
        hold_b(mgr, "exclusive", wait=0)


def test_other_keys_do_not_conflict(mgr: LockManager) -> None:
    with hold_a(mgr, "exclusive"), hold_b(mgr, "exclusive", key=KEY + ".bak", wait=0):
        assert len(mgr.held()) == 2


def test_transient_conflict_that_clears_within_the_wait(mgr: LockManager) -> None:
    first = hold_a(mgr, "exclusive")
    timer = threading.Timer(0.2, first.release)  # a short operation that ends by itself
    start = time.monotonic()  # before the timer starts: a stall in between must not shorten the wait
    timer.start()
    try:
        with hold_b(mgr, "exclusive", wait=PATIENT) as second:
            assert second.active
        assert 0.15 <= time.monotonic() - start < PATIENT / 2  # woke at the release, not at its end
    finally:
        timer.cancel()
        first.release()


def test_transient_conflict_that_does_not_clear(lock_dir: Path) -> None:
    with LockManager(lock_dir, wait=PATIENT) as patient, hold_a(patient, "exclusive"):
        start = time.monotonic()
        with pytest.raises(FileLocked) as info:
            hold_b(patient, "shared", wait=0.3)
        elapsed = time.monotonic() - start
    assert 0.29 <= elapsed < PATIENT / 2  # its own wait, not the manager's
    assert info.value.data == {"lockedBy": "Server A", "retryAfterMs": 100}


def test_hold_release_is_idempotent_and_validates(mgr: LockManager) -> None:
    hold = hold_a(mgr)
    hold.release()
    hold.release()
    assert not hold.active
    with hold_b(mgr, wait=0):
        pass
    with pytest.raises(ValueError):
        mgr.hold(KEY, "both", owner="x", owner_label="X", path=PATH)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mgr.hold("relative/path", "shared", owner="x", owner_label="X", path=PATH)


# ---------------------------------------------------------------------------- kept locks


def test_kept_lock_conflicts_at_once_without_revealing_the_id(mgr: LockManager, lock_dir: Path) -> None:
    with hold_a(mgr, "exclusive") as hold:
        lock_id = hold.keep()
    assert LOCK_ID_RE.match(lock_id)
    for mode in MODES:
        start = time.monotonic()
        with pytest.raises(FileLocked) as info:
            hold_b(mgr, mode, wait=PATIENT)
        assert time.monotonic() - start < PATIENT / 2  # at once, not at the end of its wait
        assert info.value.data["lockedBy"] == "Server A"
        assert info.value.data["retryAfterMs"] == 1000
        assert_no_lock_id(info.value, lock_id)
    # The lock file records the holder, never the lockId.
    (name,) = lock_files(lock_dir)
    content = (lock_dir / name).read_text()
    assert json.loads(content) == {"kept": True, "by": "Server A", "pid": os.getpid()}
    assert lock_id not in content
    (info_,) = mgr.held()
    assert info_ == LockInfo(lock_id, KEY, PATH, "conn-a", "Server A", "exclusive", True, info_.since)


def test_keep_wakes_waiters_who_then_fail_at_once(mgr: LockManager) -> None:
    hold = hold_a(mgr, "exclusive")
    outcome: list[BaseException | Hold] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        try:
            outcome.append(hold_b(mgr, "shared", wait=PATIENT))
        except FileLocked as exc:
            outcome.append(exc)

    start = time.monotonic()
    thread = threading.Thread(target=waiter)
    thread.start()
    assert started.wait(PATIENT)
    lock_id = hold.keep()
    thread.join(PATIENT / 2)
    assert not thread.is_alive()
    assert time.monotonic() - start < PATIENT / 2  # woken by keep(), not at the end of its wait
    (result,) = outcome
    assert isinstance(result, FileLocked)
    assert result.data["lockedBy"] == "Server A"
    assert_no_lock_id(result, lock_id)


def test_owner_of_a_kept_lock_keeps_using_its_file(mgr: LockManager) -> None:
    with hold_a(mgr, "exclusive") as hold:
        lock_id = hold.keep()
        assert hold.keep() == lock_id
    assert mgr.kept_by("conn-a", KEY) == lock_id
    assert mgr.kept_by("conn-b", KEY) is None
    assert mgr.kept_by("conn-a", KEY + "x") is None
    for mode in MODES:
        with hold_a(mgr, mode, wait=0) as again:
            assert not again.active  # covered by the kept lock
            if mode == "exclusive":
                assert again.keep() == lock_id
            else:
                with pytest.raises(ValueError):
                    again.keep()
        with pytest.raises(FileLocked):
            hold_b(mgr, "shared", wait=0)
    # Leaving those holds did not release the kept lock.
    assert mgr.kept_by("conn-a", KEY) == lock_id
    assert [info.lock_id for info in mgr.held()] == [lock_id]


def test_keep_needs_an_exclusive_live_hold(mgr: LockManager) -> None:
    with hold_a(mgr, "shared") as hold, pytest.raises(ValueError):
        hold.keep()
    hold = hold_a(mgr, "exclusive")
    hold.release()
    with pytest.raises(ValueError):
        hold.keep()
    assert mgr.held() == ()


def test_release_checks_the_owner(mgr: LockManager) -> None:
    with hold_a(mgr) as hold:
        lock_id = hold.keep()
    with pytest.raises(NotFound) as wrong:
        mgr.release(lock_id, owner="conn-b")
    with pytest.raises(NotFound) as unknown:
        mgr.release("lock_" + "0" * 32, owner="conn-a")
    assert wrong.value.reason == unknown.value.reason == "unknown_lock"
    assert to_jsonrpc_error(wrong.value) == to_jsonrpc_error(unknown.value)  # indistinguishable
    assert_no_lock_id(wrong.value, lock_id)
    with pytest.raises(FileLocked):
        hold_b(mgr, wait=0)
    mgr.release(lock_id, owner="conn-a")
    with pytest.raises(NotFound):
        mgr.release(lock_id, owner="conn-a")
    assert mgr.kept_by("conn-a", KEY) is None
    with hold_b(mgr, wait=0):
        pass


def test_release_owner_frees_all_its_locks(mgr: LockManager, lock_dir: Path) -> None:
    ids = []
    for i in range(3):
        with hold_a(mgr, key=f"/srv/root/a{i}") as hold:
            ids.append(hold.keep())
    with hold_b(mgr, key="/srv/root/b") as hold:
        b_id = hold.keep()
    assert len(set(ids)) == 3
    assert mgr.release_owner("conn-a") == 3
    assert mgr.release_owner("conn-a") == 0
    assert [info.lock_id for info in mgr.held()] == [b_id]
    for i in range(3):
        with hold_b(mgr, key=f"/srv/root/a{i}", wait=0):
            pass
    assert len(lock_files(lock_dir)) == 1
    assert mgr.release_owner("conn-b") == 1
    assert lock_files(lock_dir) == []


def test_force_release(mgr: LockManager) -> None:
    with hold_a(mgr) as hold:
        lock_id = hold.keep()
    info = mgr.force_release(lock_id)
    assert info.lock_id == lock_id
    assert (info.key, info.path, info.owner, info.owner_label) == (KEY, PATH, "conn-a", "Server A")
    assert info.kept and info.mode == "exclusive"
    with pytest.raises(NotFound):
        mgr.force_release(lock_id)
    with pytest.raises(NotFound):
        mgr.release(lock_id, owner="conn-a")
    with hold_b(mgr, wait=0):
        pass


def test_subscribe_is_called_outside_the_internal_lock(mgr: LockManager) -> None:
    seen: list[int] = []
    unsubscribe = mgr.subscribe(lambda: seen.append(len(mgr.held())))  # re-enters the manager
    with hold_a(mgr) as hold:
        lock_id = hold.keep()
    assert seen == [1]
    with hold_a(mgr, "shared"):  # transient holds do not notify
        pass
    mgr.release(lock_id, owner="conn-a")
    assert seen == [1, 0]
    unsubscribe()
    unsubscribe()
    with hold_a(mgr) as hold:
        hold.keep()
    assert mgr.release_owner("conn-a") == 1
    assert seen == [1, 0]


def test_a_failing_listener_does_not_break_the_manager(
    mgr: LockManager, lock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def boom() -> None:
        raise RuntimeError("listener bug")

    mgr.subscribe(lambda: seen.append("first"))
    mgr.subscribe(boom)
    mgr.subscribe(lambda: seen.append("last"))
    with caplog.at_level(logging.ERROR, logger="jupyter_fsbroker.core.listeners"):
        with hold_a(mgr) as hold:
            lock_id = hold.keep()
        assert seen == ["first", "last"]  # the listeners after the failing one ran too
        assert [info.lock_id for info in mgr.held()] == [lock_id]
        mgr.release(lock_id, owner="conn-a")
        assert seen == ["first", "last"] * 2
        # Released: for this process, for another one, and its lock file is gone.
        assert mgr.held() == ()
        with LockManager(lock_dir, wait=0) as other:
            assert not other.is_locked(KEY)
        assert lock_files(lock_dir) == []
        with hold_b(mgr, wait=0) as hold:
            hold.keep()
        assert mgr.release_owner("conn-b") == 1  # and the same on the other ways a lock ends
        assert seen == ["first", "last"] * 4
        assert mgr.held() == () and lock_files(lock_dir) == []
    failures = [r for r in caplog.records if r.getMessage() == "a listener failed"]
    assert len(failures) == 4 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in failures)


# ---------------------------------------------------------------------------- directories


@pytest.mark.skipif(sys.platform != "linux", reason="the folder of Linux's conventions")
def test_the_default_lock_folder_follows_the_account_not_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pwd

    account = os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "jupyter_fsbroker", "locks")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    sessions: list[dict[str, str | None]] = [
        {"XDG_RUNTIME_DIR": str(runtime)},  # a desktop session
        {"XDG_RUNTIME_DIR": None},  # SSH, cron
        {"XDG_RUNTIME_DIR": None, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "c")},
    ]
    for session in sessions:
        with monkeypatch.context() as env:
            for name, value in session.items():
                if value is None:
                    env.delenv(name, raising=False)
                else:
                    env.setenv(name, value)
            assert default_lock_dir() == account, session


def test_conflicts_below(mgr: LockManager) -> None:
    assert mgr.conflicts_below("/srv/root/d", owner="conn-b") is None
    with hold_a(mgr, key="/srv/root/d/sub/x.csv") as hold:
        hold.keep()
    found = mgr.conflicts_below("/srv/root/d", owner="conn-b")
    assert found is not None and found.kept and found.key == "/srv/root/d/sub/x.csv"
    assert mgr.conflicts_below("/srv/root/d/", owner="conn-b") == found
    assert mgr.conflicts_below("/srv/root", owner="conn-b") == found
    assert mgr.conflicts_below("/", owner="conn-b") == found
    assert mgr.conflicts_below("/srv/root/d", owner="conn-a") is None  # its own lock
    assert mgr.conflicts_below("/srv/root/dx", owner="conn-b") is None  # a sibling, not below
    assert mgr.conflicts_below("/srv/root/d/sub/x.csv", owner="conn-b") == found  # the key itself
    mgr.release_owner("conn-a")
    with hold_a(mgr, "shared", key="/srv/root/d/y"):
        transient = mgr.conflicts_below("/srv/root/d", owner="conn-b")
        assert transient is not None
        assert transient.lock_id is None and not transient.kept and transient.mode == "shared"
    assert mgr.conflicts_below("/srv/root/d", owner="conn-b") is None


# ---------------------------------------------------------------------------- lock files and close


def test_lock_files_are_removed(mgr: LockManager, lock_dir: Path) -> None:
    with hold_a(mgr, "shared"), hold_a(mgr, "shared", key="/srv/other"):
        assert len(lock_files(lock_dir)) == 2
    with hold_a(mgr) as hold:
        lock_id = hold.keep()
    with hold_b(mgr, key="/srv/other2") as hold:
        hold.keep()
    assert len(lock_files(lock_dir)) == 2
    mgr.release(lock_id, owner="conn-a")
    assert len(lock_files(lock_dir)) == 1
    mgr.close()
    assert lock_files(lock_dir) == []


def test_a_leftover_lock_file_is_reused_and_cleaned(mgr: LockManager, lock_dir: Path) -> None:
    with hold_a(mgr) as hold:
        hold.keep()
        (name,) = lock_files(lock_dir)
    stale = (lock_dir / name).read_text()
    mgr.release_owner("conn-a")
    # As if a process died while keeping the lock: the content is there, the flock is not.
    (lock_dir / name).write_text(stale)
    assert not mgr.is_locked(KEY)  # the probe finds it free and removes it
    assert lock_files(lock_dir) == []
    (lock_dir / name).write_text(stale)
    with hold_b(mgr, wait=0):
        assert (lock_dir / name).read_text() == ""  # stale content cleared
    assert lock_files(lock_dir) == []


def test_close_releases_everything(lock_dir: Path) -> None:
    manager = LockManager(lock_dir)
    calls: list[None] = []
    manager.subscribe(lambda: calls.append(None))
    with manager.hold(KEY, "exclusive", owner="a", owner_label="A", path=PATH) as hold:
        lock_id = hold.keep()
    open_hold = manager.hold("/srv/y", "shared", owner="b", owner_label="B", path="y")
    assert len(lock_files(lock_dir)) == 2
    calls.clear()
    manager.close()
    assert calls == [None]
    manager.close()  # idempotent
    assert manager.closed
    assert lock_files(lock_dir) == []
    open_hold.release()  # harmless after close
    with pytest.raises(ClosedError):
        manager.hold(KEY, "shared", owner="a", owner_label="A", path=PATH)
    with pytest.raises(ClosedError):
        manager.release(lock_id, owner="a")
    with pytest.raises(ClosedError):
        manager.held()
    with pytest.raises(ClosedError):
        manager.is_locked(KEY)
    with pytest.raises(ClosedError):
        manager.subscribe(lambda: None)
    # Another manager on the same directory is free to lock.
    with (
        LockManager(lock_dir) as other,
        other.hold(KEY, "exclusive", owner="c", owner_label="C", path=PATH, wait=0),
    ):
        pass


def test_close_wakes_waiters(lock_dir: Path) -> None:
    manager = LockManager(lock_dir)
    manager.hold(KEY, "exclusive", owner="a", owner_label="A", path=PATH)
    errors: list[BaseException] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        try:
            manager.hold(KEY, "exclusive", owner="b", owner_label="B", path=PATH, wait=10)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    assert started.wait(PATIENT)
    manager.close()
    thread.join(5)
    assert not thread.is_alive()
    (error,) = errors
    assert isinstance(error, ClosedError | FileLocked)  # ClosedError unless it had not waited yet


def test_atomic_replace_of_the_target_keeps_the_lock(mgr: LockManager, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    target = root / "x.csv"
    target.write_text("a,b\n")
    key = os.path.realpath(target)
    before = target.stat().st_ino
    with mgr.hold(key, "exclusive", owner="conn-a", owner_label="Server A", path="x.csv") as hold:
        lock_id = hold.keep()
    tmp = root / ".x.csv.tmp"
    tmp.write_text("c,d\n")
    os.replace(tmp, target)
    assert target.stat().st_ino != before  # a new file at the path...
    assert mgr.is_locked(key)  # ...under the same lock
    assert mgr.kept_by("conn-a", key) == lock_id
    with pytest.raises(FileLocked):
        mgr.hold(key, "shared", owner="conn-b", owner_label="Server B", path="x.csv", wait=0)
    # The lock directory is not the user's folder.
    assert sorted(os.listdir(root)) == ["x.csv"]


# ---------------------------------------------------------------------------- threads


def test_exclusive_holds_serialize_threads(mgr: LockManager) -> None:
    counter = [0]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            barrier.wait(5)
            for _ in range(200):
                with mgr.hold(KEY, "exclusive", owner=f"c{n}", owner_label=f"S{n}", path=PATH, wait=10):
                    value = counter[0]
                    time.sleep(0)  # yield to other threads mid-update
                    counter[0] = value + 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert counter[0] == 8 * 200
    assert mgr.held() == ()
    assert lock_files(Path(mgr.lock_dir)) == []


def test_readers_and_writers_exclude_each_other(mgr: LockManager) -> None:
    state = {"readers": 0, "writers": 0, "max_readers": 0}
    guard = threading.Lock()
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def worker(n: int) -> None:
        try:
            barrier.wait(5)
            for i in range(150):
                mode: LockMode = "exclusive" if (i + n) % 3 == 0 else "shared"
                with mgr.hold(KEY, mode, owner=f"c{n}", owner_label=f"S{n}", path=PATH, wait=10):
                    with guard:
                        state["writers" if mode == "exclusive" else "readers"] += 1
                        assert state["writers"] <= 1
                        assert state["writers"] == 0 or state["readers"] == 0
                        state["max_readers"] = max(state["max_readers"], state["readers"])
                    time.sleep(0)
                    with guard:
                        state["writers" if mode == "exclusive" else "readers"] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert state["readers"] == state["writers"] == 0
    assert mgr.held() == ()


# ---------------------------------------------------------------------------- two processes

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from jupyter_fsbroker.core.locks import LockManager

    lock_dir, action, mode, key = sys.argv[2:6]
    manager = LockManager(lock_dir)
    hold = manager.hold(key, mode, owner="child", owner_label="Child", path="x.csv", wait=5)
    if action == "keep":
        hold.keep()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd and cmd[0] == "release":
            time.sleep(float(cmd[1]))  # a short operation that ends by itself
            hold.release()
            print("released", flush=True)
        elif cmd and cmd[0] == "quit":
            break
    manager.close()
    print("closed", flush=True)
    """
)


class Child:
    """A second process with its own LockManager on the same lock directory."""

    def __init__(self, tmp_path: Path, lock_dir: Path, action: str, mode: str, key: str = KEY) -> None:
        script = tmp_path / "lock_child.py"
        script.write_text(CHILD)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(REPO), str(lock_dir), action, mode, key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid

    def expect(self, timeout: float = PATIENT) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the child process did not answer in time"
        return self.proc.stdout.readline().strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def quit(self) -> None:
        self.send("quit")
        assert self.expect() == "closed"
        assert self.proc.wait(10) == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


Spawn = Callable[..., Child]


@pytest.fixture
def spawn(tmp_path: Path, lock_dir: Path) -> Iterator[Spawn]:
    children: list[Child] = []

    def start(action: str, mode: str, key: str = KEY) -> Child:
        child = Child(tmp_path, lock_dir, action, mode, key)
        children.append(child)
        assert child.expect() == "ready"
        return child

    yield start
    for child in children:
        child.kill()


def test_kept_lock_of_another_process_conflicts_at_once(
    spawn: Spawn, mgr: LockManager, lock_dir: Path
) -> None:
    child = spawn("keep", "exclusive")
    assert mgr.is_locked(KEY)
    for mode in MODES:
        start = time.monotonic()
        with pytest.raises(FileLocked) as info:
            hold_a(mgr, mode, wait=PATIENT)
        assert time.monotonic() - start < PATIENT / 2  # at once, not at the end of its wait
        assert info.value.data["lockedBy"] == f"Child (process {child.pid})"
        assert info.value.data["retryAfterMs"] == 1000
    # The OS frees the lock of a process that dies: once it is gone, the lock is free without waiting.
    child.kill()
    with hold_a(mgr, "exclusive", wait=0):
        (name,) = lock_files(lock_dir)
        assert (lock_dir / name).read_text() == ""  # the dead process's record is cleared
    assert not mgr.is_locked(KEY)
    mgr.close()
    assert lock_files(lock_dir) == []


def test_transient_lock_of_another_process_is_waited_for(
    spawn: Spawn, mgr: LockManager, lock_dir: Path
) -> None:
    child = spawn("hold", "exclusive")
    with LockManager(lock_dir, wait=PATIENT) as patient:
        start = time.monotonic()
        with pytest.raises(FileLocked) as info:
            hold_a(patient, "shared", wait=0.3)
        assert 0.29 <= time.monotonic() - start < PATIENT / 2  # its own wait, not the manager's
    assert info.value.data == {"lockedBy": "another process", "retryAfterMs": 100}
    start = time.monotonic()  # before the child hears of it: a stall in between must not shorten the wait
    child.send("release 0.3")
    with hold_a(mgr, "exclusive", wait=PATIENT):
        assert time.monotonic() - start >= 0.1  # it waited for the other process
        assert child.expect() == "released"
    child.quit()
    mgr.close()
    assert lock_files(lock_dir) == []


def test_shared_locks_across_processes(spawn: Spawn, mgr: LockManager, lock_dir: Path) -> None:
    child = spawn("hold", "shared")
    with hold_a(mgr, "shared", wait=0):
        pass
    with pytest.raises(FileLocked):
        hold_a(mgr, "exclusive", wait=0.1)
    with hold_a(mgr, "shared", wait=0):
        child.quit()  # the child cannot remove a file we still hold
        assert len(lock_files(lock_dir)) == 1
        with pytest.raises(FileLocked):  # in-process readers still exclude a writer
            hold_b(mgr, "exclusive", wait=0)
    with hold_b(mgr, "exclusive", wait=0):
        pass
    assert lock_files(lock_dir) == []


def test_our_kept_lock_blocks_another_process(spawn: Spawn, mgr: LockManager, tmp_path: Path) -> None:
    with hold_a(mgr) as hold:
        lock_id = hold.keep()
    script = tmp_path / "probe.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            sys.path.insert(0, sys.argv[1])
            from jupyter_fsbroker.core.errors import FileLocked
            from jupyter_fsbroker.core.locks import LockManager

            with LockManager(sys.argv[2]) as manager:
                try:
                    manager.hold(sys.argv[3], "shared", owner="p", owner_label="P", path="x.csv", wait=60)
                except FileLocked as exc:
                    print(exc.data["lockedBy"])
            """
        )
    )
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script), str(REPO), mgr.lock_dir, KEY],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    assert out.stdout.strip() == f"Server A (process {os.getpid()})"
    assert time.monotonic() - start < PATIENT / 2  # did not wait out the probe's 60 s
    assert lock_id not in out.stdout
