"""Shared and exclusive file locks, and their coordination across processes.

Every file operation of the broker holds a lock on its target while it runs:
*shared* for reads, *exclusive* for writes, deletes and renames. With
``keepLocked`` an exclusive lock outlives the operation as a *kept* lock,
identified by a ``lockId`` that only its owner (a connection) may use
(:mod:`jupyter_fsbroker.core.kept_locks` holds them; the manager here decides).

Two levels cooperate.

* **In this process** a table maps each *key* (the canonical absolute path of
  the target) to its holders: a count of shared holders, or one exclusive
  holder, or the kept lock of the kept-lock table. One :class:`threading.Condition` guards
  the table; waiters are woken whenever a lock is released or kept.
* **Across processes** (two kernels on one machine, each with its own broker)
  every key that has a holder in this process also holds one OS advisory lock
  on a lock file outside the user's folders (:mod:`jupyter_fsbroker.core.lockfiles`).
  The OS lock is reference-counted: the first in-process holder takes it,
  further shared holders only count, the last one releases it.

Every OS call made while the internal condition is held is non-blocking
(``LOCK_NB``); waiting for a lock happens in :meth:`threading.Condition.wait`,
which releases it. A lock never outlives its owner's connection, and no
``lockId`` is ever shown to anyone but its owner.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import ClosedError, FileLocked
from .holds import Hold, LockInfo, LockMode, LockRequest
from .kept_locks import KeptLock, KeptLocks
from .listeners import Listeners
from .lockfiles import LockFile, LockFiles
from .resource import Closeable

# Hold, LockInfo and LockMode live in .holds; named here too, where the lock manager's users
# have always imported them from.
__all__ = ["Hold", "LockInfo", "LockManager", "LockMode"]

#: ``retryAfterMs`` suggested after a conflict with an operation's (transient) lock.
RETRY_TRANSIENT_MS = 100
#: ``retryAfterMs`` suggested after a conflict with a kept lock.
RETRY_KEPT_MS = 1000

#: How often a conflict with another process is polled (seconds, first and largest interval).
_POLL_MIN = 0.01
_POLL_MAX = 0.1


@dataclass
class _State:
    """The in-process state of one key (its kept lock, if any, is in the kept-lock table)."""

    readers: list[Hold] = field(default_factory=list)
    writer: Hold | None = None
    os_lock: LockFile | None = None

    def unheld(self) -> bool:
        """Whether no operation holds the key (it may still be kept)."""
        return not self.readers and self.writer is None


def _check_wait(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise ValueError(f"the lock wait must be a non-negative number of seconds, not {seconds!r}")
    return float(seconds)


def _locked(path: str, holder: str, *, kept: bool) -> FileLocked:
    if kept:
        message = f"{path} is kept locked by {holder}"
    else:
        message = f"{path} is in use by {holder}; try again shortly"
    return FileLocked(
        message,
        reason="locked",
        path=path,
        lockedBy=holder,
        retryAfterMs=RETRY_KEPT_MS if kept else RETRY_TRANSIENT_MS,
    )


class LockManager(Closeable):
    """The locks of one broker: in-process state plus OS locks on files in *lock_dir*.

    Parameters
    ----------
    lock_dir
        The directory of the lock files, outside every root. Created (mode
        ``0o700``, with parents) if missing. Brokers of different processes that
        must coordinate use the same directory.
    wait
        How long (seconds) a conflict with another operation's transient lock is
        waited out before :class:`FileLocked` is raised.
    idle_files
        How many released lock files stay open for the next lock of their key
        while the owner that released them lives (see
        :mod:`~jupyter_fsbroker.core.lockfiles`); :meth:`release_owner` and
        :meth:`close` remove them. ``0``: a lock file is removed at release.

    Notes
    -----
    Thread-safe. A thread that holds a lock and asks for a conflicting one on
    the same key (even for the same owner) waits, then gets :class:`FileLocked`:
    locks are not re-entrant, except that the owner of a kept lock may always
    hold its key.
    """

    def __init__(self, lock_dir: str | os.PathLike[str], *, wait: float = 2.0, idle_files: int = 0) -> None:
        self._dir = os.path.abspath(os.fspath(lock_dir))
        self._files = LockFiles(self._dir, max_idle=idle_files)
        self._wait = _check_wait(wait)
        self._cond = threading.Condition(threading.Lock())
        self._states: dict[str, _State] = {}
        self._kept = KeptLocks()
        self._listeners: Listeners[[]] = Listeners()
        self._closed = False

    # ------------------------------------------------------------------ public API

    @property
    def lock_dir(self) -> str:
        """The absolute path of the lock directory."""
        return self._dir

    @property
    def wait(self) -> float:
        """The default wait (seconds) for a conflict with a transient lock.

        Setting it applies to every :meth:`hold` that starts afterwards.

        Raises
        ------
        ValueError
            On setting: not a finite, non-negative number.
        """
        return self._wait

    @wait.setter
    def wait(self, seconds: float) -> None:
        value = _check_wait(seconds)
        with self._cond:
            self._wait = value

    def hold(
        self,
        key: str,
        mode: LockMode,
        *,
        owner: str,
        owner_label: str,
        path: str,
        wait: float | None = None,
    ) -> Hold:
        """Take an operation's lock on *key* and return it as a :class:`Hold`.

        Parameters
        ----------
        key
            The canonical absolute path of the target.
        mode
            ``"shared"`` (reads) or ``"exclusive"`` (writes, deletes, renames).
        owner
            The connection id.
        owner_label
            The server's name, shown to others as ``lockedBy``.
        path
            The root-relative display path, used in errors and views.
        wait
            How long to wait out a conflict with transient locks; the manager's
            default if ``None``.

        Returns
        -------
        Hold
            The lock, a context manager. A no-op if *owner* keeps *key*.

        Raises
        ------
        FileLocked
            At once if another owner or process keeps *key*; after *wait*
            seconds if transient locks still conflict. ``data`` carries
            ``lockedBy`` and ``retryAfterMs``, never a ``lockId``.
        ClosedError
            The manager is (or gets) closed.
        ValueError
            *key* is not absolute, or *mode* is unknown.
        """
        if mode not in ("shared", "exclusive"):
            raise ValueError(f"unknown lock mode {mode!r}")
        if not os.path.isabs(key):
            raise ValueError("a lock key must be an absolute path")
        request = LockRequest(key, mode, owner, owner_label, path)
        timeout = self._wait if wait is None else max(0.0, float(wait))
        deadline = time.monotonic() + timeout
        poll = _POLL_MIN
        with self._cond:
            while True:
                self._check_open()
                state = self._states.get(key)
                kept = self._kept.on(key)
                if kept is not None:
                    if kept.owner == owner:
                        return self._new_hold(request, noop=True)
                    raise _locked(path, kept.owner_label, kept=True)
                remaining = deadline - time.monotonic()
                blocker = self._in_process_blocker(state, mode)
                if blocker is not None:
                    if remaining <= 0:
                        raise _locked(path, blocker.owner_label, kept=False)
                    self._cond.wait(remaining)
                    continue
                hold = self._take(request, state)
                if hold is not None:
                    return hold
                if remaining <= 0:
                    raise _locked(path, "another process", kept=False)
                self._cond.wait(min(poll, remaining))
                poll = min(poll * 2, _POLL_MAX)

    def release(self, lock_id: str, *, owner: str) -> None:
        """Release the kept lock *lock_id* of *owner* (``files/unlock``).

        Raises
        ------
        NotFound
            ``reason="unknown_lock"``: no such lock, or it belongs to another
            owner (the same answer, so others' lockIds are never confirmed).
        ClosedError
            The manager was closed.
        """
        with self._cond:
            self._check_open()
            self._drop_kept(self._kept.find(lock_id, owner))
        self._notify()

    def force_release(self, lock_id: str) -> LockInfo:
        """Release any kept lock (the notebook user's action) and return what it was.

        Raises
        ------
        NotFound
            ``reason="unknown_lock"``: no such lock.
        ClosedError
            The manager was closed.
        """
        with self._cond:
            self._check_open()
            kept = self._kept.find(lock_id, None)
            self._drop_kept(kept)
        self._notify()
        return _kept_info(kept)

    def release_owner(self, owner: str) -> int:
        """Release every kept lock of *owner* (its connection ended); return how many.

        Transient holds of the owner are left to their operations, which
        release them when they end. The idle lock files *owner* released go.
        """
        with self._cond:
            self._check_open()
            gone = self._kept.of_owner(owner)
            for kept in gone:
                self._drop_kept(kept)
            self._files.forget(owner)
        count = len(gone)
        if count:
            self._notify()
        return count

    def kept_by(self, owner: str, key: str) -> str | None:
        """The ``lockId`` of *owner*'s kept lock on *key*, or ``None``."""
        with self._cond:
            self._check_open()
            kept = self._kept.on(key)
            return kept.lock_id if kept is not None and kept.owner == owner else None

    def conflicts_below(self, key: str, *, owner: str) -> LockInfo | None:
        """A lock in this process of another owner on *key* or below ``key/``, or ``None``.

        For deleting or renaming a directory: any lock inside it, kept or
        transient, held by someone else, is a conflict. Kept locks are reported
        first.
        """
        prefix = key.rstrip("/") + "/"
        found: LockInfo | None = None
        with self._cond:
            self._check_open()
            for k, state in self._states.items():
                if k != key and not k.startswith(prefix):
                    continue
                kept = self._kept.on(k)
                if kept is not None and kept.owner != owner:
                    return _kept_info(kept)
                if found is None:
                    holders = [state.writer] if state.writer is not None else state.readers
                    for hold in holders:
                        if hold is not None and hold.owner != owner:
                            found = hold.info()
                            break
        return found

    def is_locked(self, key: str) -> bool:
        """Whether any lock is held on *key*, in this process or (probed) in another."""
        with self._cond:
            self._check_open()
            state = self._states.get(key)
            if state is not None and not (state.unheld() and self._kept.on(key) is None):
                return True
            return self._files.probe(key)

    def held(self) -> tuple[LockInfo, ...]:
        """All locks held in this process, kept and transient, for the views."""
        out: list[LockInfo] = []
        with self._cond:
            self._check_open()
            for key, state in self._states.items():
                kept = self._kept.on(key)
                if kept is not None:
                    out.append(_kept_info(kept))
                if state.writer is not None:
                    out.append(state.writer.info())
                out.extend(hold.info() for hold in state.readers)
        out.sort(key=lambda info: (info.since, info.path))
        return tuple(out)

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call *listener* (without arguments) after kept locks change.

        It is called from the thread that made the change, outside the
        manager's internal lock; an exception it raises is logged and ignored.

        Returns
        -------
        Callable[[], None]
            A function that unsubscribes *listener*; calling it twice is harmless.
        """
        with self._cond:
            self._check_open()
        return self._listeners.add(listener)

    def close(self) -> None:
        """Release every lock, remove this process's lock files; idempotent.

        Threads waiting in :meth:`hold` get :class:`ClosedError`; holds still
        open become no-ops. Every later call except ``close`` raises
        :class:`ClosedError`.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            had_kept = bool(self._kept)
            for key, state in self._states.items():
                if state.writer is not None:
                    state.writer.released = True
                for hold in state.readers:
                    hold.released = True
                if state.os_lock is not None:
                    self._files.unlock(key, state.os_lock)
            self._files.close()
            self._states.clear()
            self._kept.clear()
            self._cond.notify_all()
        if had_kept:
            self._listeners.notify()
        self._listeners.clear()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __repr__(self) -> str:
        return f"LockManager({self._dir!r}, keys={len(self._states)}, closed={self._closed})"

    # ------------------------------------------------------------------ used by Hold

    def _new_hold(self, request: LockRequest, *, noop: bool) -> Hold:
        return Hold(request, noop=noop, keep=self._keep, release=self._release_hold)

    def _keep(self, hold: Hold) -> str:
        with self._cond:
            self._check_open()
            kept = self._kept.on(hold.key)
            if kept is not None and kept.owner == hold.owner:
                return kept.lock_id
            state = self._states.get(hold.key)
            if not hold.noop:
                if hold.released or state is None or state.writer is not hold:
                    raise ValueError("this hold was released and cannot be kept")
                lock_id = self._make_kept(state, hold)
                self._cond.notify_all()  # waiters on this key now fail at once
        if not hold.noop:
            self._notify()
            return lock_id
        # A no-op hold whose owner's kept lock went away meanwhile: lock again if free at once.
        fresh = self.hold(
            hold.key, "exclusive", owner=hold.owner, owner_label=hold.owner_label, path=hold.path, wait=0
        )
        try:
            return fresh.keep()
        finally:
            fresh.release()  # a no-op once kept

    def _release_hold(self, hold: Hold) -> None:
        with self._cond:
            if hold.released:
                return
            hold.released = True
            state = self._states.get(hold.key)
            if state is None:
                return
            if state.writer is hold:
                state.writer = None
            else:
                with contextlib.suppress(ValueError):
                    state.readers.remove(hold)
            self._settle(hold.key, state, hold.owner)
            self._cond.notify_all()

    # ------------------------------------------------------------------ internals (under self._cond)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the lock manager is closed")

    def _take(self, request: LockRequest, state: _State | None) -> Hold | None:
        """*request*, unblocked in this process: held, or ``None`` while another process holds the key."""
        hold = self._new_hold(request, noop=False)
        if state is not None and state.os_lock is not None:
            # Same mode as the current holders: count in.
            self._add(state, hold)
            return hold
        # Nobody in this process holds the key: take the OS lock (non-blocking).
        kept_by = self._files.try_lock(request.key, exclusive=request.mode == "exclusive")
        if isinstance(kept_by, LockFile):
            state = self._states.setdefault(request.key, _State())
            state.os_lock = kept_by
            self._add(state, hold)
            return hold
        if kept_by:
            raise _locked(request.path, kept_by, kept=True)
        return None

    @staticmethod
    def _in_process_blocker(state: _State | None, mode: LockMode) -> Hold | None:
        """The in-process holder that keeps *mode* from being granted now, or ``None``."""
        if state is None:
            return None
        if state.writer is not None:
            return state.writer
        if mode == "exclusive" and state.readers:
            return state.readers[0]
        return None

    @staticmethod
    def _add(state: _State, hold: Hold) -> None:
        if hold.mode == "exclusive":
            state.writer = hold
        else:
            state.readers.append(hold)

    def _make_kept(self, state: _State, hold: Hold) -> str:
        state.writer = None
        hold.released = True
        kept = self._kept.keep(hold.key, owner=hold.owner, owner_label=hold.owner_label, path=hold.path)
        if state.os_lock is not None:
            self._files.mark_kept(state.os_lock, hold.owner_label)
        return kept.lock_id

    def _drop_kept(self, kept: KeptLock) -> None:
        self._kept.drop(kept)
        state = self._states.get(kept.key)
        if state is not None:
            if state.os_lock is not None:
                self._files.mark_transient(state.os_lock)
            self._settle(kept.key, state, kept.owner)
        self._cond.notify_all()

    def _settle(self, key: str, state: _State, owner: str) -> None:
        """Drop the OS lock and the table entry of a key nobody holds any more (*owner* let go last)."""
        if not state.unheld() or self._kept.on(key) is not None:
            return
        if state.os_lock is not None:
            self._files.unlock(key, state.os_lock, owner=owner)
            state.os_lock = None
        del self._states[key]

    # ------------------------------------------------------------------ listeners (outside self._cond)

    def _notify(self) -> None:
        self._listeners.notify()


def _kept_info(kept: KeptLock) -> LockInfo:
    return LockInfo(
        lock_id=kept.lock_id,
        key=kept.key,
        path=kept.path,
        owner=kept.owner,
        owner_label=kept.owner_label,
        mode="exclusive",
        kept=True,
        since=kept.since,
    )
