"""The operating-system calls of the core that differ between platforms, each with its fallback.

The core works with descriptor-relative calls (``openat``, ``fstatat``,
``renameat``, ``unlinkat``, ``O_NOFOLLOW``, ``O_DIRECTORY``), which Linux and
macOS both have. Where the two differ, this module picks what the platform
offers, once, at import:

* **A descriptor that only names a directory**, for the walk of
  :mod:`jupyter_fsbroker.core.resolve`: ``O_PATH`` (Linux), else ``O_RDONLY``
  (macOS; Python's :mod:`os` offers no ``O_SEARCH``). Both give a descriptor
  that ``openat``, ``fstatat``, ``renameat`` and ``unlinkat`` accept as
  ``dir_fd`` and that ``fstat`` describes; opened with ``O_NOFOLLOW`` and
  ``O_DIRECTORY``, neither ever follows a symbolic link swapped in, so the
  walk's guarantees hold on both. With ``O_RDONLY`` a directory must also be
  readable to be walked through: one that is only searchable (``--x``) is
  refused, as the operating system's refusal.
* **A rename that never replaces its destination**: ``renameat2`` with
  ``RENAME_NOREPLACE`` (Linux), ``renameatx_np`` with ``RENAME_EXCL`` (macOS),
  else a look and then a rename (a name created in between is replaced).
* **The umask**, read without changing it: from ``/proc/self/status`` (Linux),
  else by setting and restoring it once, at import, before any thread of the
  core runs.
* **fsync of a directory**, which needs a readable descriptor: the directory is
  reopened from the descriptor it is given (``O_PATH`` ones cannot be synced).

This module holds no policy, and it must never pick a fallback that follows a
symbolic link.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from collections.abc import Callable

__all__ = ["DIR_READ_FLAGS", "DIR_WALK_FLAGS", "UMASK", "fsync_dir", "rename_noreplace"]


#: Flags of a directory descriptor used only to reach what is below it.
DIR_WALK_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Flags of a directory descriptor whose entries are read (listing, removal, copy).
DIR_READ_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# What fsync says on a directory it cannot flush there (not an I/O error).
_NO_DIRECTORY_SYNC = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EROFS})


def fsync_dir(dir_fd: int) -> None:
    """Flush the entries of the directory open as *dir_fd* (a descriptor of any kind) to disk.

    A directory that cannot be opened for reading (searchable only) or whose
    file system does not sync directories is skipped: the rename or link that
    came before has happened all the same.

    Raises
    ------
    OSError
        A real failure (an I/O error): what was renamed may not survive a crash.
    """
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except PermissionError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_DIRECTORY_SYNC:
            raise
    finally:
        os.close(fd)


def _read_umask() -> int:
    # os.umask() can only be read by setting it, which races with other threads.
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The process's umask, read once at import.
UMASK = _read_umask()


def _native_noreplace() -> Callable[[int, bytes, int, bytes], int] | None:
    """The platform's atomic no-replace rename as ``f(src_dir_fd, src, dst_dir_fd, dst) -> rc``."""
    if sys.platform == "linux":
        name, flag = "renameat2", 1  # RENAME_NOREPLACE
    elif sys.platform == "darwin":
        name, flag = "renameatx_np", 4  # RENAME_EXCL
    else:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = getattr(libc, name)
    except (OSError, AttributeError):  # an old libc
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    call.restype = ctypes.c_int

    def rename(src_dir_fd: int, src: bytes, dst_dir_fd: int, dst: bytes) -> int:
        return int(call(src_dir_fd, src, dst_dir_fd, dst, flag))

    return rename


_NATIVE_NOREPLACE = _native_noreplace()
# What the native call says when this file system (or kernel) cannot do it: fall back.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


def rename_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Rename *src* to *dst* (each relative to its directory descriptor) unless *dst* exists.

    Raises
    ------
    FileExistsError
        Something (a file, a directory, a link) is at *dst*; nothing was renamed.
    OSError
        The rename failed.
    """
    native = _NATIVE_NOREPLACE
    if native is not None:
        if native(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst)) == 0:
            return
        err = ctypes.get_errno()
        if err not in _UNSUPPORTED:
            raise OSError(err, os.strerror(err), dst)
    # No atomic no-replace rename here: look, then rename.
    try:
        os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    else:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
