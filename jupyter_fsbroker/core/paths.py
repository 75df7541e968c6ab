"""Race-resistant resolution of request paths to objects inside a root.

Resolution has two stages.

1. :func:`parse` is lexical and touches no file: it accepts the three path
   forms of PROTOCOL.md (root-relative, absolute, ``file://`` URI), picks the
   root, and collapses ``.`` and ``..``. Anything outside every root is refused
   here, before any existence check, so the answer reveals nothing about the
   outside.
2. :func:`resolve` walks from the root's directory descriptor one component at
   a time with ``O_NOFOLLOW``, resolving symbolic links itself: a link whose
   target stays inside the same root is followed, any other is refused. Every
   step holds a descriptor to the directory it checked, so swapping a directory
   for a symlink between check and use cannot lead outside the root; the
   operation then works on the parent descriptor and final name it is given.

A *check* callback (grants and sensitive names, supplied by the broker) is
called on the lexical path first, on the would-be path when something is
missing, and on the canonical path at the end, so no answer ever tells whether
something exists where the caller may not look.

The walk's directory descriptors are opened with the flags
:mod:`jupyter_fsbroker.core.posix` picks for the platform (``O_PATH`` on
Linux, ``O_RDONLY`` elsewhere), always with ``O_NOFOLLOW`` and
``O_DIRECTORY``. Nothing here ever opens a path by its absolute spelling.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes, urlsplit

from .errors import InvalidParams, NotFound, PermissionDenied, WrongType
from .posix import DIR_WALK_FLAGS
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root, RootSet

__all__ = ["MAX_SYMLINKS", "Check", "Resolved", "parse", "resolve"]

#: Symbolic links followed in one resolution before it is refused as a loop (as Linux).
MAX_SYMLINKS = 40

_URI_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?P<rest>.*)$", re.DOTALL)

#: ``check(root, parts)`` raises :class:`PermissionDenied` when the root-relative
#: path *parts* may not be used by the current request.
Check = Callable[[Root, tuple[str, ...]], None]


@dataclass
class Resolved(Closeable):
    """A checked object inside a root, held by descriptor.

    ``location`` is its canonical path (symbolic links inside the root
    resolved). ``dir_fd`` is a descriptor of the directory that holds the
    object (see :data:`~jupyter_fsbroker.core.posix.DIR_WALK_FLAGS`) and
    :attr:`name` its final component; for the root itself ``name`` is ``None``
    and ``dir_fd`` is the root's own descriptor. ``st`` is the ``lstat`` result
    of the object, ``None`` when it does not exist (yet). The owner must
    :meth:`close` it.
    """

    location: RootPath
    dir_fd: int
    st: os.stat_result | None
    _closed: bool = field(default=False, repr=False)

    @property
    def root(self) -> Root:
        """The root the object is in."""
        return self.location.root

    @property
    def name(self) -> str | None:
        """The object's name in the directory ``dir_fd``; ``None`` for the root itself."""
        return self.location.name

    @property
    def rel(self) -> str:
        """The canonical root-relative path, as results and messages show it."""
        return self.location.rel

    def refresh(self, *, allow_link: bool = False) -> os.stat_result | None:
        """Look at the final object again (``lstat``); a symlink swapped in is refused.

        With *allow_link* (delete, rename) a symbolic link is the object itself.
        """
        if self.name is None:
            self.st = os.fstat(self.dir_fd)
            return self.st
        try:
            st = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and ((stat.S_ISLNK(st.st_mode) and not allow_link) or _is_special(st.st_mode)):
            rel = self.location.rel
            raise PermissionDenied(
                f"{rel} changed into a link or special file", reason="symlink_race", path=rel
            )
        self.st = st
        return st

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.dir_fd)


def parse(raw: str, roots: RootSet) -> RootPath:
    """Turn a request path into a root and clean components, touching no file.

    Raises
    ------
    PermissionDenied
        Foreign URI schemes or hosts, NUL bytes, paths outside every root,
        ``..`` above a root, no roots at all.
    InvalidParams
        An empty path.
    """
    if raw == "":
        raise InvalidParams("the path is empty", reason="empty_path", path=raw)
    if "\x00" in raw:
        raise PermissionDenied("the path contains a NUL byte", reason="nul_byte", path=raw)
    available = roots.snapshot()
    if not available:
        raise PermissionDenied("no folders are shared with this server", reason="no_roots", path=raw)

    uri = _URI_RE.match(raw)
    if uri is not None and (uri["rest"].startswith("//") or uri["scheme"].lower() == "file"):
        return _parse_absolute(_uri_to_path(raw), available, raw)
    if raw.startswith("/"):
        return _parse_absolute(raw, available, raw)

    segments = [s for s in raw.split("/") if s not in ("", ".")]
    if not segments:
        raise PermissionDenied("the path names no root", reason="outside_roots", path=raw)
    by_name = {r.name: r for r in available}
    root = by_name.get(segments[0])
    if root is not None:
        rest = segments[1:]
    elif len(available) == 1:
        root, rest = available[0], segments
    else:
        raise PermissionDenied("the path is outside every shared folder", reason="outside_roots", path=raw)
    return RootPath(root, _collapse(rest, raw))


def _uri_to_path(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme.lower() != "file":
        raise PermissionDenied(
            f"only file:// URIs are accepted, not {parts.scheme}:", reason="unsupported_scheme", path=raw
        )
    if parts.netloc.lower() not in ("", "localhost"):
        raise PermissionDenied("file:// URIs must name this machine", reason="foreign_host", path=raw)
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise PermissionDenied(
            "file:// URIs may not carry a query or fragment", reason="invalid_uri", path=raw
        )
    try:
        path = unquote_to_bytes(parts.path).decode("utf-8")
    except UnicodeDecodeError:
        raise PermissionDenied("the URI does not decode to UTF-8", reason="invalid_uri", path=raw) from None
    if "\x00" in path:
        raise PermissionDenied("the path contains a NUL byte", reason="nul_byte", path=raw)
    if not path.startswith("/"):
        raise PermissionDenied("file:// URIs must be absolute", reason="invalid_uri", path=raw)
    return path


def _parse_absolute(path: str, available: tuple[Root, ...], raw: str) -> RootPath:
    segments = tuple(s for s in path.split("/") if s not in ("", "."))
    best: tuple[int, Root] | None = None
    for root in available:
        for prefix in (root.parts, root.given_parts):
            n = len(prefix)
            if segments[:n] == prefix and (best is None or n > best[0]):
                best = (n, root)
    if best is None:
        raise PermissionDenied("the path is outside every shared folder", reason="outside_roots", path=raw)
    n, root = best
    return RootPath(root, _collapse(segments[n:], raw))


def _collapse(segments: list[str] | tuple[str, ...], raw: str) -> tuple[str, ...]:
    out: list[str] = []
    for s in segments:
        if s in ("", "."):
            continue
        if s == "..":
            if not out:
                raise PermissionDenied("the path climbs out of its root", reason="traversal", path=raw)
            out.pop()
        else:
            out.append(s)
    return tuple(out)


def resolve(
    roots: RootSet,
    target: RootPath,
    *,
    check: Check,
    follow_last: bool = True,
    make_parents: bool = False,
    raw: str | None = None,
) -> Resolved:
    """Walk to *target* from its root's descriptor and return the checked object.

    Parameters
    ----------
    roots
        The root set (to get a descriptor of the target's root).
    target
        The parsed path.
    check
        Raises :class:`PermissionDenied` for paths the request may not use.
    follow_last
        Follow a symbolic link in the final component (reads, writes). When
        false (delete, rename) the link itself is the object.
    make_parents
        Create missing intermediate directories, one checked component at a time.
    raw
        The path as the request wrote it, for error data.

    Raises
    ------
    PermissionDenied
        The check refused, a symlink escapes the root, a loop, a special file.
    NotFound
        An intermediate directory is missing (and may be seen).
    WrongType
        An intermediate component is not a directory.
    """
    shown = raw if raw is not None else target.rel
    root = target.root
    check(root, target.parts)
    try:
        root_fd = roots.open_fd(root)
    except KeyError:
        raise PermissionDenied("the shared folder was removed", reason="root_removed", path=shown) from None

    stack = [root_fd]
    names: list[str] = []
    pending = deque(target.parts)
    hops = 0

    def finish(parts: tuple[str, ...], st: os.stat_result | None) -> Resolved:
        if st is not None and _is_special(st.st_mode):
            raise PermissionDenied(
                "special files (pipes, sockets, devices) are not served", reason="special_file", path=shown
            )
        dir_fd = stack.pop()
        for fd in stack:
            os.close(fd)
        stack.clear()
        return Resolved(RootPath(root, parts), dir_fd, st)

    try:
        while pending:
            comp = pending.popleft()
            if comp == "..":
                if not names:
                    raise PermissionDenied(
                        "a symbolic link leads out of its root", reason="escaping_symlink", path=shown
                    )
                os.close(stack.pop())
                names.pop()
                continue
            top = stack[-1]
            if not pending:
                try:
                    st: os.stat_result | None = os.stat(comp, dir_fd=top, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and follow_last and stat.S_ISLNK(st.st_mode):
                    hops = _follow(root, comp, top, pending, stack, names, hops, shown)
                    continue
                parts = (*names, comp)
                check(root, parts)
                return finish(parts, st)
            try:
                fd = os.open(comp, DIR_WALK_FLAGS, dir_fd=top)
            except OSError as exc:
                code = exc.errno
                if code in (errno.ELOOP, errno.ENOTDIR):
                    try:
                        st = os.stat(comp, dir_fd=top, follow_symlinks=False)
                    except FileNotFoundError:
                        code = errno.ENOENT
                    else:
                        if stat.S_ISLNK(st.st_mode):
                            hops = _follow(root, comp, top, pending, stack, names, hops, shown)
                            continue
                        if stat.S_ISDIR(st.st_mode):
                            # Replaced by a directory since the open: look again.
                            pending.appendleft(comp)
                            hops = _count_hop(hops, shown)
                            continue
                        check(root, (*names, comp, *pending))
                        raise WrongType(
                            f"{shown}: a component is not a directory", reason="not_a_directory", path=shown
                        ) from None
                check(root, (*names, comp, *pending))
                if code == errno.ENOENT:
                    if not make_parents:
                        raise NotFound(
                            f"{shown}: a parent directory does not exist", reason="no_parent", path=shown
                        ) from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(comp, dir_fd=top)
                    pending.appendleft(comp)
                    hops = _count_hop(hops, shown)
                    continue
                if code in (errno.EACCES, errno.EPERM):
                    raise PermissionDenied(
                        "the operating system refused access", reason="os_permission", path=shown
                    ) from None
                raise
            stack.append(fd)
            names.append(comp)

        # The walk ended on a directory: the root itself, or one reached through a link's "..".
        parts = tuple(names)
        check(root, parts)
        if not names:
            return finish((), os.fstat(stack[0]))
        os.close(stack.pop())
        name = names[-1]
        return finish(parts, os.stat(name, dir_fd=stack[-1], follow_symlinks=False))
    except BaseException:
        for fd in stack:
            os.close(fd)
        raise


def _count_hop(hops: int, shown: str) -> int:
    hops += 1
    if hops > MAX_SYMLINKS:
        raise PermissionDenied(
            "too many symbolic links or changes on the way", reason="symlink_loop", path=shown
        )
    return hops


def _follow(
    root: Root,
    comp: str,
    top: int,
    pending: deque[str],
    stack: list[int],
    names: list[str],
    hops: int,
    shown: str,
) -> int:
    """Replace the symlink *comp* in the walk by its target; return the new hop count."""
    hops = _count_hop(hops, shown)
    try:
        link = os.readlink(comp, dir_fd=top)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            # No longer a symlink (or gone): look again.
            pending.appendleft(comp)
            return hops
        raise
    segments = [s for s in link.split("/") if s not in ("", ".")]
    if link.startswith("/"):
        for prefix in (root.parts, root.given_parts):
            if tuple(segments[: len(prefix)]) == prefix:
                segments = segments[len(prefix) :]
                break
        else:
            raise PermissionDenied(
                "a symbolic link leads out of its root", reason="escaping_symlink", path=shown
            )
        while len(stack) > 1:
            os.close(stack.pop())
            names.pop()
    pending.extendleft(reversed(segments))
    return hops


def _is_special(mode: int) -> bool:
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
