"""Filesystem mechanics on checked objects.

Every function here works on a :class:`~jupyter_fsbroker.core.resolve.Resolved`
(a parent directory descriptor and a final name that were checked) and never
on a path string, so nothing here can be steered outside a root. Policy
(grants, locks, limits) is the broker's business; this module does the I/O and
checks what the I/O itself depends on (a directory where a file is written,
an ``ifMatch`` etag), and does it safely: ``O_NOFOLLOW`` everywhere, ``O_NONBLOCK`` so that a
FIFO swapped in can never hang a read, and writes that go to a temporary file
in the same directory, are flushed and fsynced, and replace the target with
one rename.

Every function blocks; the broker calls them off any event loop.
"""

from __future__ import annotations

import contextlib
import errno
import mimetypes
import os
import stat
from dataclasses import dataclass

try:
    # SIMD base64: many times faster than the standard library's (benchmarks/README.md, "Why
    # the code is shaped this way"), and made as text at once (no bytes to decode into a string).
    from pybase64 import b64encode_as_string
except ImportError:  # pragma: no cover - a declared dependency; the standard library is slower
    from base64 import b64encode

    def b64encode_as_string(s: bytes | bytearray | memoryview) -> str:  # type: ignore[misc]
        return b64encode(s).decode("ascii")


from ..wire.timestamps import iso_utc
from .buffers import POOLED_MIN, BufferPool
from .errors import (
    AlreadyExists,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    WrongType,
)
from .posix import DIR_READ_FLAGS, UMASK, fsync_dir, rename_noreplace
from .resolve import Resolved
from .tempfiles import discard_temp, new_temp
from .textcodec import text_codec

__all__ = [
    "Chunk",
    "check_if_match",
    "check_writable",
    "commit_temp",
    "entry_type",
    "etag",
    "make_directory",
    "mime_type",
    "open_directory",
    "open_regular",
    "read_chunk",
    "rename",
    "stat_info",
    "write_atomic",
]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_MODE = 0o666 & ~UMASK


def etag(st: os.stat_result) -> str:
    """An opaque tag that changes whenever the content changes."""
    return f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"


def mime_type(name: str) -> str:
    """The MIME type guessed from *name*, ``application/octet-stream`` when unknown."""
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def entry_type(mode: int) -> str:
    """``file``, ``directory``, ``symlink`` or ``other`` for an ``st_mode``."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def stat_info(res: Resolved) -> dict[str, object]:
    """``type``, ``size``, ``mtime``, ``etag`` and ``mimeType`` of an existing object."""
    st = res.st
    if st is None:
        raise NotFound(f"{res.rel} does not exist", path=res.rel)
    kind = entry_type(st.st_mode)
    return {
        "path": res.rel,
        "type": kind,
        "size": st.st_size if kind == "file" else 0,
        "mtime": iso_utc(st.st_mtime),
        "etag": etag(st),
        "mimeType": "inode/directory" if kind == "directory" else mime_type(res.name or res.root.name),
    }


# -- preconditions -----------------------------------------------------------------------------


def check_writable(res: Resolved, shown: str, *, create: bool, exclusive: bool) -> None:
    """Refuse to write *res* whole: a directory, missing without *create*, present with *exclusive*."""
    if res.name is None or (res.st is not None and stat.S_ISDIR(res.st.st_mode)):
        raise WrongType(f"{shown} is a directory", reason="is_directory", path=shown)
    if res.st is None and not create:
        raise NotFound(f"{shown} does not exist", path=shown)
    if res.st is not None and exclusive:
        raise AlreadyExists(f"{shown} exists already", path=shown)


def check_if_match(st: os.stat_result | None, if_match: str | None, shown: str) -> None:
    """Refuse (PRECONDITION_FAILED) when *if_match* is given and the object (*st*) is gone or changed."""
    if if_match is not None and (st is None or etag(st) != if_match):
        raise PreconditionFailed(f"{shown} changed since it was read", reason="etag_mismatch", path=shown)


# -- opening -----------------------------------------------------------------------------------


def open_regular(res: Resolved, shown: str) -> tuple[int, os.stat_result]:
    """Open an existing regular file for reading; return the descriptor and its ``fstat``."""
    if res.name is None:
        raise WrongType(f"{shown} is a directory", reason="is_directory", path=shown)
    try:
        fd = os.open(res.name, _READ_FLAGS, dir_fd=res.dir_fd)
    except FileNotFoundError:
        raise NotFound(f"{shown} does not exist", path=shown) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionDenied(
                f"{shown} was replaced by a symbolic link", reason="symlink_race", path=shown
            ) from None
        raise
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        return fd, st
    os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        raise WrongType(f"{shown} is a directory", reason="is_directory", path=shown)
    raise PermissionDenied(
        "special files (pipes, sockets, devices) are not served", reason="special_file", path=shown
    )


def open_directory(res: Resolved, shown: str) -> int:
    """Open an existing directory for listing; return a readable descriptor."""
    try:
        return os.open(res.name or ".", DIR_READ_FLAGS, dir_fd=res.dir_fd)
    except FileNotFoundError:
        raise NotFound(f"{shown} does not exist", path=shown) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and res.name is not None:
            # O_DIRECTORY|O_NOFOLLOW on a symlink also says ENOTDIR: tell the two apart.
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.stat(res.name, dir_fd=res.dir_fd, follow_symlinks=False).st_mode):
                    raise PermissionDenied(
                        f"{shown} was replaced by a symbolic link", reason="symlink_race", path=shown
                    ) from None
        if exc.errno == errno.ENOTDIR:
            raise WrongType(f"{shown} is not a directory", reason="not_a_directory", path=shown) from None
        if exc.errno == errno.ELOOP:
            raise PermissionDenied(
                f"{shown} was replaced by a symbolic link", reason="symlink_race", path=shown
            ) from None
        raise


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One read: the content as sent and what it covers."""

    content: str
    size: int
    offset: int
    bytes_read: int
    eof: bool
    etag: str


def read_chunk(
    res: Resolved,
    *,
    offset: int,
    length: int,
    encoding: str,
    shown: str,
    buffers: BufferPool | None = None,
) -> Chunk:
    """Read up to *length* bytes at *offset*; text chunks end on a character boundary.

    A text chunk that would end inside a multi-byte character stops before it
    (the next chunk starts there). When *length* is shorter than one character,
    the chunk is extended to hold at least one whole character. How text is
    decoded, and which codecs may be read in pieces, is
    :mod:`jupyter_fsbroker.core.textcodec`'s business. A large binary chunk
    is read into a buffer lent by *buffers* (given back once it is encoded).
    """
    codec = None if encoding == "base64" else text_codec(encoding, shown)
    if codec is not None:
        codec.check_start(offset, shown)
    fd, st = open_regular(res, shown)
    try:
        size = st.st_size

        def read(n: int, at: int) -> bytes:
            # Never ask for more than the file holds: pread allocates what it is asked for.
            want = min(n, max(size - at, 0))
            return os.pread(fd, want, at) if want else b""

        if codec is None:
            want = min(length, max(size - offset, 0))
            if buffers is None or want < POOLED_MIN:
                content = b64encode_as_string(read(length, offset))
            else:
                content, want = _read_base64(fd, want, offset, buffers)
            return Chunk(content, size, offset, want, offset + want >= size, etag(st))
        text, used = codec.decode_chunk(read, offset=offset, length=length, size=size, shown=shown)
        return Chunk(text, size, offset, used, offset + used >= size, etag(st))
    finally:
        os.close(fd)


def _read_base64(fd: int, want: int, offset: int, buffers: BufferPool) -> tuple[str, int]:
    """Up to *want* bytes at *offset* read into a lent buffer, as base64; and how many were read."""
    buffer = buffers.take(want)
    try:
        with memoryview(buffer) as view:
            got = os.preadv(fd, [view[:want]], offset)
            return b64encode_as_string(view[:got]), got
    finally:
        buffers.give(buffer)


# -- writing -----------------------------------------------------------------------------------


def commit_temp(
    dir_fd: int,
    temp: str,
    fd: int,
    name: str,
    *,
    previous: os.stat_result | None,
    exclusive: bool,
    shown: str,
) -> os.stat_result:
    """Make the temporary file *temp* (open as *fd*) the file *name*, atomically.

    The content is fsynced first; the mode (and owner, where allowed) of
    *previous*, the file being replaced, is kept. A new file gets its name by a
    hard link, which never replaces anything: if *name* appeared meanwhile it is
    replaced, unless *exclusive* (ALREADY_EXISTS). The temporary file is gone
    afterwards whatever happens, and *fd* is closed. Returns the new file's ``fstat``.
    """
    try:
        if previous is not None:
            if exclusive:
                raise AlreadyExists(f"{shown} exists already", path=shown)
            os.fchmod(fd, stat.S_IMODE(previous.st_mode))
            if (previous.st_uid, previous.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, previous.st_uid, previous.st_gid)
        else:
            os.fchmod(fd, _NEW_FILE_MODE)
        os.fsync(fd)
        if previous is not None:
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            try:
                _place_noreplace(dir_fd, temp, name, shown)
            except AlreadyExists:
                if exclusive:
                    raise
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        fsync_dir(dir_fd)
        return os.fstat(fd)
    except BaseException:
        discard_temp(dir_fd, temp)
        raise
    finally:
        os.close(fd)


def write_atomic(res: Resolved, data: bytes, *, exclusive: bool, shown: str) -> os.stat_result:
    """Write *data* as the whole content of *res*, atomically (temp, fsync, rename)."""
    assert res.name is not None
    temp, fd = new_temp(res.dir_fd)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except BaseException:
        os.close(fd)
        discard_temp(res.dir_fd, temp)
        raise
    return commit_temp(res.dir_fd, temp, fd, res.name, previous=res.st, exclusive=exclusive, shown=shown)


def _place_noreplace(dir_fd: int, temp: str, name: str, shown: str) -> None:
    """Give the temporary file its final *name* unless that exists; *temp* is gone afterwards."""
    # A hard link never replaces an existing name, and shows watchers a plain "created".
    try:
        os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise AlreadyExists(f"{shown} exists already", path=shown) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A filesystem without hard links.
        _rename_noreplace(dir_fd, temp, dir_fd, name, shown)
    else:
        os.unlink(temp, dir_fd=dir_fd)


def _rename_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str, shown: str) -> None:
    try:
        rename_noreplace(src_dir_fd, src, dst_dir_fd, dst)
    except FileExistsError:
        raise AlreadyExists(f"{shown} exists already", path=shown) from None


def rename(src: Resolved, dst: Resolved, *, overwrite: bool, shown: str) -> None:
    """Rename the object *src* to *dst* (both checked); replace only with *overwrite*."""
    assert src.name is not None and dst.name is not None
    if overwrite:
        os.rename(src.name, dst.name, src_dir_fd=src.dir_fd, dst_dir_fd=dst.dir_fd)
    else:
        _rename_noreplace(src.dir_fd, src.name, dst.dir_fd, dst.name, shown)
    fsync_dir(dst.dir_fd)
    if not os.path.samestat(os.fstat(src.dir_fd), os.fstat(dst.dir_fd)):
        fsync_dir(src.dir_fd)


def make_directory(res: Resolved, shown: str) -> None:
    """Create the directory *res* (its parent exists and was checked)."""
    assert res.name is not None
    try:
        os.mkdir(res.name, dir_fd=res.dir_fd)
    except FileExistsError:
        raise AlreadyExists(f"{shown} exists already", path=shown) from None
