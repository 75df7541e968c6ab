"""Lock files kept open after release (``LockManager(idle_files=...)``), as the broker runs them.

A released lock file stays open, holding no lock, for the next lock of its key
while the connection that released it lives; every other process still sees a
free lock file it may take or remove.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core import lockfiles
from jupyter_fsbroker.core.errors import FileLocked
from jupyter_fsbroker.core.locks import Hold, LockManager, LockMode

KEY = "/srv/root/data/x.csv"
PATH = "data/x.csv"


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    return tmp_path / "locks"


@pytest.fixture
def mgr(lock_dir: Path) -> Iterator[LockManager]:
    manager = LockManager(lock_dir, wait=0, idle_files=8)
    yield manager
    manager.close()


@pytest.fixture
def other(lock_dir: Path) -> Iterator[LockManager]:
    """What another process has: its own table, the same lock files, none kept idle."""
    manager = LockManager(lock_dir, wait=0)
    yield manager
    manager.close()


def hold(mgr: LockManager, mode: LockMode = "shared", owner: str = "a") -> Hold:
    return mgr.hold(KEY, mode, owner=owner, owner_label=owner, path=PATH)


def inodes(lock_dir: Path) -> list[int]:
    return sorted(os.stat(lock_dir / name).st_ino for name in os.listdir(lock_dir))


def test_a_released_lock_file_is_taken_again_until_its_connection_ends(
    mgr: LockManager, lock_dir: Path
) -> None:
    with hold(mgr):
        first = inodes(lock_dir)
    assert inodes(lock_dir) == first  # open and idle
    with hold(mgr, "exclusive", owner="b"):
        assert inodes(lock_dir) == first  # the same file, locked again (by another connection)
    assert mgr.release_owner("a") == 0
    assert inodes(lock_dir) == first  # b released it last
    mgr.release_owner("b")
    assert os.listdir(lock_dir) == []


def test_a_kept_lock_released_leaves_its_file_idle_for_its_owner(mgr: LockManager, lock_dir: Path) -> None:
    with hold(mgr, "exclusive") as mine:
        lock_id = mine.keep()
    mgr.release(lock_id, owner="a")
    (name,) = os.listdir(lock_dir)
    assert (lock_dir / name).read_text() == ""  # no longer says it is kept
    mgr.release_owner("a")
    assert os.listdir(lock_dir) == []


def test_close_removes_idle_files(lock_dir: Path) -> None:
    manager = LockManager(lock_dir, idle_files=8)
    for i in range(3):
        with manager.hold(f"/srv/k{i}", "shared", owner="a", owner_label="A", path=f"k{i}"):
            pass
    assert len(os.listdir(lock_dir)) == 3
    manager.close()
    assert os.listdir(lock_dir) == []


def test_a_idle_file_is_free_for_other_processes_and_its_locks_conflict(
    mgr: LockManager, other: LockManager
) -> None:
    with hold(mgr):
        pass
    assert not other.is_locked(KEY)
    with hold(other, "exclusive", owner="b"):
        assert mgr.is_locked(KEY)
        with pytest.raises(FileLocked):
            hold(mgr)
    with hold(mgr, "exclusive"):
        assert other.is_locked(KEY)
        with pytest.raises(FileLocked):
            hold(other, owner="b")


def test_a_idle_file_removed_by_another_process_is_made_again(
    mgr: LockManager, other: LockManager, lock_dir: Path
) -> None:
    with hold(mgr):
        pass
    # The other process finds a free leftover and removes it (a probe, or its own lock and release).
    with hold(other, "exclusive", owner="b"):
        pass
    assert os.listdir(lock_dir) == []
    with hold(mgr, "exclusive"):
        assert len(os.listdir(lock_dir)) == 1
        with pytest.raises(FileLocked):
            hold(other, owner="b")  # the new file is the one locked


def test_a_kept_lock_seen_through_a_idle_file_names_its_holder(mgr: LockManager, other: LockManager) -> None:
    with hold(mgr):
        pass
    with hold(other, "exclusive", owner="b") as theirs:
        theirs.keep()
        with pytest.raises(FileLocked) as info:
            hold(mgr)
    assert info.value.data["lockedBy"].startswith("b (process ")


def test_no_more_than_max_idle_files_stay(lock_dir: Path) -> None:
    files = lockfiles.LockFiles(str(lock_dir), max_idle=2)
    for i in range(4):
        lock = files.try_lock(f"/srv/k{i}", exclusive=False)
        assert isinstance(lock, lockfiles.LockFile)
        files.unlock(f"/srv/k{i}", lock, owner="a")
    assert len(os.listdir(lock_dir)) == 2  # the two oldest went
    lock = files.try_lock("/srv/k9", exclusive=True)
    assert isinstance(lock, lockfiles.LockFile)
    files.unlock("/srv/k9", lock)  # no owner: removed at once
    files.close()
    assert os.listdir(lock_dir) == []
