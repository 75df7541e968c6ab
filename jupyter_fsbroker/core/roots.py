"""Roots: the folders the user offers to servers.

A :class:`Root` is a value (name, canonical path, read-only flag, a unique id);
:class:`RootSet` is the thread-safe, observable collection the broker owns. It
keeps one open directory descriptor per root, from which every path is resolved
(see :mod:`jupyter_fsbroker.core.resolve`), and a generation counter that changes
on every change so that views and ``roots/list_changed`` can follow.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

from .errors import ClosedError, ConfigError
from .listeners import Listeners
from .names import is_wire_safe
from .resource import Closeable

__all__ = ["Root", "RootSet"]

_NAME_RE = re.compile(r"^[^/\\:\x00]{1,255}$")
_ids = itertools.count(1)


@dataclass(frozen=True)
class Root:
    """A folder offered to servers.

    Attributes
    ----------
    name
        Unique name; the first segment of root-relative paths (``data/x.csv``).
    path
        The canonical absolute path of the folder (symlinks resolved).
    given_path
        The absolute path as the user wrote it (may go through a symlink);
        absolute request paths below either spelling are accepted.
    read_only
        Refuse every write, create, delete and rename below this root.
    id
        Unique per :meth:`RootSet.add`, so that grants made for a removed root
        never come back to life when a root of the same name is added again.
    """

    name: str
    path: str
    given_path: str
    read_only: bool = False
    id: int = 0

    @property
    def uri(self) -> str:
        """The ``file://`` URI of the root, as sent in ``roots/list``.

        Percent-encoded from the path's bytes, so a folder whose name is not
        valid UTF-8 still has a URI JSON can carry.
        """
        return "file://" + quote(os.fsencode(self.path))

    @property
    def parts(self) -> tuple[str, ...]:
        """The canonical path split into components."""
        return _split_abs(self.path)

    @property
    def given_parts(self) -> tuple[str, ...]:
        """The given path split into components."""
        return _split_abs(self.given_path)


def _split_abs(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p not in ("", "."))


class RootSet(Closeable):
    """The broker's roots: add, remove, look up, observe.

    Every method is thread-safe. Listeners registered with :meth:`subscribe`
    are called (outside the lock) after each change with the new generation.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._roots: dict[str, Root] = {}
        self._fds: dict[int, int] = {}
        self._generation = 0
        self._listeners: Listeners[[int]] = Listeners()
        self._closed = False

    # -- changes ---------------------------------------------------------------

    def add(self, path: str | os.PathLike[str], name: str | None = None, *, read_only: bool = False) -> Root:
        """Add the folder *path* as a root and return it.

        Parameters
        ----------
        path
            An existing directory. ``~`` is expanded; relative paths are taken
            from the current directory. ``/`` and the home directory itself are
            refused: they would offer everything.
        name
            Unique name; defaults to the folder's own name.
        read_only
            Refuse every change below this root.

        Raises
        ------
        ConfigError
            The folder is missing, not a directory, too broad, or the name is
            taken or not usable.
        """
        given = os.path.abspath(os.path.expanduser(os.fspath(path)))
        real = os.path.realpath(given)
        if not os.path.exists(real):
            raise ConfigError(f"cannot add root {given!r}: no such directory")
        if not os.path.isdir(real):
            raise ConfigError(f"cannot add root {given!r}: not a directory")
        if real == "/":
            raise ConfigError("cannot add '/' as a root: it would offer the whole filesystem")
        home = os.path.realpath(os.path.expanduser("~"))
        if real == home:
            raise ConfigError(
                f"cannot add the home directory {given!r} itself as a root; add a folder inside it"
            )
        if name is None:
            name = os.path.basename(real)
        if not _NAME_RE.match(name) or name in (".", "..") or not is_wire_safe(name):
            raise ConfigError(
                f"root name {name!r} is not usable: use 1-255 characters without '/', '\\\\' or ':' "
                "(and valid UTF-8: name the root when its folder's name is not)"
            )
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with self._lock:
                self._check_open()
                if name in self._roots:
                    raise ConfigError(f"a root named {name!r} exists already")
                root = Root(name=name, path=real, given_path=given, read_only=read_only, id=next(_ids))
                self._roots[name] = root
                self._fds[root.id] = fd
                self._generation += 1
                generation = self._generation
        except BaseException:
            os.close(fd)
            raise
        self._notify(generation)
        return root

    def remove(self, name: str) -> Root:
        """Remove the root *name* and return it.

        Raises
        ------
        ConfigError
            No root has that name.
        """
        with self._lock:
            root = self._roots.pop(name, None)
            if root is None:
                raise ConfigError(f"no root named {name!r}")
            os.close(self._fds.pop(root.id))
            self._generation += 1
            generation = self._generation
        self._notify(generation)
        return root

    def close(self) -> None:
        """Remove every root and close their descriptors. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            had_roots = bool(self._roots)
            self._roots.clear()
            self._generation += 1
            generation = self._generation
        if had_roots:
            self._notify(generation)

    # -- queries ---------------------------------------------------------------

    @property
    def generation(self) -> int:
        """A counter that changes on every change to the set."""
        with self._lock:
            return self._generation

    def snapshot(self) -> tuple[Root, ...]:
        """The roots, in the order they were added."""
        with self._lock:
            return tuple(self._roots.values())

    def get(self, name: str) -> Root | None:
        """The root called *name*, or ``None``."""
        with self._lock:
            return self._roots.get(name)

    def is_current(self, root: Root) -> bool:
        """Whether *root* (that very addition) is still in the set."""
        with self._lock:
            return self._roots.get(root.name) == root

    def open_fd(self, root: Root) -> int:
        """Return a new descriptor (a ``dup``) of *root*'s directory; the caller closes it.

        Raises
        ------
        KeyError
            The root was removed.
        """
        with self._lock:
            fd = self._fds.get(root.id)
            if fd is None or self._roots.get(root.name) != root:
                raise KeyError(root.name)
            return os.dup(fd)

    def __iter__(self) -> Iterator[Root]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        with self._lock:
            return len(self._roots)

    # -- observers ---------------------------------------------------------------

    def subscribe(self, listener: Callable[[int], object]) -> Callable[[], None]:
        """Call *listener(generation)* after every change; returns an unsubscribe function."""
        return self._listeners.add(listener)

    def _notify(self, generation: int) -> None:
        self._listeners.notify(generation)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the root set is closed")
