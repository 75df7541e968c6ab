"""Shared and exclusive file locks, kept locks, and their coordination across processes.

Every file operation of the broker holds a lock on its target while it runs:
*shared* for reads, *exclusive* for writes, deletes and renames. With
``keepLocked`` an exclusive lock outlives the operation as a *kept* lock,
identified by a ``lockId`` that only its owner (a connection) may use.

Two levels cooperate.

* **In this process** a table maps each *key* (the canonical absolute path of
  the target) to its holders: a count of shared holders, or one exclusive
  holder, plus an optional kept lock. One :class:`threading.Condition` guards
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
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .errors import ClosedError, FileLocked, NotFound
from .listeners import Listeners
from .lockfiles import LockFile, LockFiles
from .resource import Closeable

__all__ = ["Hold", "LockInfo", "LockManager", "LockMode"]

#: The two lock modes.
LockMode = Literal["shared", "exclusive"]

#: ``retryAfterMs`` suggested after a conflict with an operation's (transient) lock.
RETRY_TRANSIENT_MS = 100
#: ``retryAfterMs`` suggested after a conflict with a kept lock.
RETRY_KEPT_MS = 1000

#: How often a conflict with another process is polled (seconds, first and largest interval).
_POLL_MIN = 0.01
_POLL_MAX = 0.1


@dataclass(frozen=True)
class LockInfo:
    """One lock held in this process, as the views and ``files/stat`` show it.

    Attributes
    ----------
    lock_id
        The ``lockId`` of a kept lock; ``None`` for an operation's transient lock.
    key
        The canonical absolute path of the locked object.
    path
        The root-relative display path, e.g. ``"data/x.csv"``.
    owner
        The id of the connection that holds the lock.
    owner_label
        The name of that connection's server, shown to others as ``lockedBy``.
    mode
        ``"shared"`` or ``"exclusive"``.
    kept
        Whether this is a kept lock (``keepLocked``).
    since
        When the lock was taken (or kept), as :func:`time.time`.
    """

    lock_id: str | None
    key: str
    path: str
    owner: str
    owner_label: str
    mode: str
    kept: bool
    since: float


@dataclass
class _KeptLock:
    """A kept lock: the exclusive lock that outlives its operation."""

    lock_id: str
    owner: str
    owner_label: str
    path: str
    since: float


@dataclass
class _State:
    """The in-process state of one key."""

    readers: list[Hold] = field(default_factory=list)
    writer: Hold | None = None
    kept: _KeptLock | None = None
    os_lock: LockFile | None = None

    def idle(self) -> bool:
        return not self.readers and self.writer is None and self.kept is None


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


@dataclass(frozen=True)
class _Wanted:
    """What a caller of :meth:`LockManager.hold` asks for; a :class:`Hold` is made from it."""

    key: str
    mode: LockMode
    owner: str
    owner_label: str
    path: str


class Hold(Closeable):
    """An operation's lock on one key, returned by :meth:`LockManager.hold`.

    Use it as a context manager: leaving the ``with`` block releases the lock,
    unless :meth:`keep` turned it into a kept lock. A hold made by the owner of a
    kept lock on the same key is a no-op: the kept lock already covers it (so
    releasing the kept lock meanwhile leaves that operation unlocked).
    """

    __slots__ = ("_manager", "_noop", "_released", "key", "mode", "owner", "owner_label", "path", "since")

    def __init__(self, manager: LockManager, wanted: _Wanted, *, noop: bool) -> None:
        self._manager = manager
        self.key = wanted.key
        self.mode: LockMode = wanted.mode
        self.owner = wanted.owner
        self.owner_label = wanted.owner_label
        self.path = wanted.path
        self.since = time.time()
        self._noop = noop
        self._released = noop

    @property
    def active(self) -> bool:
        """Whether this hold still holds a transient lock of its own."""
        return not self._released

    def info(self) -> LockInfo:
        """This hold as a :class:`LockInfo` (a transient lock)."""
        return LockInfo(
            lock_id=None,
            key=self.key,
            path=self.path,
            owner=self.owner,
            owner_label=self.owner_label,
            mode=self.mode,
            kept=False,
            since=self.since,
        )

    def keep(self) -> str:
        """Turn this exclusive hold into a kept lock and return its ``lockId``.

        Leaving the ``with`` block then does not release the lock; it lasts
        until :meth:`LockManager.release`, :meth:`LockManager.force_release`,
        :meth:`LockManager.release_owner` or :meth:`LockManager.close`.

        Returns
        -------
        str
            ``"lock_"`` and 32 hex digits; the existing ``lockId`` if the owner
            already keeps this key.

        Raises
        ------
        ValueError
            The hold is shared, or was released already.
        FileLocked
            A no-op hold whose owner's kept lock was released meanwhile, and
            the key cannot be locked again at once.
        ClosedError
            The manager was closed.
        """
        if self.mode != "exclusive":
            raise ValueError("only an exclusive hold can be kept")
        return self._manager._keep(self)

    def release(self) -> None:
        """Release this hold's transient lock; idempotent, and a no-op once kept."""
        self._manager._release_hold(self)

    def close(self) -> None:
        """The same as :meth:`release`: what leaving the ``with`` block does."""
        self.release()

    def __repr__(self) -> str:
        state = "no-op" if self._noop else ("released" if self._released else "held")
        return f"Hold({self.path!r}, {self.mode}, owner={self.owner!r}, {state})"


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
        self._kept_ids: dict[str, str] = {}  # lockId -> key
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
        wanted = _Wanted(key, mode, owner, owner_label, path)
        timeout = self._wait if wait is None else max(0.0, float(wait))
        deadline = time.monotonic() + timeout
        poll = _POLL_MIN
        with self._cond:
            while True:
                self._check_open()
                state = self._states.get(key)
                if state is not None and state.kept is not None:
                    if state.kept.owner == owner:
                        return Hold(self, wanted, noop=True)
                    raise _locked(path, state.kept.owner_label, kept=True)
                remaining = deadline - time.monotonic()
                blocker = self._in_process_blocker(state, mode)
                if blocker is not None:
                    if remaining <= 0:
                        raise _locked(path, blocker.owner_label, kept=False)
                    self._cond.wait(remaining)
                    continue
                hold = Hold(self, wanted, noop=False)
                if state is not None and state.os_lock is not None:
                    # Same mode as the current holders: count in.
                    self._add(state, hold)
                    return hold
                # Nobody in this process holds the key: take the OS lock (non-blocking).
                kept_by = self._files.try_lock(key, exclusive=mode == "exclusive")
                if isinstance(kept_by, LockFile):
                    state = self._states.setdefault(key, _State())
                    state.os_lock = kept_by
                    self._add(state, hold)
                    return hold
                if kept_by:
                    raise _locked(path, kept_by, kept=True)
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
            key, state = self._find_kept(lock_id, owner)
            self._drop_kept(key, state)
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
            key, state = self._find_kept(lock_id, None)
            assert state.kept is not None
            info = self._kept_info(key, state.kept)
            self._drop_kept(key, state)
        self._notify()
        return info

    def release_owner(self, owner: str) -> int:
        """Release every kept lock of *owner* (its connection ended); return how many.

        Transient holds of the owner are left to their operations, which
        release them when they end. The idle lock files *owner* released go.
        """
        count = 0
        with self._cond:
            self._check_open()
            for key in list(self._kept_ids.values()):
                state = self._states.get(key)
                if state is not None and state.kept is not None and state.kept.owner == owner:
                    self._drop_kept(key, state)
                    count += 1
            self._files.forget(owner)
        if count:
            self._notify()
        return count

    def kept_by(self, owner: str, key: str) -> str | None:
        """The ``lockId`` of *owner*'s kept lock on *key*, or ``None``."""
        with self._cond:
            self._check_open()
            state = self._states.get(key)
            if state is not None and state.kept is not None and state.kept.owner == owner:
                return state.kept.lock_id
            return None

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
                if state.kept is not None and state.kept.owner != owner:
                    return self._kept_info(k, state.kept)
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
            if state is not None and not state.idle():
                return True
            return self._files.probe(key)

    def held(self) -> tuple[LockInfo, ...]:
        """All locks held in this process, kept and transient, for the views."""
        out: list[LockInfo] = []
        with self._cond:
            self._check_open()
            for key, state in self._states.items():
                if state.kept is not None:
                    out.append(self._kept_info(key, state.kept))
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
            had_kept = bool(self._kept_ids)
            for key, state in self._states.items():
                if state.writer is not None:
                    state.writer._released = True
                for hold in state.readers:
                    hold._released = True
                if state.os_lock is not None:
                    self._files.unlock(key, state.os_lock)
            self._files.close()
            self._states.clear()
            self._kept_ids.clear()
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

    def _keep(self, hold: Hold) -> str:
        with self._cond:
            self._check_open()
            state = self._states.get(hold.key)
            if state is not None and state.kept is not None and state.kept.owner == hold.owner:
                return state.kept.lock_id
            if not hold._noop:
                if hold._released or state is None or state.writer is not hold:
                    raise ValueError("this hold was released and cannot be kept")
                lock_id = self._make_kept(hold.key, state, hold)
                self._cond.notify_all()  # waiters on this key now fail at once
        if not hold._noop:
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
            if hold._released:
                return
            hold._released = True
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

    def _find_kept(self, lock_id: str, owner: str | None) -> tuple[str, _State]:
        """The key and state of the kept lock *lock_id* (of *owner*, unless ``None``), or NOT_FOUND."""
        self._check_open()
        key = self._kept_ids.get(lock_id)
        state = self._states.get(key) if key is not None else None
        if (
            key is None
            or state is None
            or state.kept is None
            or (owner is not None and state.kept.owner != owner)
        ):
            raise NotFound("no such lock", reason="unknown_lock")
        return key, state

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

    def _kept_info(self, key: str, kept: _KeptLock) -> LockInfo:
        return LockInfo(
            lock_id=kept.lock_id,
            key=key,
            path=kept.path,
            owner=kept.owner,
            owner_label=kept.owner_label,
            mode="exclusive",
            kept=True,
            since=kept.since,
        )

    def _make_kept(self, key: str, state: _State, hold: Hold) -> str:
        lock_id = "lock_" + secrets.token_hex(16)
        while lock_id in self._kept_ids:  # pragma: no cover - 128 random bits
            lock_id = "lock_" + secrets.token_hex(16)
        state.writer = None
        hold._released = True
        state.kept = _KeptLock(lock_id, hold.owner, hold.owner_label, hold.path, time.time())
        self._kept_ids[lock_id] = key
        if state.os_lock is not None:
            self._files.mark_kept(state.os_lock, hold.owner_label)
        return lock_id

    def _drop_kept(self, key: str, state: _State) -> None:
        assert state.kept is not None
        owner = state.kept.owner
        self._kept_ids.pop(state.kept.lock_id, None)
        state.kept = None
        if state.os_lock is not None:
            self._files.mark_transient(state.os_lock)
        self._settle(key, state, owner)
        self._cond.notify_all()

    def _settle(self, key: str, state: _State, owner: str) -> None:
        """Drop the OS lock and the table entry of a key nobody holds any more (*owner* let go last)."""
        if not state.idle():
            return
        if state.os_lock is not None:
            self._files.unlock(key, state.os_lock, owner=owner)
            state.os_lock = None
        del self._states[key]

    # ------------------------------------------------------------------ listeners (outside self._cond)

    def _notify(self) -> None:
        self._listeners.notify()
