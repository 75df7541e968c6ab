"""Change events: what ``notifications/files/changed`` carries, and how a burst on one path coalesces.

:class:`ChangeEvent` is the value a watch delivers, the wire's own
(:mod:`jupyter_fsbroker.wire.events`). :class:`Pending` is a change
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

from ..wire.events import ChangeEvent
from ..wire.methods import WATCH_EVENTS

__all__ = ["EVENTS", "ChangeEvent", "Parts", "Pending", "merge"]

#: The event kinds of ``notifications/files/changed``.
EVENTS: frozenset[str] = frozenset(WATCH_EVENTS)

#: Components of a path below its root, as on disk.
Parts = tuple[str, ...]


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
