"""Listings of ``files/list``: a depth-first walk in name order, resumed from a cursor without re-reading.

**Order.** Depth first, the entries of each directory sorted by name (code
point order of the names as Python spells them, an undecodable byte as its
surrogate U+DC80..U+DCFF), a directory's descendants right after it: the
ascending order of the entries' component tuples. It is stable across pages and
across a re-read, which is what makes a position resumable.

**Where a listing stands.** A :class:`Walk` is the position of one listing: a
stack of frames, one per directory from the listed one down to the entry to
send next, each holding the directory's visible names (read once, sorted) and
how far they were sent. A page continues from the stack: no directory is read
twice, so the last page of a big folder costs what the first one did.

**What a walk holds.** Between two pages nothing but names: no descriptor, so
a listing waiting for its next page pins no directory and no descriptor slot.
During a page, each frame's directory is opened from its parent's descriptor
with ``O_NOFOLLOW | O_DIRECTORY`` (a directory swapped for a link is never
entered; its subtree is left out), and at most :data:`OPEN_DIRS` of them stay
open whatever the depth: a frame whose descriptor was closed is reopened the
same way, from the nearest open ancestor, when the walk comes back to it
(:class:`~jupyter_fsbroker.core.descent.OpenDirs`). The listed directory's own
descriptor is the handler's, checked and resolved anew for each page. Nothing
here opens a path by its absolute spelling.

**Filters.** The broker's temporary files and, unless asked for, hidden names
are left out when a directory is read; sensitive names when an entry is about
to be sent (one pattern match on the name when its directory is not sensitive
itself, then the full check of the path and the connection's grants if the
name could complete a pattern). A symbolic link is listed as a link (its own
type, size and time, never its target's) unless it leads to a sensitive path
in its root: then it is left out as that path would be (``accept_link``), as
following it is refused as that path is.

**Names JSON cannot carry** are sent readable (each undecodable byte as U+FFFD)
with ``"undecodableName": true``, as is every entry below such a directory.

Cursors and the walks they resume are :mod:`jupyter_fsbroker.core.cursors`'
business.
"""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ..wire.timestamps import iso_utc_ns
from .descent import OpenDirs
from .names import is_wire_safe, readable, readable_parts
from .posix import DIR_READ_FLAGS
from .rootpath import RootPath
from .sensitive import SensitiveNames
from .tempfiles import is_temp_name

__all__ = ["OPEN_DIRS", "Accept", "Walk"]

#: The most directory descriptors one walk holds open during a page (besides the listed directory's).
OPEN_DIRS = 8

#: ``accept(location)``: whether a sensitive entry (or a link) may be listed (the connection's grants say so).
Accept = Callable[[RootPath], bool]

_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "directory", stat.S_IFLNK: "symlink"}


@dataclass(eq=False)
class _Frame:
    """One directory on the walk's stack."""

    parts: tuple[str, ...]  # its components below the root, as on disk
    names: list[str]  # its visible names, sorted
    index: int = 0  # the next name to look at
    sensitive: bool = False  # its own path is sensitive: so is every entry (set per page)


class Walk:
    """The position of one listing of a directory, page after page.

    Parameters
    ----------
    location
        The listed directory (canonical, as resolved).
    recursive
        Descend into subdirectories (never into symbolic links).
    include_hidden
        List names starting with ``.`` too.
    after
        Resume after this entry (its components below the root): every entry
        up to it counts as sent. ``None`` starts at the beginning.
    """

    def __init__(
        self,
        location: RootPath,
        *,
        recursive: bool,
        include_hidden: bool,
        after: tuple[str, ...] | None = None,
    ) -> None:
        self.location = location
        self.recursive = recursive
        self.include_hidden = include_hidden
        #: The last entry sent (its components below the root); ``None`` before the first.
        self.last = after
        self._frames: list[_Frame] | None = None
        self._identity: tuple[int, int] | None = None

    # -- a page ----------------------------------------------------------------------------------

    def page(
        self, dir_fd: int, limit: int, *, sensitive: SensitiveNames, accept: Accept, accept_link: Accept
    ) -> tuple[list[dict[str, object]], bool]:
        """The next *limit* entries at most, and whether more remain.

        Parameters
        ----------
        dir_fd
            A readable descriptor of the listed directory, resolved and checked
            for this page; the caller keeps and closes it.
        limit
            The most entries to return (at least 1).
        sensitive
            The sensitive names in force.
        accept
            Whether a sensitive entry may be listed all the same.
        accept_link
            Whether a symbolic link may be listed (it leads to nothing the
            connection may not see).

        Raises
        ------
        OSError
            A directory could not be read.
        """
        st = os.fstat(dir_fd)
        identity = (st.st_dev, st.st_ino)
        if identity != self._identity:
            # A fresh walk, or the listed directory was replaced since the last page: start
            # again from the last entry sent, reading the directories on the way to it.
            self._frames = None
            self._identity = identity
        with OpenDirs(dir_fd, keep=OPEN_DIRS) as dirs:
            try:
                if self._frames is None:
                    self._frames = self._restore(dirs, sensitive)
                else:
                    for frame in self._frames[1:]:
                        dirs.push(frame.parts[-1])  # opened again when the walk needs it
                for frame in self._frames:
                    frame.sensitive = sensitive.matches(frame.parts)
                entries: list[dict[str, object]] = []
                more = self._fill(dirs, entries, limit, sensitive, accept, accept_link)
            except BaseException:
                self._frames = None  # resumed from ``last`` if ever used again
                raise
        return entries, more

    def _fill(
        self,
        dirs: OpenDirs,
        out: list[dict[str, object]],
        limit: int,
        sensitive: SensitiveNames,
        accept: Accept,
        accept_link: Accept,
    ) -> bool:
        """Append entries to *out* up to *limit*; whether another entry follows them."""
        frames = self._frames
        assert frames is not None
        recursive = self.recursive
        root = self.location.root
        could_be_sensitive = sensitive.could_match
        lstat = os.stat
        kinds = _KINDS
        last: tuple[tuple[str, ...], str] | None = None
        try:
            while frames:
                frame = frames[-1]
                names = frame.names
                if frame.index >= len(names):
                    self._pop(dirs)
                    continue
                try:
                    fd = dirs.fd()
                except OSError:  # the directory is gone, or was swapped for a link
                    self._pop(dirs)
                    continue
                parts = frame.parts
                shown, lossy = readable_parts(parts)
                prefix = "/".join((root.name, *shown)) + "/"
                check_all = frame.sensitive
                index = frame.index
                count = len(names)
                while index < count:
                    name = names[index]
                    index += 1
                    if (check_all or could_be_sensitive(name)) and not accept(RootPath(root, (*parts, name))):
                        continue
                    try:
                        st = lstat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since the directory was read
                    if stat.S_ISLNK(st.st_mode) and not accept_link(RootPath(root, (*parts, name))):
                        continue
                    if len(out) == limit:
                        frame.index = index - 1  # one more entry exists: it opens the next page
                        return True
                    kind = kinds.get(stat.S_IFMT(st.st_mode), "other")
                    seen = name if name.isascii() or is_wire_safe(name) else readable(name)
                    entry: dict[str, object] = {
                        "name": seen,
                        "path": prefix + seen,
                        "type": kind,
                        "size": st.st_size if kind == "file" else 0,
                        "mtime": iso_utc_ns(st.st_mtime_ns),
                    }
                    if lossy or seen is not name:
                        entry["undecodableName"] = True
                    out.append(entry)
                    last = (parts, name)
                    if recursive and kind == "directory":
                        frame.index = index
                        self._push(dirs, frame, name, sensitive)
                        break
                else:
                    frame.index = index
            return False
        finally:
            if last is not None:
                self.last = (*last[0], last[1])

    # -- frames ----------------------------------------------------------------------------------

    def _scan(self, fd: int, parts: tuple[str, ...]) -> _Frame:
        """Read the directory open as *fd* once: its visible names, sorted."""
        hidden = self.include_hidden
        with os.scandir(fd) as it:
            names = [
                e.name for e in it if (hidden or not e.name.startswith(".")) and not is_temp_name(e.name)
            ]
        names.sort()
        return _Frame(parts, names)

    def _push(self, dirs: OpenDirs, parent: _Frame, name: str, sensitive: SensitiveNames) -> bool:
        """Descend into the directory *name* of *parent*; whether it still is one (else it is left out)."""
        try:
            fd = os.open(name, DIR_READ_FLAGS, dir_fd=dirs.fd())
        except OSError:
            return False  # swapped for a link, removed, or not readable: never descend
        try:
            frame = self._scan(fd, (*parent.parts, name))
        except BaseException:
            os.close(fd)
            raise
        frame.sensitive = parent.sensitive or sensitive.matches(frame.parts)
        assert self._frames is not None
        self._frames.append(frame)
        dirs.push(name, fd)
        return True

    def _pop(self, dirs: OpenDirs) -> None:
        assert self._frames is not None
        self._frames.pop()
        if dirs.names:  # the listed directory is the caller's
            dirs.pop()

    def _restore(self, dirs: OpenDirs, sensitive: SensitiveNames) -> list[_Frame]:
        """The frames of a walk positioned right after :attr:`last`, read from disk."""
        base = self.location.parts
        self._frames = frames = [self._scan(dirs.fd(), base)]
        frames[0].sensitive = sensitive.matches(base)
        after = self.last
        if after is None:
            return frames
        level = len(base)
        while True:
            frame = frames[-1]
            component = after[level]
            names = frame.names
            frame.index = bisect.bisect_right(names, component)
            present = frame.index > 0 and names[frame.index - 1] == component
            if not self.recursive or level + 1 >= len(after) or not present:
                return frames
            # The last entry sent lies below *component*: its subtree is being listed.
            try:
                if not self._push(dirs, frame, component, sensitive):
                    return frames  # gone or no longer a directory: its subtree is over
            except OSError:
                return frames
            level += 1
