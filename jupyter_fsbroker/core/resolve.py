"""Race-resistant resolution of a parsed request path to the object inside its root.

Resolution has two stages. The first, lexical one is
:func:`~jupyter_fsbroker.core.paths.parse`: anything outside every root is
refused before any file is touched. The second is :func:`resolve`, here: it
walks from the root's directory descriptor one component at a time with
``O_NOFOLLOW``, resolving symbolic links itself: a link whose target stays
inside the same root is followed, any other is refused. Every step holds a
descriptor to the directory it checked, so swapping a directory for a symlink
between check and use cannot lead outside the root; the operation then works
on the parent descriptor and final name it is given (:class:`Resolved`).

The walk holds a constant number of descriptors whatever the depth
(:data:`WALK_DESCRIPTORS`): the root's, the current directory's, and a few
ancestors', in one :class:`~jupyter_fsbroker.core.descent.OpenDirs`. A parent's
descriptor is closed once the child is open; a link's ``..`` that goes back
above the ancestors still held walks down again, by name, from the deepest one
still open, through the same steps and checks, so the guarantee above holds for
every step. Created parents (``make_parents``) are walked like any directory:
only symbolic links count against :data:`MAX_SYMLINKS`, so ``parents`` works
at any depth.

A *check* callback (grants and sensitive names, supplied by the broker) is
called on the lexical path first, on the would-be path when something is
missing, and on the canonical path at the end, so no answer ever tells whether
something exists where the caller may not look. A *passage* callback (the
sensitive names) is called on every place the walk goes through and leaves
again: each symbolic link before it is read, and each directory a link's ``..``
leaves. So the rules hold for every component the resolution passed, not only
for where it ended: a link to ``.ssh/../notes.txt``, or one that follows a link
kept inside ``.ssh``, is refused as ``.ssh`` is.

A link that leads to a name that is not valid UTF-8 resolves to NOT_FOUND, as
PROTOCOL.md says of every name a request can only spell lossily.

The walk's directory descriptors are opened with the flags
:mod:`jupyter_fsbroker.core.posix` picks for the platform (``O_PATH`` on
Linux, ``O_RDONLY`` elsewhere), always with ``O_NOFOLLOW`` and
``O_DIRECTORY``. Nothing here ever opens a path by its absolute spelling.

:func:`resolve` is a small driver over the named steps of one walk
(:class:`_Walk`): ``_start``, ``_up``, ``_last``, ``_at_directory``,
``_enter``, ``_refused_open``, ``_missing_parent``, ``_follow`` and
``_finish``; each carries the comment of the threat its lines guard.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .descent import OpenDirs
from .errors import NotFound, PermissionDenied, WrongType
from .names import is_wire_safe
from .posix import DIR_WALK_FLAGS
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root, RootSet

__all__ = ["MAX_SYMLINKS", "WALK_DESCRIPTORS", "Check", "Resolved", "resolve"]

#: Symbolic links followed in one resolution before it is refused as a loop (as Linux).
MAX_SYMLINKS = 40

#: Descriptors one resolution holds at most, whatever the depth: the root's, the
#: directory being walked, a few of its ancestors (a link's ``..`` goes back to
#: them without walking again), and one being opened.
WALK_DESCRIPTORS = 5
_KEPT_ANCESTORS = WALK_DESCRIPTORS - 3
# Looks at one component that keeps changing under the walk before giving up.
_RETRIES = 8

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
    walk = _start(roots, target, check, raw if raw is not None else target.rel, passage)
    pending = walk.pending
    try:
        while True:
            if not pending:
                done = _at_directory(walk)
            else:
                comp = pending.popleft()
                if comp == "..":
                    _up(walk)
                    continue
                if pending:
                    _enter(walk, comp, make_parents)
                    continue
                done = _last(walk, comp, follow_last)
            if done is not None:
                return done
    except BaseException:
        walk.dirs.close()
        raise


@dataclass(slots=True)
class _Walk:
    """One resolution under way: where it is, what is left to walk, and what it counted."""

    root: Root
    #: The directories walked down from the root; the root's descriptor is the walk's own.
    dirs: OpenDirs
    #: The components still to walk (a link's target is put in front of them).
    pending: deque[str]
    #: The path as the request wrote it, for error data.
    shown: str
    check: Check
    passage: Check | None
    #: Symbolic links followed, against MAX_SYMLINKS.
    hops: int = 0
    #: Looks again at one component that keeps changing (created, swapped) under the walk.
    retries: int = 0


def _start(roots: RootSet, target: RootPath, check: Check, shown: str, passage: Check | None) -> _Walk:
    """Check the lexical path, then open the root: no existence answer outside a grant."""
    root = target.root
    # Before anything on disk is touched: an answer about a place the request may not use
    # (missing, not a directory) would tell what exists there.
    check(root, target.parts)
    try:
        root_fd = roots.open_fd(root)
    except KeyError:
        raise PermissionDenied("the shared folder was removed", reason="root_removed", path=shown) from None
    # The deepest level counts among the levels kept, so one more than the ancestors kept.
    dirs = OpenDirs(root_fd, keep=_KEPT_ANCESTORS + 1, flags=DIR_WALK_FLAGS, owns_base=True)
    return _Walk(root, dirs, deque(target.parts), shown, check, passage)


def _up(walk: _Walk) -> None:
    """A link's ``..``: never above the root; an ancestor no longer held is walked down again."""
    dirs = walk.dirs
    if not dirs.names:
        raise PermissionDenied(
            "a symbolic link leads out of its root", reason="escaping_symlink", path=walk.shown
        )
    if walk.passage is not None:
        # Leaving a directory through a link's "..": the walk passed through it (``.ssh/../x``).
        walk.passage(walk.root, tuple(dirs.names))
    # Walked again by name through these same steps (links re-followed, checks made again),
    # never reopened silently.
    walk.pending.extendleft(reversed(dirs.pop(rewalk=True)))


def _at_directory(walk: _Walk) -> Resolved | None:
    """The walk ended on a directory: the root itself, or one reached through a link's ``..``."""
    dirs = walk.dirs
    parts = tuple(dirs.names)
    walk.check(walk.root, parts)
    if not parts:
        return _finish(walk, (), os.fstat(dirs.fd()))
    name = parts[-1]
    redo = dirs.pop(rewalk=True)
    if redo:
        # Its parent is no longer held: walk down to it again, then look at it as the last name.
        walk.pending.extend((*redo, name))
        return None
    return _finish(walk, parts, os.stat(name, dir_fd=dirs.fd(), follow_symlinks=False))


def _last(walk: _Walk, comp: str, follow_last: bool) -> Resolved | None:
    """The final component: looked at without following; a link followed inside the root only."""
    dirs = walk.dirs
    top = dirs.fd()
    try:
        st: os.stat_result | None = os.stat(comp, dir_fd=top, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and follow_last and stat.S_ISLNK(st.st_mode):
        _follow(walk, comp, top)
        return None
    parts = (*dirs.names, comp)
    # The canonical path, checked again: a link inside the root may have led elsewhere in it.
    walk.check(walk.root, parts)
    return _finish(walk, parts, st)


def _enter(walk: _Walk, comp: str, make_parents: bool) -> None:
    """Open the next directory relative to the held one, never following a link."""
    dirs = walk.dirs
    try:
        # O_NOFOLLOW | O_DIRECTORY relative to a held descriptor: a directory swapped for a
        # link since it was looked at is never entered (the swap race).
        fd = os.open(comp, DIR_WALK_FLAGS, dir_fd=dirs.fd())
    except OSError as exc:
        _refused_open(walk, comp, exc, make_parents)
        return
    dirs.push(comp, fd)
    walk.retries = 0


def _refused_open(walk: _Walk, comp: str, exc: OSError, make_parents: bool) -> None:
    """Why *comp* could not be entered: a link, a directory swapped in, a missing parent, or an error.

    Called while *exc* is being handled; returns when the walk goes on.
    """
    dirs = walk.dirs
    top = dirs.fd()
    code = exc.errno
    if code in (errno.ELOOP, errno.ENOTDIR):
        try:
            st = os.stat(comp, dir_fd=top, follow_symlinks=False)
        except FileNotFoundError:
            code = errno.ENOENT
        else:
            if stat.S_ISLNK(st.st_mode):
                # Counted against MAX_SYMLINKS, and its target walked through these same steps.
                _follow(walk, comp, top)
                return
            if stat.S_ISDIR(st.st_mode):
                _again(walk, comp)  # replaced by a directory since the open: look again
                return
            # After the check, so that the answer says nothing where the caller may not look.
            walk.check(walk.root, (*dirs.names, comp, *walk.pending))
            raise WrongType(
                f"{walk.shown}: a component is not a directory", reason="not_a_directory", path=walk.shown
            ) from None
    # The would-be path is checked before saying that something is missing.
    walk.check(walk.root, (*dirs.names, comp, *walk.pending))
    if code == errno.ENOENT:
        _missing_parent(walk, comp, make_parents)
        return
    if code in (errno.EACCES, errno.EPERM):
        raise PermissionDenied(
            "the operating system refused access", reason="os_permission", path=walk.shown
        ) from None
    raise exc


def _missing_parent(walk: _Walk, comp: str, make_parents: bool) -> None:
    """A missing intermediate directory: NOT_FOUND, or created (``parents``) and looked at again."""
    shown = walk.shown
    if not make_parents:
        raise NotFound(
            f"{shown}: a parent directory does not exist", reason="no_parent", path=shown
        ) from None
    if not all(is_wire_safe(n) for n in walk.dirs.names):
        # Reached through a link into a name no request can spell: create nothing there.
        raise NotFound(
            f"{shown} leads to a name that is not valid UTF-8", reason="undecodable_name", path=shown
        ) from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(comp, dir_fd=walk.dirs.fd())
    # Entered like any directory, through the same open (a link put there meanwhile is refused).
    _again(walk, comp)


def _again(walk: _Walk, comp: str) -> None:
    """Look at *comp* once more; bounded, so that a component changing forever ends the walk."""
    walk.retries += 1
    if walk.retries > _RETRIES:
        raise PermissionDenied(
            "too many symbolic links or changes on the way", reason="symlink_loop", path=walk.shown
        )
    walk.pending.appendleft(comp)


def _follow(walk: _Walk, comp: str, top: int) -> None:
    """Replace the symlink *comp* in the walk by its target: inside the root only, counted."""
    walk.hops += 1
    if walk.hops > MAX_SYMLINKS:
        raise PermissionDenied(
            "too many symbolic links or changes on the way", reason="symlink_loop", path=walk.shown
        )
    if walk.passage is not None:
        # The link's own place is passed through before it is read (a link kept inside ``.ssh``).
        walk.passage(walk.root, (*walk.dirs.names, comp))
    try:
        link = os.readlink(comp, dir_fd=top)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            # No longer a symlink (or gone): look again.
            walk.pending.appendleft(comp)
            return
        raise
    segments = [s for s in link.split("/") if s not in ("", ".")]
    if link.startswith("/"):
        # An absolute target is followed only when it names a place inside this root, and is
        # then walked from the root's descriptor, never opened by its absolute spelling.
        root = walk.root
        for prefix in (root.parts, root.given_parts):
            if tuple(segments[: len(prefix)]) == prefix:
                segments = segments[len(prefix) :]
                break
        else:
            raise PermissionDenied(
                "a symbolic link leads out of its root", reason="escaping_symlink", path=walk.shown
            )
        walk.dirs.to_base()
    walk.pending.extendleft(reversed(segments))


def _finish(walk: _Walk, parts: tuple[str, ...], st: os.stat_result | None) -> Resolved:
    """The object reached: special files refused, undecodable names not found, the descriptor handed over."""
    shown = walk.shown
    if st is not None and _is_special(st.st_mode):
        raise PermissionDenied(
            "special files (pipes, sockets, devices) are not served", reason="special_file", path=shown
        )
    if not all(is_wire_safe(p) for p in parts):
        # Reached through a link: a name no request can spell, so none can name it (PROTOCOL.md).
        raise NotFound(
            f"{shown} leads to a name that is not valid UTF-8", reason="undecodable_name", path=shown
        )
    return Resolved(RootPath(walk.root, parts), walk.dirs.take_deepest(), st)


def _is_special(mode: int) -> bool:
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
