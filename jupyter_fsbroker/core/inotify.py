"""What Linux's inotify leaves unsaid: a recursive watch that the watch limit cut short.

watchdog's inotify backend watches a tree by adding one inotify watch per
directory, and it ignores a failure below the top directory (meant for a
directory removed meanwhile). When the user's watch limit
(``fs.inotify.max_user_watches``) or instance limit is reached halfway, the
watch is therefore silently partial: changes in part of the tree would never
be reported. :func:`limit_cut_short` finds that out after the fact, from what
the kernel itself reports (``/proc/self/fdinfo`` lists the inode of every
directory an inotify instance of this process watches), and only when a
throwaway watch of its own shows that the limit is reached now.

Linux only; elsewhere nothing is checked. This module never changes a watch
of the process's own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import stat
import sys
from collections.abc import Iterator

__all__ = ["limit_cut_short"]

_FD_DIR = "/proc/self/fd"
_FDINFO_DIR = "/proc/self/fdinfo"
_IN_CLOEXEC = 0o2000000
_IN_ONLYDIR = 0x01000000
_IN_CREATE = 0x00000100
#: What inotify says when a user limit is reached: watches (ENOSPC) or instances (EMFILE).
_LIMIT_ERRORS = frozenset({errno.ENOSPC, errno.EMFILE, errno.ENFILE})


def limit_cut_short(top: str) -> bool:
    """Whether an OS limit kept some directory below *top* out of this process's inotify watches.

    Call it right after a recursive watch of *top* was set up. Cheap when the
    limit is not reached (one throwaway watch); otherwise the tree is walked
    and compared with the watches the kernel lists. ``False`` where inotify is
    not used (not Linux, no ``/proc``).
    """
    if sys.platform != "linux" or not os.path.isdir(_FDINFO_DIR) or not _limit_reached(top):
        return False
    watched = _watched_inodes()
    # No inotify instance at all: the watches are not inotify's (a polling backend).
    return bool(watched) and any(key not in watched for key in _directories(top))


def _watched_inodes() -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of everything the inotify instances of this process watch."""
    found: set[tuple[int, int]] = set()
    try:
        numbers = os.listdir(_FD_DIR)
    except OSError:
        return found
    for number in numbers:
        try:
            if os.readlink(f"{_FD_DIR}/{number}") != "anon_inode:inotify":
                continue
            with open(f"{_FDINFO_DIR}/{number}", encoding="ascii", errors="replace") as info:
                lines = info.read().splitlines()
        except OSError:  # closed meanwhile
            continue
        for line in lines:
            if line.startswith("inotify "):
                fields = dict(item.split(":", 1) for item in line.split()[1:] if ":" in item)
                try:
                    ino, sdev = int(fields["ino"], 16), int(fields["sdev"], 16)
                except (KeyError, ValueError):
                    continue
                # The kernel's device number (major << 20 | minor), as stat() spells it.
                found.add((os.makedev(sdev >> 20, sdev & 0xFFFFF), ino))
    return found


def _directories(top: str) -> Iterator[tuple[int, int]]:
    """Every directory below *top* and *top* itself, symbolic links not followed (as watchdog walks)."""
    stack = [top]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        yield st.st_dev, st.st_ino
        try:
            with os.scandir(path) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue


def _limit_reached(directory: str) -> bool:
    """Whether a new inotify watch of *directory* is refused for a user limit (tried and removed)."""
    libc = _libc()
    if libc is None:
        return False
    fd = libc.inotify_init1(_IN_CLOEXEC)
    if fd < 0:
        return ctypes.get_errno() in _LIMIT_ERRORS
    try:
        wd = libc.inotify_add_watch(fd, os.fsencode(directory), _IN_CREATE | _IN_ONLYDIR)
        return wd < 0 and ctypes.get_errno() in _LIMIT_ERRORS
    finally:
        os.close(fd)  # closing the instance removes its watch


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = (ctypes.c_int,)
        libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    except (OSError, AttributeError):  # not a libc with inotify
        return None
    return libc
