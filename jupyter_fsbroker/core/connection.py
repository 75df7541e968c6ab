"""The broker side of one server connection: who it is, what it holds between requests, its kill switch.

A :class:`Connection` is created by :meth:`Broker.connect
<jupyter_fsbroker.core.broker.Broker.connect>`. Its requests come in through
:meth:`Connection.handle` and :meth:`Connection.ahandle`, which hand them to the
broker's dispatch (:mod:`jupyter_fsbroker.core.dispatch`); their handlers see the
connection's state, never the broker. The connection owns what lasts
between requests: its checks (:class:`~jupyter_fsbroker.core.access.Access`),
its staged uploads, its unfinished listings, its open consent prompts, its rate limiter, and the sink of
its watch events. :meth:`Connection.close` ends all of them at once; no request
of a closed connection touches a file.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

from .access import Access
from .buffers import BufferPool
from .change_log import ChangeLog
from .consent import Consenter
from .consent_flow import ConsentFlow
from .cursors import Listings
from .dispatch import Dispatch
from .grants import Grant
from .limits import Limits, RateLimiter
from .resource import Closeable
from .services import BrokerServices
from .uploads import StagedUploads
from .watch import ChangeEvent

__all__ = ["Connection", "ConnectionOwner"]

_connection_ids = itertools.count(1)


class ConnectionOwner(BrokerServices, Protocol):
    """What a connection needs of the broker that opened it, besides the shared state.

    None of it is on a request's way: the user's revocations, the views told
    about a watch event, and the broker told that the connection closed.
    """

    def revoke(
        self,
        path: str | None = None,
        *,
        connection: Connection | None = None,
        operations: tuple[str, ...] | None = None,
    ) -> tuple[Grant, ...]:
        """Revoke grants of *connection*."""
        ...

    def report_change(self, event: ChangeEvent, connection: Connection) -> None:
        """Tell the views about a watch event sent to *connection*."""
        ...

    def connection_closed(self, connection: Connection) -> None:
        """Forget *connection*: it closed."""
        ...


class Connection(Closeable):
    """The broker side of one server connection: its grants, locks, watches and uploads.

    Created by :meth:`Broker.connect <jupyter_fsbroker.core.broker.Broker.connect>`.
    :meth:`close` is the kill switch: it ends every grant, lock, watch, staged
    upload and pending consent of the connection at once.

    Attributes
    ----------
    id
        ``c`` and a number, unique in this process.
    server
        The user's name for the connection.
    opened_at
        :func:`time.time` when it opened.
    access
        Its checks against roots, grants and locks.
    uploads
        Its staged (chunked) uploads.
    consent
        Its ``files/consent`` requests and the prompts still open.
    listings
        Its unfinished ``files/list`` listings, which its cursors resume.
    rate
        Its operation and byte rates.
    buffers
        The buffers its large chunks are read and answered in (see :mod:`.buffers`).
    changes
        The watch events it keeps for ``files/changes`` (see :mod:`.change_log`).
    """

    def __init__(
        self,
        broker: ConnectionOwner,
        server: str,
        consenter: Consenter,
        notify: Callable[[ChangeEvent], None] | None,
        dispatch: Dispatch,
    ) -> None:
        self.broker = broker
        self._dispatch = dispatch
        self.server = server
        self.id = f"c{next(_connection_ids)}"
        self.opened_at = time.time()
        self.access = Access(broker, self.id, server)
        self.uploads = StagedUploads(self.access)
        self.listings = Listings()
        self.consent = ConsentFlow(self.access, consenter)
        self.rate = RateLimiter(broker.config.limits)
        self.buffers = BufferPool()
        self.changes = ChangeLog()
        self._notify = notify

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Connection {self.id} server={self.server!r} {state}>"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.access.closed

    @property
    def limits(self) -> Limits:
        """The limits in force for this connection's next request."""
        return self.broker.config.limits

    @property
    def consenter(self) -> Consenter:
        """Who asks the user on ``files/consent``; may be replaced while the connection is open."""
        return self.consent.consenter

    @consenter.setter
    def consenter(self, consenter: Consenter) -> None:
        self.consent.consenter = consenter

    # -- requests --------------------------------------------------------------------------------

    def handle(self, method: str, params: object) -> dict[str, Any]:
        """Decide and perform one ``files/*`` request; return its result.

        Blocks while it does file I/O or waits for consent: call it off any
        event loop (see :meth:`ahandle`).

        Raises
        ------
        FilesError
            The answer to send as the JSON-RPC error (see ``to_jsonrpc_error``).
        """
        return self._dispatch.handle(self, method, params)

    async def ahandle(self, method: str, params: object) -> dict[str, Any]:
        """:meth:`handle`, awaitable from any event loop.

        File I/O runs on the broker's worker threads; a consent is awaited on
        the loop itself, so prompts waiting for the user hold no thread.
        """
        return await self._dispatch.ahandle(self, method, params)

    # -- grants ----------------------------------------------------------------------------------

    def revoke(self, path: str | None = None, operations: tuple[str, ...] | None = None) -> tuple[Grant, ...]:
        """Revoke this connection's grants on *path* (or all of them); only *operations*, when given."""
        return self.broker.revoke(path, connection=self, operations=operations)

    def grants(self) -> tuple[Grant, ...]:
        """The live grants this connection can use (its own and the pre-approvals)."""
        return self.broker.grants.grants(self.id)

    # -- watch events ----------------------------------------------------------------------------

    def deliver(self, event: ChangeEvent) -> None:
        """Send a watch event to the server (and the broker's views), unless the connection closed."""
        if self.closed:
            return
        self.changes.add(event)
        if self._notify is not None:
            self._notify(event)
        self.broker.report_change(event, self)

    def keep_changes(self) -> None:
        """The connection has no notifications (the 2026-07-28 era): keep every watch's events,
        from its start, for ``files/changes``."""
        self.changes.keep_all()

    # -- the kill switch -------------------------------------------------------------------------

    def close(self, reason: str | None = None) -> None:
        """End the connection: revoke its grants, release its locks, stop its watches,
        discard its staged uploads, deny its pending consents. Idempotent.

        *reason* (``"closed by the user"``) is what later refusals of its requests say.
        """
        if not self.access.close(reason):
            return
        self.consent.close()
        broker = self.broker
        broker.grants.revoke_connection(self.id)
        self.uploads.close()
        self.listings.close()
        self.buffers.close()
        broker.watches.remove_owner(self.id)
        self.changes.clear()
        broker.locks.release_owner(self.id)
        broker.connection_closed(self)
