"""Directories walked down by name, holding a bounded number of descriptors whatever the depth.

An :class:`OpenDirs` is a chain of directories below a base descriptor: level 0
is the base (the caller's descriptor, never closed here), level *i* the
directory named ``names[i - 1]`` inside level *i - 1*. Walks over trees
(listings, tree removal, copies into the trash, tree sizes) keep their place
in one, so that a tree thousands of levels deep costs a few descriptors, not
one per level: at most ``keep`` levels hold an open descriptor besides the
base; opening a deeper one closes the shallowest others, and a level whose
descriptor was closed is opened again, when the walk comes back to it, by
name from the nearest open ancestor.

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
        The descriptor the chain starts from; the caller keeps it and closes it.
    keep
        How many levels below the base hold an open descriptor at most.
    flags
        How a level is opened again from its parent (``O_NOFOLLOW`` and
        ``O_DIRECTORY`` are always among them).
    """

    __slots__ = ("_fds", "_flags", "_keep", "names")

    def __init__(self, base_fd: int, *, keep: int = KEEP, flags: int = DIR_READ_FLAGS) -> None:
        if keep < 1:
            raise ValueError("keep at least one level open")
        self._fds: list[int | None] = [base_fd]
        self._keep = keep
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

    def pop(self) -> None:
        """Go back up one level (closing its descriptor)."""
        fd = self._fds.pop()
        self.names.pop()
        if fd is not None:
            os.close(fd)

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
        """Close every descriptor held (never the base's); the chain is empty afterwards."""
        for fd in self._fds[1:]:
            if fd is not None:
                os.close(fd)
        del self._fds[1:]
        self.names.clear()

    def _limit(self, protect: int) -> None:
        """Close the shallowest descriptors beyond *keep* (never the base, the deepest, nor *protect*)."""
        fds = self._fds
        deepest = len(fds) - 1
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
