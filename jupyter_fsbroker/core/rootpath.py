"""A path inside a root: the value every part of the core passes around.

A :class:`RootPath` is a root and the clean components below it. It is the one
place that spells such a path as text: root-relative for the wire, the audit
and the views (``data/sales/2024.csv``), absolute for the keys of locks,
watches and the trash (``/home/ana/data/sales/2024.csv``).

It is pure arithmetic on names: it never touches the file system, so holding
one says nothing about what exists, and it must never be used to open a file
by its absolute spelling (the core opens files only through the
descriptor-relative walk of :mod:`jupyter_fsbroker.core.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .roots import Root

__all__ = ["RootPath"]


@dataclass(frozen=True)
class RootPath:
    """A root and clean components below it (no ``""``, ``.`` or ``..``).

    Attributes
    ----------
    root
        The root (that very addition: two roots of the same name added at
        different times are different roots).
    parts
        The components below the root; ``()`` is the root itself.

    Examples
    --------
    >>> data = Root(name="data", path="/home/ana/data", given_path="/home/ana/data", id=1)
    >>> where = RootPath(data, ("sales", "2024.csv"))
    >>> where.rel, where.key, where.name
    ('data/sales/2024.csv', '/home/ana/data/sales/2024.csv', '2024.csv')
    >>> where.parent.rel
    'data/sales'
    """

    root: Root
    parts: tuple[str, ...] = ()

    @classmethod
    def below(cls, root: Root, absolute: str) -> RootPath | None:
        """The path of *absolute* (spelled from the root's canonical path) below *root*, or ``None``.

        ``None`` when *absolute* is the root itself, lies outside it, or has an
        empty, ``.`` or ``..`` component.
        """
        prefix = root.path + "/"
        if not absolute.startswith(prefix):
            return None
        parts = tuple(absolute[len(prefix) :].split("/"))
        if any(p in ("", ".", "..") for p in parts):
            return None
        return cls(root, parts)

    @property
    def rel(self) -> str:
        """The root-relative spelling, ``<root name>/<parts...>``: what the wire and people see."""
        return "/".join((self.root.name, *self.parts))

    @property
    def key(self) -> str:
        """The canonical absolute spelling: the key of locks, watches and trash origins."""
        return "/".join((self.root.path, *self.parts)) if self.parts else self.root.path

    @property
    def name(self) -> str | None:
        """The last component; ``None`` for the root itself."""
        return self.parts[-1] if self.parts else None

    @property
    def is_root(self) -> bool:
        """Whether this is the root itself."""
        return not self.parts

    @property
    def parent(self) -> RootPath:
        """The directory that holds this path.

        Raises
        ------
        ValueError
            This is the root itself: nothing inside the root holds it.
        """
        if not self.parts:
            raise ValueError(f"{self.rel} is a root: it has no parent inside the root")
        return RootPath(self.root, self.parts[:-1])

    def contains(self, other: RootPath) -> bool:
        """Whether *other* is this path or lies below it (in the same root)."""
        n = len(self.parts)
        return other.root.id == self.root.id and other.parts[:n] == self.parts

    def overlaps(self, other: RootPath) -> bool:
        """Whether one of the two paths contains the other."""
        return self.contains(other) or other.contains(self)
