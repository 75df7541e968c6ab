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

   The walk holds a constant number of descriptors whatever the depth
   (:data:`WALK_DESCRIPTORS`): the root's, the current directory's, and a few
   ancestors'. A parent's descriptor is closed once the child is open; a
   link's ``..`` that goes back above the ancestors still held walks down
   again, by name, from the deepest one still open, with the same checks, so
   the guarantee above holds for every step. Created parents (``make_parents``)
   are walked like any directory: only symbolic links count against
   :data:`MAX_SYMLINKS`, so ``parents`` works at any depth.

A *check* callback (grants and sensitive names, supplied by the broker) is
called on the lexical path first, on the would-be path when something is
missing, and on the canonical path at the end, so no answer ever tells whether
something exists where the caller may not look. A *passage* callback (the
sensitive names) is called on every place the walk goes through and leaves
again: each symbolic link before it is read, and each directory a link's ``..``
leaves. So the rules hold for every component the resolution passed, not only
for where it ended: a link to ``.ssh/../notes.txt``, or one that follows a link
kept inside ``.ssh``, is refused as ``.ssh`` is.

A request path holding a lone surrogate is refused by :func:`parse` (it could
only name a file whose name is not valid UTF-8, and create one); a link that
leads to such a name resolves to NOT_FOUND, as PROTOCOL.md says of every name
a request can only spell lossily.

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
from .names import is_wire_safe, readable
from .posix import DIR_WALK_FLAGS
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root, RootSet

__all__ = ["MAX_SYMLINKS", "WALK_DESCRIPTORS", "Check", "Resolved", "parse", "resolve"]

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
        An empty path, or one holding a lone surrogate.
    """
    if raw == "":
        raise InvalidParams("the path is empty", reason="empty_path", path=raw)
    if not is_wire_safe(raw):
        raise InvalidParams(
            "the path holds a lone surrogate, which names no character",
            reason="lone_surrogate",
            path=readable(raw),
        )
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
    passage: Check | None = None,
) -> Resolved:
    """Walk to *target* from its root's descriptor and return the checked object.

    The walk holds at most :data:`WALK_DESCRIPTORS` descriptors at any moment,
    whatever the depth of *target*.

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
        Create missing intermediate directories, one checked component at a
        time, at any depth (they are not symbolic links, so they count against
        no limit of :data:`MAX_SYMLINKS`).
    raw
        The path as the request wrote it, for error data.
    passage
        Raises :class:`PermissionDenied` for a place the walk may not pass
        through: called with each symbolic link's own path before it is read,
        and with each directory's path before a link's ``..`` leaves it.

    Raises
    ------
    PermissionDenied
        The check refused, a symlink escapes the root, a loop, a special file.
    NotFound
        An intermediate directory is missing (and may be seen), or the path
        leads to a name that is not valid UTF-8 (which no request can spell).
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

    walk = _Descent(root_fd)
    pending = deque(target.parts)
    hops = 0
    retries = 0  # looks again at one component that keeps changing (created, swapped) under the walk

    def finish(parts: tuple[str, ...], st: os.stat_result | None) -> Resolved:
        if st is not None and _is_special(st.st_mode):
            raise PermissionDenied(
                "special files (pipes, sockets, devices) are not served", reason="special_file", path=shown
            )
        if not all(is_wire_safe(p) for p in parts):
            # Reached through a link: a name no request can spell, so none can name it (PROTOCOL.md).
            raise NotFound(
                f"{shown} leads to a name that is not valid UTF-8", reason="undecodable_name", path=shown
            )
        return Resolved(RootPath(root, parts), walk.take_top(), st)

    def again(comp: str) -> None:
        nonlocal retries
        retries += 1
        if retries > _RETRIES:
            raise PermissionDenied(
                "too many symbolic links or changes on the way", reason="symlink_loop", path=shown
            )
        pending.appendleft(comp)

    try:
        while True:
            if not pending:
                # The walk ended on a directory: the root itself, or one reached through a link's "..".
                parts = tuple(walk.names)
                check(root, parts)
                if not parts:
                    return finish((), os.fstat(walk.top))
                name = parts[-1]
                redo = walk.leave()
                if redo:
                    pending.extend((*redo, name))
                    continue
                return finish(parts, os.stat(name, dir_fd=walk.top, follow_symlinks=False))
            comp = pending.popleft()
            if comp == "..":
                if not walk.names:
                    raise PermissionDenied(
                        "a symbolic link leads out of its root", reason="escaping_symlink", path=shown
                    )
                if passage is not None:
                    passage(root, tuple(walk.names))
                pending.extendleft(reversed(walk.leave()))
                continue
            top = walk.top
            if not pending:
                try:
                    st: os.stat_result | None = os.stat(comp, dir_fd=top, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and follow_last and stat.S_ISLNK(st.st_mode):
                    hops = _follow(root, comp, top, pending, walk, hops, shown, passage)
                    continue
                parts = (*walk.names, comp)
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
                            hops = _follow(root, comp, top, pending, walk, hops, shown, passage)
                            continue
                        if stat.S_ISDIR(st.st_mode):
                            again(comp)  # replaced by a directory since the open: look again
                            continue
                        check(root, (*walk.names, comp, *pending))
                        raise WrongType(
                            f"{shown}: a component is not a directory", reason="not_a_directory", path=shown
                        ) from None
                check(root, (*walk.names, comp, *pending))
                if code == errno.ENOENT:
                    if not make_parents:
                        raise NotFound(
                            f"{shown}: a parent directory does not exist", reason="no_parent", path=shown
                        ) from None
                    if not all(is_wire_safe(n) for n in walk.names):
                        # Reached through a link into a name no request can spell: create nothing there.
                        raise NotFound(
                            f"{shown} leads to a name that is not valid UTF-8",
                            reason="undecodable_name",
                            path=shown,
                        ) from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(comp, dir_fd=top)
                    again(comp)
                    continue
                if code in (errno.EACCES, errno.EPERM):
                    raise PermissionDenied(
                        "the operating system refused access", reason="os_permission", path=shown
                    ) from None
                raise
            walk.enter(comp, fd)
            retries = 0
    except BaseException:
        walk.close()
        raise


#: Descriptors one resolution holds at most, whatever the depth: the root's, the
#: directory being walked, a few of its ancestors (a link's ``..`` goes back to
#: them without walking again), and one being opened.
WALK_DESCRIPTORS = 5
_KEPT_ANCESTORS = WALK_DESCRIPTORS - 3
# Looks at one component that keeps changing under the walk before giving up.
_RETRIES = 8


class _Descent:
    """The directories a resolution has walked down from its root, and the few descriptors it holds.

    ``names`` are the directories below the root, in order; ``fds[i]`` is
    the descriptor of the directory reached after ``names[:i]`` (``fds[0]``
    is the root's), or ``None`` once closed to bound the descriptors held.
    The root's and the current directory's (``top``) are always open; of the
    others, only the deepest few. Going back up (a link's ``..``) to an
    ancestor whose descriptor was closed walks down again, by name, from the
    deepest one still open: the walk goes the same way and is checked the same
    way, from a descriptor it holds, never by an absolute path.
    """

    __slots__ = ("fds", "names")

    def __init__(self, root_fd: int) -> None:
        self.names: list[str] = []
        self.fds: list[int | None] = [root_fd]

    @property
    def top(self) -> int:
        """The descriptor of the directory the walk is in."""
        fd = self.fds[-1]
        assert fd is not None
        return fd

    def enter(self, name: str, fd: int) -> None:
        """Go down into *name*, open as *fd* (now owned by the walk)."""
        self.names.append(name)
        self.fds.append(fd)
        kept = [i for i in range(1, len(self.fds) - 1) if self.fds[i] is not None]
        for level in kept[: max(0, len(kept) - _KEPT_ANCESTORS)]:
            os.close(self.fds[level])  # type: ignore[arg-type]
            self.fds[level] = None

    def leave(self) -> list[str]:
        """Go up one level; return the names to walk down again if that directory's descriptor was closed."""
        fd = self.fds.pop()
        self.names.pop()
        if fd is not None:
            os.close(fd)
        if self.fds[-1] is not None:
            return []
        deepest = max(i for i, fd in enumerate(self.fds) if fd is not None)
        redo = self.names[deepest:]
        del self.names[deepest:]
        del self.fds[deepest + 1 :]
        return redo

    def to_root(self) -> None:
        """Go back to the root (an absolute link inside it)."""
        for fd in self.fds[1:]:
            if fd is not None:
                os.close(fd)
        del self.fds[1:]
        self.names.clear()

    def take_top(self) -> int:
        """Hand the current directory's descriptor over to the caller; close every other."""
        top = self.fds.pop()
        assert top is not None
        self.close()
        return top

    def close(self) -> None:
        """Close every descriptor still held."""
        for fd in self.fds:
            if fd is not None:
                os.close(fd)
        self.fds.clear()


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
    walk: _Descent,
    hops: int,
    shown: str,
    passage: Check | None,
) -> int:
    """Replace the symlink *comp* in the walk by its target; return the new hop count."""
    hops = _count_hop(hops, shown)
    if passage is not None:
        passage(root, (*walk.names, comp))
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
        walk.to_root()
    pending.extendleft(reversed(segments))
    return hops


def _is_special(mode: int) -> bool:
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
