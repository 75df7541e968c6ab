"""Locks across processes: one OS advisory lock file per key, in a directory outside every root.

Two kernels on one machine each have their own broker; they coordinate through
``flock`` (by :mod:`portalocker`) on lock files in a shared lock directory.
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
from dataclasses import dataclass

import portalocker
from portalocker.exceptions import AlreadyLocked, LockException

from .errors import InternalError

__all__ = ["LockFile", "LockFiles"]

_log = logging.getLogger(__name__)

#: How much of a lock file is read to learn whether its lock is kept.
_CONTENT_MAX = 4096
#: How much of a holder's label a lock file records (so the record always fits in ``_CONTENT_MAX``).
_LABEL_MAX = 256

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
_PROBE_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
_SHARED = portalocker.LockFlags.SHARED | portalocker.LockFlags.NON_BLOCKING
_EXCLUSIVE = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING


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
    """

    def __init__(self, directory: str) -> None:
        self._dir = directory
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
        while True:
            try:
                fd = os.open(path, _OPEN_FLAGS, 0o600)
            except FileNotFoundError:
                # The lock directory was removed under us: make it again.
                os.makedirs(self._dir, mode=0o700, exist_ok=True)
                fd = os.open(path, _OPEN_FLAGS, 0o600)
            try:
                try:
                    portalocker.lock(fd, _EXCLUSIVE if exclusive else _SHARED)
                except AlreadyLocked:
                    return _read_kept_by(fd)
                if not _same_file(fd, path):
                    continue  # removed or replaced after we opened it: open the new one
                if os.fstat(fd).st_size:
                    # Stale content of a process that died while keeping a lock.
                    os.ftruncate(fd, 0)
                lock = LockFile(fd, exclusive)
                fd = -1
                return lock
            finally:
                if fd >= 0:
                    os.close(fd)

    def unlock(self, key: str, lock: LockFile) -> None:
        """Release *lock*, removing its lock file when no other process holds it."""
        path = self._path(key)
        try:
            if not lock.exclusive:
                # flock converts in place; failing means another process holds it too.
                portalocker.lock(lock.fd, _EXCLUSIVE)
            if _same_file(lock.fd, path):
                os.unlink(path)
        except (AlreadyLocked, LockException):
            pass
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                _log.warning("could not remove a lock file", exc_info=True)
        finally:
            os.close(lock.fd)

    def probe(self, key: str) -> bool:
        """Whether another process holds the OS lock of *key*; a leftover file is removed."""
        path = self._path(key)
        try:
            fd = os.open(path, _PROBE_FLAGS)
        except FileNotFoundError:
            return False
        try:
            try:
                portalocker.lock(fd, _EXCLUSIVE)
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
        return os.path.join(self._dir, hashlib.sha256(os.fsencode(key)).hexdigest() + ".lock")


def _same_file(fd: int, path: str) -> bool:
    """Whether the open descriptor *fd* is still the file at *path*."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (at_path.st_dev, at_path.st_ino)


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
