"""Progress of files that move in chunks, as values the views observe.

A :class:`Transfer` is reported after every chunk read or staged (see
:meth:`Broker.on_transfer <jupyter_fsbroker.core.broker.Broker.on_transfer>`);
it carries sizes and a path, never content.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["Transfer"]


@dataclass(frozen=True)
class Transfer:
    """Progress of a file moving in chunks, for views: one per chunk read or staged.

    Attributes
    ----------
    connection_id, server
        Who moves it.
    path
        The canonical root-relative path.
    direction
        ``"read"`` or ``"write"``.
    done
        Bytes moved so far (the end of this chunk).
    total
        The file's size for reads; ``None`` for writes (unknown until the last chunk).
    finished
        The last chunk: the read reached the end, or the upload was committed.
    """

    connection_id: str
    server: str
    path: str
    direction: str
    done: int
    total: int | None
    finished: bool
    time: float = field(default_factory=time.time)
