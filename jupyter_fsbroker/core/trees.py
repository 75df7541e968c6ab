"""Whole trees, descriptor-relative: permanent removal, copy (for moves across filesystems), size.

Every function here works below a directory descriptor and one entry name, and
never follows a symbolic link: a link is removed, copied or counted as a link,
and a directory swapped for a link while it is being walked is never entered.
The walks are iterative and hold a bounded number of descriptors whatever the
depth of the tree (:class:`~jupyter_fsbroker.core.descent.OpenDirs`): a tree
thousands of levels deep is removed or copied with a few descriptors, never one
per level. Nothing here opens a path by its absolute spelling, and nothing
here knows about roots or grants: the callers resolved and checked the entry.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from dataclasses import dataclass

from .descent import OpenDirs
from .posix import DIR_READ_FLAGS, fsync_dir

__all__ = ["check_name", "copy_tree", "remove_tree", "tree_size"]

log = logging.getLogger(__name__)

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_BUFFER = 1024 * 1024
#: How often a removal looks again at a directory that keeps changing under it.
_RETRIES = 8


def check_name(name: str) -> None:
    """Refuse anything but a single path component.

    Raises
    ------
    ValueError
        *name* is empty, ``.``, ``..``, or holds ``/`` or NUL.
    """
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise ValueError(f"not a single path component: {name!r}")


# -- removal ----------------------------------------------------------------------------------------


@dataclass
class _Removal:
    """A directory being emptied: what is left in it, and how often it was found refilled."""

    pending: list[tuple[str, bool]]
    tries: int = 0


def remove_tree(dir_fd: int, name: str, *, force: bool = False) -> None:
    """Permanently delete the entry *name* of the directory open as *dir_fd*.

    A file or symbolic link is unlinked (the link, never its target); a
    directory is emptied and removed, depth first, with descriptor-relative
    calls only (``O_NOFOLLOW | O_DIRECTORY`` opens, ``scandir`` on descriptors,
    ``unlink``/``rmdir`` with ``dir_fd``). A directory swapped for a symbolic
    link during the removal is unlinked as a link, never entered.

    Parameters
    ----------
    dir_fd
        A descriptor of the directory holding *name* (one that only names it is fine).
    name
        A single path component.
    force
        Make directories readable and writable by their owner first (for the
        trash's own items, which may hold read-only folders).

    Raises
    ------
    FileNotFoundError
        *name* does not exist.
    OSError
        The removal failed (permissions, a busy mount point ...); what was
        already removed stays removed.
    ValueError
        *name* is not a single component.
    """
    check_name(name)
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    with OpenDirs(dir_fd) as dirs:
        frames: list[_Removal] = []  # frames[k] is the directory at level k + 1 of *dirs*
        top = _enter(dirs, name, stat.S_ISDIR(st.st_mode), force)
        if top is None:
            return
        frames.append(top)
        while frames:
            frame = frames[-1]
            if frame.pending:
                child, is_dir = frame.pending.pop()
                try:
                    sub = _enter(dirs, child, is_dir, force)
                except FileNotFoundError:
                    continue
                if sub is not None:
                    frames.append(sub)
                continue
            here = dirs.names[-1]
            try:
                os.rmdir(here, dir_fd=dirs.fd(-2))
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and frame.tries < _RETRIES:
                    # Something was added meanwhile: empty it again.
                    frame.tries += 1
                    frame.pending = _list(dirs.fd())
                    continue
                if not (exc.errno == errno.ENOENT and len(frames) > 1):
                    raise
            frames.pop()
            dirs.pop()


def _enter(dirs: OpenDirs, name: str, is_dir: bool, force: bool) -> _Removal | None:
    """Unlink the non-directory *name* of the deepest level, or go into the directory *name*."""
    parent = dirs.fd()
    for _ in range(_RETRIES):
        if not is_dir:
            try:
                os.unlink(name, dir_fd=parent)
                return None
            except OSError as exc:
                if exc.errno not in (errno.EISDIR, errno.EPERM):
                    raise
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise
        fd = _open_dir(parent, name, force)
        if fd is not None:
            try:
                pending = _list(fd)
            except BaseException:
                os.close(fd)
                raise
            dirs.push(name, fd)
            return _Removal(pending)
        # Not a directory (any more): unlink it.
        is_dir = False
    raise OSError(errno.EAGAIN, "the entry keeps changing while it is removed", name)


def _open_dir(parent: int, name: str, force: bool) -> int | None:
    """Open the directory *name* without following a link; ``None`` if it is not a directory."""
    try:
        fd = os.open(name, DIR_READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None
        if not (force and exc.errno == errno.EACCES):
            raise
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        with contextlib.suppress(OSError, NotImplementedError):
            os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
        fd = os.open(name, DIR_READ_FLAGS, dir_fd=parent)
    if force:
        mode = os.fstat(fd).st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
    return fd


def _list(fd: int) -> list[tuple[str, bool]]:
    """The entries of the directory open as *fd*, with whether each is a directory (no links)."""
    with os.scandir(fd) as it:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in it]


# -- copying (for moves across filesystems) ---------------------------------------------------------


@dataclass
class _Copy:
    """A directory being copied: its own ``stat`` (mode and times, set last) and what is left."""

    st: os.stat_result
    pending: list[str]


def copy_tree(src_dir: int, name: str, dst_dir: int, dst_name: str) -> None:
    """Copy the entry *name* of *src_dir* to *dst_name* in *dst_dir*, never following a link.

    Files keep their bytes, mode and times; directories are copied depth
    first; links are recreated as links; FIFOs are recreated; sockets and
    devices are left out. Everything written is fsynced.

    Raises
    ------
    OSError
        The copy failed; what was copied so far stays (the caller removes it).
    """
    with OpenDirs(src_dir) as sources, OpenDirs(dst_dir) as targets:
        frames: list[_Copy] = []
        top = _copy_one(sources, name, targets, dst_name)
        if top is not None:
            frames.append(top)
        while frames:
            frame = frames[-1]
            if frame.pending:
                child = frame.pending.pop()
                sub = _copy_one(sources, child, targets, child)
                if sub is not None:
                    frames.append(sub)
                continue
            made = targets.fd()
            os.fchmod(made, stat.S_IMODE(frame.st.st_mode))
            os.utime(made, ns=(frame.st.st_atime_ns, frame.st.st_mtime_ns))
            os.fsync(made)
            frames.pop()
            sources.pop()
            targets.pop()
    fsync_dir(dst_dir)


def _copy_one(sources: OpenDirs, name: str, targets: OpenDirs, dst_name: str) -> _Copy | None:
    """Copy a non-directory, or create the copy of a directory, go into both and return its frame."""
    src_dir, dst_dir = sources.fd(), targets.fd()
    st = os.stat(name, dir_fd=src_dir, follow_symlinks=False)
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(name, dir_fd=src_dir), dst_name, dir_fd=dst_dir)
    elif stat.S_ISREG(mode):
        _copy_file(src_dir, name, dst_dir, dst_name)
    elif stat.S_ISDIR(mode):
        src = os.open(name, DIR_READ_FLAGS, dir_fd=src_dir)
        try:
            st = os.fstat(src)
            pending = sorted((n for n, _ in _list(src)), reverse=True)
            os.mkdir(dst_name, 0o700, dir_fd=dst_dir)
            dst = os.open(dst_name, DIR_READ_FLAGS, dir_fd=dst_dir)
        except BaseException:
            os.close(src)
            raise
        sources.push(name, src)
        targets.push(dst_name, dst)
        return _Copy(st, pending)
    elif stat.S_ISFIFO(mode):
        os.mkfifo(dst_name, stat.S_IMODE(mode), dir_fd=dst_dir)
    else:
        log.warning("a socket or device file cannot be kept in the trash; it is left out")
    return None


def _copy_file(src_dir: int, name: str, dst_dir: int, dst_name: str) -> None:
    src = os.open(name, _FILE_FLAGS, dir_fd=src_dir)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EAGAIN, "the entry changed while it was copied", name)
        dst = os.open(dst_name, _NEW_FILE_FLAGS, 0o600, dir_fd=dst_dir)
        try:
            while chunk := os.read(src, _COPY_BUFFER):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


# -- size -------------------------------------------------------------------------------------------


def tree_size(dir_fd: int, name: str) -> int:
    """Bytes of the file *name*, or of all files below the directory *name*; links count 0.

    Directories that cannot be read are skipped: the size is informative only.
    """
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    if not stat.S_ISDIR(st.st_mode):
        return 0
    total = 0
    with OpenDirs(dir_fd) as dirs:
        frames: list[list[str]] = []  # the subdirectories left to visit at each level
        child: str | None = name
        while True:
            if child is not None:
                try:
                    fd = os.open(child, DIR_READ_FLAGS, dir_fd=dirs.fd())
                except OSError:
                    fd = -1
                if fd >= 0:
                    subdirs: list[str] = []
                    dirs.push(child, fd)
                    frames.append(subdirs)
                    try:
                        with os.scandir(fd) as it:
                            for entry in it:
                                if entry.is_dir(follow_symlinks=False):
                                    subdirs.append(entry.name)
                                elif entry.is_file(follow_symlinks=False):
                                    total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
            while frames and not frames[-1]:
                frames.pop()
                dirs.pop()
            if not frames:
                return total
            child = frames[-1].pop()
