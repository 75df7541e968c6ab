"""Directories walked down by name, holding a bounded number of descriptors whatever the depth.

An :class:`OpenDirs` is a chain of directories below a base descriptor: level 0
is the base, level *i* the directory named ``names[i - 1]`` inside level
*i - 1*. Every walk of the core keeps its place in one: the resolution of a
request path (:mod:`jupyter_fsbroker.core.resolve`) and the walks over trees
(listings, tree removal, copies into the trash, tree sizes), so that a tree
thousands of levels deep costs a few descriptors, not one per level: at most
``keep`` levels hold an open descriptor besides the base; opening a deeper one
closes the shallowest others. A tree walk coming back to a level whose
descriptor was closed opens it again, by name from the nearest open ancestor;
a resolution instead gets the names back (``pop(rewalk=True)``) and walks them
again through its own checks, because a walk by name must follow links and
check grants as the first one did.

The base is the caller's descriptor, never closed here, unless the chain owns
it (``owns_base``: a resolution opens its root's descriptor for itself and
hands its deepest one over at the end, :meth:`OpenDirs.take_deepest`).

Every open here is relative to a held descriptor, with ``O_NOFOLLOW |
O_DIRECTORY``: a directory swapped for a symbolic link meanwhile is never
entered (the reopening fails with an :class:`OSError`, which the walk treats
as the directory being gone), and nothing is ever opened by an absolute path.
"""

from __future__ import annotations

import os

from .posix import DIR_READ_FLAGS
from .resource import Closeable

__all__ = ["KEEP", "OpenDirs"]

#: Levels of a walk that keep an open descriptor, besides the base.
KEEP = 8


class OpenDirs(Closeable):
    """A chain of directories below *base_fd*, at most *keep* of them open at once.

    Parameters
    ----------
    base_fd
        The descriptor the chain starts from.
    keep
        How many levels below the base hold an open descriptor at most (the
        deepest among them).
    flags
        How a level is opened again from its parent (``O_NOFOLLOW`` and
        ``O_DIRECTORY`` are always among them).
    owns_base
        Whether *base_fd* is the chain's to close (with :meth:`close`), or the
        caller's (the default).
    """

    __slots__ = ("_fds", "_flags", "_keep", "_owns_base", "names")

    def __init__(
        self, base_fd: int, *, keep: int = KEEP, flags: int = DIR_READ_FLAGS, owns_base: bool = False
    ) -> None:
        if keep < 1:
            raise ValueError("keep at least one level open")
        self._fds: list[int | None] = [base_fd]
        self._keep = keep
        self._owns_base = owns_base
        self._flags = flags | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
        #: The names of the levels below the base, outermost first.
        self.names: list[str] = []

    def __len__(self) -> int:
        """The levels below the base."""
        return len(self.names)

    def push(self, name: str, fd: int | None = None) -> None:
        """Go down into *name*: open as *fd* (now owned here), or ``None`` to open it when needed."""
        self.names.append(name)
        self._fds.append(fd)
        self._limit(len(self._fds) - 1)

    def pop(self, *, rewalk: bool = False) -> list[str]:
        """Go back up one level (closing its descriptor).

        With *rewalk*, the level the chain is back at is never opened again by
        name here: if its descriptor was closed, the chain goes up further, to
        the deepest level still open, and the names between are returned, for
        the caller to walk down again with its own checks. Otherwise (and
        without *rewalk*) the list is empty.
        """
        fds = self._fds
        fd = fds.pop()
        self.names.pop()
        if fd is not None:
            os.close(fd)
        if not rewalk or fds[-1] is not None:
            return []
        deepest = max(i for i, held in enumerate(fds) if held is not None)
        redo = self.names[deepest:]
        del self.names[deepest:]
        del fds[deepest + 1 :]
        return redo

    def to_base(self) -> None:
        """Go back to the base, closing every level below it."""
        fds = self._fds
        for fd in fds[1:]:
            if fd is not None:
                os.close(fd)
        del fds[1:]
        self.names.clear()

    def take_deepest(self) -> int:
        """Hand the deepest level's descriptor over to the caller, and close the chain.

        Raises
        ------
        ValueError
            The chain is at a base it does not own (that descriptor is the caller's already).
        OSError
            As :meth:`fd`.
        """
        if len(self._fds) == 1 and not self._owns_base:
            raise ValueError("the base is the caller's descriptor")
        fd = self.fd()
        self._fds[-1] = None
        self.close()
        return fd

    def fd(self, level: int = -1) -> int:
        """The descriptor of *level* (default: the deepest), opened again by name if it was closed.

        Raises
        ------
        OSError
            A directory on the way is gone or is no longer a directory (a link
            swapped in is never followed).
        """
        fds = self._fds
        level %= len(fds)
        fd = fds[level]
        if fd is not None:
            return fd
        start = level - 1
        while fds[start] is None:
            start -= 1
        current = fds[start]
        assert current is not None
        for step in range(start + 1, level + 1):
            try:
                child = os.open(self.names[step - 1], self._flags, dir_fd=current)
            finally:
                if step - 1 != start:
                    os.close(current)
            current = child
        fds[level] = current
        self._limit(level)
        return current

    def close(self) -> None:
        """Close every descriptor held (the base's only if the chain owns it); the chain is empty then."""
        self.to_base()
        if self._owns_base and self._fds:
            base = self._fds.pop()
            if base is not None:
                os.close(base)

    def _limit(self, protect: int) -> None:
        """Close the shallowest descriptors beyond *keep* (never the base, the deepest, nor *protect*)."""
        fds = self._fds
        deepest = len(fds) - 1
        if deepest <= self._keep:  # no more levels than may be held: nothing to close
            return
        held = [i for i in range(1, len(fds)) if fds[i] is not None]
        extra = len(held) - self._keep
        for level in held:
            if extra <= 0:
                return
            if level in (deepest, protect):
                continue
            os.close(fds[level])  # type: ignore[arg-type]
            fds[level] = None
            extra -= 1
