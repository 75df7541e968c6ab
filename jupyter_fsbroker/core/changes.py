"""Change events: what ``notifications/files/changed`` carries, and how a burst on one path coalesces.

:class:`ChangeEvent` is the value a watch delivers. :class:`Pending` is a change
not delivered yet, and :func:`merge` the coalescing rule of a burst on one
path: the last state wins, except that ``modified`` after ``created`` (or after
``moved``) keeps the first kind (a file written right after it appeared is
still new to the client), and a path created and then atomically replaced
stays ``created``.

A path with a name that is not valid UTF-8 is reported readable (each
undecodable byte as U+FFFD) with ``undecodableName`` (PROTOCOL.md).

Nothing here touches the file system or knows about threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .timestamps import iso_utc

__all__ = ["EVENTS", "ChangeEvent", "Parts", "Pending", "merge"]

#: The event kinds of ``notifications/files/changed``.
EVENTS: frozenset[str] = frozenset({"created", "modified", "deleted", "moved"})

#: Components of a path below its root, as on disk.
Parts = tuple[str, ...]


@dataclass(frozen=True)
class ChangeEvent:
    """One coalesced change, as sent in ``notifications/files/changed``.

    Attributes
    ----------
    watch_id
        The watch that reports it.
    path
        Root-relative path of the changed entry (``data/sub/x.csv``).
    event
        ``created``, ``modified``, ``deleted`` or ``moved``.
    timestamp
        ``time.time()`` of the last raw event coalesced into this one.
    old_path
        For ``moved``: the root-relative path the entry had before.
    undecodable_name
        ``path`` (or ``old_path``) names something whose name is not valid
        UTF-8 on disk, spelled readable: each undecodable byte as U+FFFD.
    """

    watch_id: str
    path: str
    event: str
    timestamp: float
    old_path: str | None = None
    undecodable_name: bool = False

    def to_params(self) -> dict[str, Any]:
        """Return the ``params`` of the ``notifications/files/changed`` notification.

        Returns
        -------
        dict
            ``watchId``, ``path``, ``event``, ``timestamp`` (ISO 8601 UTC with
            milliseconds, e.g. ``2026-11-29T12:30:00.123Z``) and, when set,
            ``oldPath`` and ``undecodableName``.
        """
        params: dict[str, Any] = {
            "watchId": self.watch_id,
            "path": self.path,
            "event": self.event,
            "timestamp": iso_utc(round(self.timestamp, 3)),  # the nearest millisecond
        }
        if self.old_path is not None:
            params["oldPath"] = self.old_path
        if self.undecodable_name:
            params["undecodableName"] = True
        return params


@dataclass
class Pending:
    """A change of one path not delivered yet.

    Attributes
    ----------
    kind
        ``created``, ``modified``, ``deleted`` or ``moved``.
    timestamp
        ``time.time()`` of its last raw event.
    src
        For ``moved``: the source's components when the source is in scope.
    fresh
        For ``moved``: the path was created earlier in the same burst.
    """

    kind: str
    timestamp: float
    src: Parts | None = None
    fresh: bool = False


def merge(pending: dict[Parts, Pending], parts: Parts, new: Pending) -> None:
    """Coalesce *new* into *pending*: the last state wins, but ``modified`` keeps ``created``/``moved``.

    The entry moves to the end, so that delivery follows the order of last changes.
    """
    old = pending.pop(parts, None)
    if old is not None:
        if new.kind == "modified" and old.kind in ("created", "moved"):
            new = Pending(old.kind, new.timestamp, old.src, old.fresh)
        elif new.kind == "moved" and (old.kind == "created" or old.fresh):
            new.fresh = True
    pending[parts] = new
