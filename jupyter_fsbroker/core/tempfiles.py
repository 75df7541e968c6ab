"""The broker's temporary files: recognisable names, held under a lock, and the leftovers of dead writers.

Every write of the broker goes to a temporary file beside its target
(``.fsbroker-<pid>-<16 hex>.tmp``), which then replaces the target with one
rename (:mod:`jupyter_fsbroker.core.ops`, :mod:`jupyter_fsbroker.core.uploads`).
A process killed in the middle of that leaves the temporary file behind. This
module makes those files and removes such leftovers, safely:

* **The writer holds an OS lock for as long as it writes.** :func:`new_temp`
  creates the file (``O_EXCL``) and takes an exclusive, non-blocking
  ``flock`` on it, which its descriptor keeps until it is closed: for an
  atomic write until the rename is done, for a staged upload for the
  upload's whole life. ``flock`` locks belong to the open file, so they also
  exclude a cleaner in the same process, and the operating system drops them
  the moment their process dies, however it dies.
* **A cleaner removes only a file whose lock it takes without waiting**, only
  if the name still denotes the very file it locked (same device and inode),
  and while it holds that lock. A writer that finds its fresh file locked, or
  no longer at its name, (a cleaner came in between the creation and the
  lock) gives that name up and makes another, so no writer ever writes into a
  file a cleaner could remove.
* **A second guard, age:** a leftover is removed only once it has not been
  modified for ``stale_age`` seconds (:attr:`BrokerConfig.stale_temp_age
  <jupyter_fsbroker.core.config.BrokerConfig.stale_temp_age>`), for writers
  the lock cannot reach (a file system without ``flock``, a writer that does
  not lock).
* **Only the broker's own names**, regular files, never followed through a
  symbolic link; requests cannot name them (the broker refuses such paths),
  listings and watch events never show them.

When is a folder swept? The folder a write goes to, before the write's own
temporary file is made (at most once per ``stale_age`` per folder and broker,
so that a busy folder is not scanned at every write), and the folder of each
read-write root when it is added to a broker. Nothing else is scanned: a leftover deeper
in a tree goes the next time its own folder is written, so that starting a
broker never walks a large tree.

This module decides nothing about policy; it must never remove a file whose
name is not the broker's, nor one a live writer still holds.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
import stat
import threading
import time
from collections import OrderedDict

from .errors import AlreadyExists
from .posix import DIR_READ_FLAGS

__all__ = ["TEMP_PREFIX", "TempFiles", "discard_temp", "is_temp_name", "new_temp", "remove_if_stale"]

log = logging.getLogger(__name__)

#: Temporary files of the broker start with this; they are never listed nor reported.
TEMP_PREFIX = ".fsbroker-"
_TEMP_SUFFIX = ".tmp"

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A cleaner opens for writing where it may (an emulated flock, as on NFS, needs it for an
# exclusive lock) and falls back to reading (a leftover whose mode was already made read-only).
_PROBE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: What flock says where the file system has no such locks: the writer goes on unlocked.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS})
#: Folders whose last sweep this many folders ago is forgotten (it is then swept again).
_REMEMBERED_FOLDERS = 4096


def is_temp_name(name: str) -> bool:
    """Whether *name* is one of the broker's temporary files."""
    return name.startswith(TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX)


def new_temp(dir_fd: int) -> tuple[str, int]:
    """Create a new, empty temporary file in the directory *dir_fd*, locked; return its name and descriptor.

    The descriptor holds the file's ``flock`` until it is closed: keep it open
    for as long as the file is written.
    """
    for _ in range(100):
        name = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(8)}{_TEMP_SUFFIX}"
        try:
            fd = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        try:
            if _lock(fd, writer=True) and _is_at(fd, dir_fd, name):
                return name, fd
            # A cleaner came between the creation and the lock: leave this one, make another.
            if _is_at(fd, dir_fd, name):
                discard_temp(dir_fd, name)
        except BaseException:
            os.close(fd)
            discard_temp(dir_fd, name)
            raise
        os.close(fd)
    raise AlreadyExists("cannot create a temporary file", reason="temp_exists")  # pragma: no cover


def discard_temp(dir_fd: int, name: str) -> None:
    """Remove a temporary file if it is still there; one that cannot be removed now is left to a sweep."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        # A folder made read-only meanwhile, say: once its descriptor is closed the file is
        # unlocked, and the next sweep of that folder removes it.
        log.warning("could not remove a temporary file now (%s); a later sweep will", exc.strerror)


def remove_if_stale(dir_fd: int, name: str, stale_age: float) -> bool:
    """Remove the temporary file *name* of *dir_fd* if no live writer holds it; whether it was removed.

    The file goes only if it is a regular file with one of the broker's
    names, its lock can be taken without waiting, it was not modified for
    *stale_age* seconds, and *name* still denotes the file that was locked.
    """
    if not is_temp_name(name):
        return False
    fd = _open_probe(dir_fd, name)
    if fd is None:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not _lock(fd, writer=False):
            return False
        if time.time() - os.fstat(fd).st_mtime < stale_age or not _is_at(fd, dir_fd, name):
            return False
        # Removed while the lock is held: a writer that locks it afterwards sees it gone.
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError as exc:
        log.debug("left a temporary file in place: %s", exc.strerror)
        return False
    finally:
        os.close(fd)


class TempFiles:
    """Sweeps the leftovers of dead writers out of folders, each at most once per ``stale_age``.

    Thread-safe. One per broker; it remembers (by device and inode) which
    folders it swept and when, for the last few thousand folders.

    Parameters
    ----------
    stale_age
        Seconds a leftover must have been left unmodified before it is
        removed; also how long a swept folder is not swept again.
    """

    def __init__(self, stale_age: float) -> None:
        self.stale_age = stale_age
        self._lock = threading.Lock()
        self._swept: OrderedDict[tuple[int, int], float] = OrderedDict()

    def sweep(self, dir_fd: int) -> int:
        """Remove the stale temporary files of the folder open as *dir_fd* now; return how many.

        *dir_fd* may be any descriptor of the folder (one that only names it
        is fine). A folder that cannot be read is left alone.
        """
        try:
            fd = os.open(".", DIR_READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return 0
        try:
            self._remember(os.fstat(fd))
            with os.scandir(fd) as entries:
                names = [entry.name for entry in entries if is_temp_name(entry.name)]
            age = self.stale_age
            return sum(remove_if_stale(fd, name, age) for name in names)
        except OSError as exc:
            log.debug("could not sweep a folder: %s", exc.strerror)
            return 0
        finally:
            os.close(fd)

    def sweep_due(self, dir_fd: int) -> int:
        """:meth:`sweep` the folder *dir_fd* unless it was swept in the last ``stale_age`` seconds."""
        try:
            st = os.fstat(dir_fd)
        except OSError:
            return 0
        key = (st.st_dev, st.st_ino)
        with self._lock:
            last = self._swept.get(key)
        if last is not None and time.monotonic() - last < self.stale_age:
            return 0
        return self.sweep(dir_fd)

    def _remember(self, st: os.stat_result) -> None:
        key = (st.st_dev, st.st_ino)
        with self._lock:
            self._swept.pop(key, None)
            self._swept[key] = time.monotonic()
            while len(self._swept) > _REMEMBERED_FOLDERS:
                self._swept.popitem(last=False)


def _lock(fd: int, *, writer: bool) -> bool:
    """Take the file's exclusive ``flock`` without waiting; whether it is held now.

    Where the file system has no such locks, a writer goes on (the age guard
    protects its file) and a cleaner does not.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        if exc.errno in _NO_LOCKS:
            return writer
        raise
    return True


def _is_at(fd: int, dir_fd: int, name: str) -> bool:
    """Whether *name* in *dir_fd* is still the file open as *fd*."""
    try:
        at_name = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (at_name.st_dev, at_name.st_ino)


def _open_probe(dir_fd: int, name: str) -> int | None:
    for access in (os.O_RDWR, os.O_RDONLY):
        try:
            return os.open(name, access | _PROBE_FLAGS, dir_fd=dir_fd)
        except PermissionError:
            continue
        except OSError:
            # Gone, a symbolic link (ELOOP), a directory, a socket: not a leftover to remove.
            return None
    return None
