"""What a ``files/*`` handler is given for one request: :class:`RequestContext`.

The dispatch (:mod:`jupyter_fsbroker.core.dispatch`) makes one context per
request and hands it to the method's handler (:mod:`jupyter_fsbroker.core.handlers`).
The context carries the connection's own state, the state every connection
shares, the request's params and audit note, the limits in force, and where
progress goes: everything a handler may use, and no way back into the broker
that dispatched it. This module holds no logic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .access import Access
from .audit import AuditNote
from .buffers import BufferPool
from .change_log import ChangeLog
from .changes import ChangeEvent
from .consent_flow import ConsentFlow
from .cursors import Listings
from .limits import Limits, RateLimiter
from .params import Params
from .services import BrokerServices
from .transfers import Transfer
from .uploads import StagedUploads

__all__ = ["ConnectionState", "RequestContext"]


class ConnectionState(Protocol):
    """What one connection holds between its requests, as its handlers see it.

    :class:`~jupyter_fsbroker.core.connection.Connection` is the one implementation;
    the protocol names the part of it a request may use (not the broker that opened it).
    """

    @property
    def id(self) -> str:
        """``c`` and a number, unique in this process."""
        ...

    @property
    def server(self) -> str:
        """The user's name for the connection."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the connection's kill switch was used."""
        ...

    @property
    def access(self) -> Access:
        """Its checks against roots, grants and locks."""
        ...

    @property
    def uploads(self) -> StagedUploads:
        """Its staged (chunked) uploads."""
        ...

    @property
    def listings(self) -> Listings:
        """Its unfinished ``files/list`` listings."""
        ...

    @property
    def consent(self) -> ConsentFlow:
        """Its ``files/consent`` requests and the prompts still open."""
        ...

    @property
    def rate(self) -> RateLimiter:
        """Its operation and byte rates."""
        ...

    @property
    def buffers(self) -> BufferPool:
        """The buffers its large chunks are read in."""
        ...

    @property
    def changes(self) -> ChangeLog:
        """The watch events it keeps for ``files/changes``."""
        ...

    def deliver(self, event: ChangeEvent) -> None:
        """Send a watch event to the server, unless the connection closed."""
        ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request as its handler sees it.

    Attributes
    ----------
    conn
        The requesting connection's state.
    services
        The state every connection shares: roots, grants, locks, watches, trash,
        temporary files, settings.
    params
        The request's params.
    note
        The request's audit record in the making.
    limits
        The limits in force, read once when the request starts, so that a request
        never sees two.
    progress
        Where a chunk read or staged is reported (the broker's ``on_transfer`` listeners).
    """

    conn: ConnectionState
    services: BrokerServices
    params: Params
    note: AuditNote
    limits: Limits
    progress: Callable[[Transfer], object]
