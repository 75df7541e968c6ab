"""What the broker says to a connected server, and a kill switch pulled on the broker side.

A :class:`BrokerBridge` carries the broker's events of one
:class:`~.server_connection.ServerConnection` to its server: a watched file changed
(``notifications/files/changed``, from the core's watch dispatcher thread), the roots changed
(``notifications/roots/list_changed``, from whatever thread changed them). Both hop onto the
event loop through the middleware and never block the thread they come from. It also tells the
connection when its broker side was closed from elsewhere (``conn.connection.close()``,
``broker.close()``), so that the transport ends too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from ..core.broker import Broker
from ..core.watch import ChangeEvent
from .desk.core_slot import CoreSlot
from .middleware import CHANGED_NOTIFICATION, BrokerMiddleware

__all__ = ["BrokerBridge"]


class BrokerBridge:
    """The broker's events for one connection's server.

    Parameters
    ----------
    broker
        The broker whose roots and connections are followed.

    Attributes
    ----------
    middleware
        Where notifications go; ``None`` (nothing is sent) until the transport is up and once
        it is down.
    """

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.middleware: BrokerMiddleware | None = None

    def on_change(self, event: ChangeEvent) -> None:
        """The core's watch dispatcher thread: forward one change, never block."""
        middleware = self.middleware
        if middleware is not None:
            middleware.notify_threadsafe(CHANGED_NOTIFICATION, event.to_params())

    def follow(self, stack: AsyncExitStack, slot: CoreSlot, on_closed: Callable[[], None]) -> None:
        """Follow the roots and the broker-side connection of *slot* until *stack* closes.

        *on_closed* is called (on any thread) whenever the broker's connections change while
        the one of *slot* is closed, and once now if it already is.
        """

        def connections_changed() -> None:
            core = slot.connection
            if core is not None and core.closed:
                on_closed()

        stack.callback(self._broker.roots.subscribe(self._roots_changed))
        stack.callback(self._broker.on_connections(connections_changed))
        connections_changed()  # closed while connecting?

    def _roots_changed(self, generation: int) -> None:
        """Any thread: the roots changed."""
        del generation
        middleware = self.middleware
        if middleware is not None:
            middleware.notify_threadsafe("notifications/roots/list_changed")
