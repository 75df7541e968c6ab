"""Locks across processes: one OS advisory lock file per key, in a directory outside every root.

Two kernels on one machine each have their own broker; they coordinate through
``flock`` (:mod:`fcntl` on POSIX, :mod:`portalocker` elsewhere) on lock files in a shared lock directory.
The file of a key (the canonical absolute path of a locked object) is named by
the SHA-256 of the key, so an atomic replace of the object (a rename over it)
does not orphan its lock.

A kept lock writes ``{"kept": true, "by": <label>, "pid": <pid>}`` into its
file, so another process that meets the conflict answers FILE_LOCKED at once
instead of waiting; transient locks leave the file empty. A lock file that is
no longer held is removed: the remover takes an exclusive lock on it, unlinks
it while holding that lock, then closes it; whoever takes a lock checks that
the file it locked is still the one at the path (same inode) and otherwise
retries. A process that dies loses its OS locks at once (the kernel closes its
files), and the stale content it may leave is cleared by the next holder.

With ``max_idle`` (the broker's choice), a released lock file is not removed at
once: its descriptor stays open, holding no lock, for the next lock of the same
key, which takes it again with one ``flock`` instead of creating and removing a
file. Creating and removing a file are journaled metadata operations: on ext4
they cost more than a whole small read otherwise costs (measured in
``benchmarks/README.md``, "Why the code is shaped this way"). An idle file
belongs to the owner (connection) that released it last and is removed, in the
usual way, when that owner is forgotten (:meth:`LockFiles.forget`: its
connection closed), when more than ``max_idle`` are idle (the oldest first), or
at :meth:`LockFiles.close`. To every other process it is an ordinary free lock
file: they may lock it or remove it (the same-inode check catches a removal).

Every call here is non-blocking (``LOCK_NB``): waiting is the caller's business
(:class:`~jupyter_fsbroker.core.locks.LockManager`), and nothing here ever
waits while the caller holds its own lock.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import sys
import threading
from dataclasses import dataclass

import portalocker
from portalocker.exceptions import AlreadyLocked, LockException

from .errors import InternalError

__all__ = ["LockFile", "LockFiles", "lock_path"]

_log = logging.getLogger(__name__)

#: How much of a lock file is read to learn whether its lock is kept.
_CONTENT_MAX = 4096
#: How much of a holder's label a lock file records (so the record always fits in ``_CONTENT_MAX``).
_LABEL_MAX = 256

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
_PROBE_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
_SHARED = portalocker.LockFlags.SHARED | portalocker.LockFlags.NON_BLOCKING
_EXCLUSIVE = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING

if sys.platform == "win32":  # pragma: no cover - portalocker knows Windows' locks

    def _lock(fd: int, exclusive: bool) -> None:
        portalocker.lock(fd, _EXCLUSIVE if exclusive else _SHARED)

    def _unlock(fd: int) -> None:
        portalocker.unlock(fd)

else:
    import fcntl

    def _lock(fd: int, exclusive: bool) -> None:
        """``flock`` *fd* without waiting; :class:`AlreadyLocked` if another holder conflicts.

        Raises what ``portalocker.lock`` raises: on POSIX it calls ``flock``,
        as here, after flag checks that cost five times the call itself (and
        every small read locks and unlocks).
        """
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise AlreadyLocked(exc, str(exc)) from exc
            raise LockException(exc) from exc

    def _unlock(fd: int) -> None:
        """Release the ``flock`` on *fd*; :class:`LockException` if that fails."""
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as exc:
            raise LockException(exc) from exc


@dataclass
class LockFile:
    """This process's OS lock on one lock file (an open descriptor holding ``flock``)."""

    fd: int
    exclusive: bool


class LockFiles:
    """The lock files of one lock directory.

    Parameters
    ----------
    directory
        An absolute path; created (mode ``0o700``, with parents) if missing.
    max_idle
        How many released lock files stay open, idle, for the next lock of
        their key (the oldest goes first); ``0`` removes a lock file at release.
    """

    def __init__(self, directory: str, *, max_idle: int = 0) -> None:
        self._dir = directory
        self._max_idle = max_idle
        # key -> (descriptor holding no lock, the owner that released it); oldest first.
        self._idle: dict[str, tuple[int, str]] = {}
        self._idle_lock = threading.Lock()
        os.makedirs(self._dir, mode=0o700, exist_ok=True)

    def try_lock(self, key: str, *, exclusive: bool) -> LockFile | str | None:
        """One non-blocking attempt at the OS lock of *key*.

        Returns
        -------
        LockFile or str or None
            The lock on success; on a conflict, the ``lockedBy`` text of a kept
            lock held by another process, or ``None`` for a transient one.

        Raises
        ------
        InternalError
            ``reason="lock_error"``: the lock machinery itself failed.
        """
        try:
            return self._try_lock(key, exclusive)
        except (OSError, LockException) as exc:
            _log.error("lock file operation failed: %r", exc)
            raise InternalError("the file lock could not be taken", reason="lock_error") from exc

    def _try_lock(self, key: str, exclusive: bool) -> LockFile | str | None:
        path = self._path(key)
        idle, owner = self._take_idle(key)
        if idle is not None:
            done, again = self._relock(key, idle, owner, path, exclusive)
            if done:
                return again
        while True:
            try:
                fd = os.open(path, _OPEN_FLAGS, 0o600)
            except FileNotFoundError:
                # The lock directory was removed under us: make it again.
                os.makedirs(self._dir, mode=0o700, exist_ok=True)
                fd = os.open(path, _OPEN_FLAGS, 0o600)
            try:
                try:
                    _lock(fd, exclusive)
                except AlreadyLocked:
                    return _read_kept_by(fd)
                size = _size_if_same(fd, path)
                if size is None:
                    continue  # removed or replaced after we opened it: open the new one
                if size:
                    # Stale content of a process that died while keeping a lock.
                    os.ftruncate(fd, 0)
                lock = LockFile(fd, exclusive)
                fd = -1
                return lock
            finally:
                if fd >= 0:
                    os.close(fd)

    def unlock(self, key: str, lock: LockFile, *, owner: str | None = None) -> None:
        """Release *lock*; its lock file is removed when no other process holds it.

        With an *owner* (and ``max_idle``), the file stays open and idle for
        the next lock of *key* until *owner* is forgotten.
        """
        if self._max_idle > 0 and owner is not None:
            try:
                _unlock(lock.fd)
            except (OSError, LockException):
                _log.warning("could not release a lock file", exc_info=True)
            else:
                self._park(key, lock.fd, owner)
                return
        self._remove(key, lock.fd, exclusive=lock.exclusive)

    def forget(self, owner: str | None = None) -> None:
        """Remove the idle lock files *owner* released (every idle one without an owner)."""
        with self._idle_lock:
            gone = [(key, fd) for key, (fd, by) in self._idle.items() if owner is None or by == owner]
            for key, _ in gone:
                del self._idle[key]
        for key, fd in gone:
            self._remove(key, fd, exclusive=False)

    def close(self) -> None:
        """Remove every idle lock file; locks still held are their holders' to release."""
        self.forget()

    def probe(self, key: str) -> bool:
        """Whether another process holds the OS lock of *key*; a leftover file is removed."""
        path = self._path(key)
        idle, owner = self._take_idle(key)
        if idle is not None:
            try:
                _lock(idle, True)
            except AlreadyLocked:
                if _same_file(idle, path):
                    self._park(key, idle, owner)
                    return True
            else:
                _unlock(idle)
                if _same_file(idle, path):
                    self._park(key, idle, owner)
                    return False
            os.close(idle)  # removed under us: look at whatever is at the path now
        try:
            fd = os.open(path, _PROBE_FLAGS)
        except FileNotFoundError:
            return False
        try:
            try:
                _lock(fd, True)
            except AlreadyLocked:
                return True
            # Free: the file is a leftover; remove it while holding the lock.
            with contextlib.suppress(OSError):
                if _same_file(fd, path):
                    os.unlink(path)
            return False
        finally:
            os.close(fd)

    @staticmethod
    def mark_kept(lock: LockFile, label: str) -> None:
        """Record in the file that the lock is kept by *label*, for other processes to see."""
        content = json.dumps({"kept": True, "by": label[:_LABEL_MAX], "pid": os.getpid()})
        try:
            os.ftruncate(lock.fd, 0)
            os.pwrite(lock.fd, content.encode("utf-8"), 0)
        except OSError:
            # Others then see a transient lock and wait: slower, still correct.
            _log.warning("could not record a kept lock in its lock file", exc_info=True)

    @staticmethod
    def mark_transient(lock: LockFile) -> None:
        """Clear the record of a kept lock: the lock is an operation's again, or about to go."""
        with contextlib.suppress(OSError):
            os.ftruncate(lock.fd, 0)

    def _path(self, key: str) -> str:
        return lock_path(self._dir, key)

    def _remove(self, key: str, fd: int, *, exclusive: bool) -> None:
        """Close *fd*, first removing its lock file if no other process holds it."""
        path = self._path(key)
        try:
            if not exclusive:
                # flock converts in place; failing means another process holds it too.
                _lock(fd, True)
            if _same_file(fd, path):
                os.unlink(path)
        except (AlreadyLocked, LockException):
            pass
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                _log.warning("could not remove a lock file", exc_info=True)
        finally:
            os.close(fd)

    def _take_idle(self, key: str) -> tuple[int | None, str]:
        if not self._idle:
            return None, ""
        with self._idle_lock:
            entry = self._idle.pop(key, None)
        return (None, "") if entry is None else entry

    def _park(self, key: str, fd: int, owner: str) -> None:
        """Keep *fd* (holding no lock) idle for the next lock of *key*; the oldest over the limit goes."""
        evicted: list[tuple[str, int]] = []
        with self._idle_lock:
            previous = self._idle.pop(key, None)
            if previous is not None:  # pragma: no cover - one descriptor per key is ever taken
                evicted.append((key, previous[0]))
            self._idle[key] = (fd, owner)
            while len(self._idle) > self._max_idle:
                oldest = next(iter(self._idle))
                evicted.append((oldest, self._idle.pop(oldest)[0]))
        for old_key, old_fd in evicted:
            self._remove(old_key, old_fd, exclusive=False)

    def _relock(
        self, key: str, fd: int, owner: str, path: str, exclusive: bool
    ) -> tuple[bool, LockFile | str | None]:
        """Lock the idle *fd* of *key* again: ``(True, what try_lock returns)``, or
        ``(False, None)`` if its file was removed meanwhile (*fd* is then closed)."""
        try:
            _lock(fd, exclusive)
        except AlreadyLocked:
            if _same_file(fd, path):
                kept_by = _read_kept_by(fd)
                self._park(key, fd, owner)
                return True, kept_by
            os.close(fd)
            return False, None
        except BaseException:
            os.close(fd)
            raise
        try:
            size = _size_if_same(fd, path)
            if size is None:
                os.close(fd)  # removed (or replaced) by another process: open what is there now
                return False, None
            if size:
                os.ftruncate(fd, 0)  # stale content of a process that died while keeping a lock
        except BaseException:
            os.close(fd)
            raise
        return True, LockFile(fd, exclusive)


def lock_path(directory: str, key: str) -> str:
    """The lock file of *key* in the lock directory *directory* (there or not)."""
    return os.path.join(directory, hashlib.sha256(os.fsencode(key)).hexdigest() + ".lock")


def _same_file(fd: int, path: str) -> bool:
    """Whether the open descriptor *fd* is still the file at *path*."""
    return _size_if_same(fd, path) is not None


def _size_if_same(fd: int, path: str) -> int | None:
    """The size of the file open as *fd* if it is still the file at *path*, else ``None``."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mine = os.fstat(fd)
    return mine.st_size if (mine.st_dev, mine.st_ino) == (at_path.st_dev, at_path.st_ino) else None


def _read_kept_by(fd: int) -> str | None:
    """The ``lockedBy`` text of a kept lock recorded in a lock file, or ``None`` if not kept.

    Content that cannot be read or parsed (empty, being written, foreign) counts
    as a transient lock.
    """
    try:
        raw = os.pread(fd, _CONTENT_MAX, 0)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kept") is not True:
        return None
    by = data.get("by")
    pid = data.get("pid")
    label = by if isinstance(by, str) and by else "another process"
    if isinstance(pid, int) and not isinstance(pid, bool):
        return f"{label} (process {pid})"
    return label
