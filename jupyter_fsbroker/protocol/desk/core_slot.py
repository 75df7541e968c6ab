"""The broker side of one connection as the desk sees it: :class:`CoreSlot`, open once it is named.

A connection the user named opens its broker-side
:class:`~jupyter_fsbroker.core.connection.Connection` at once; one named by its
server opens it only when the server's answer to ``initialize`` says its name,
and a ``files/*`` request sent before that waits for it (:meth:`CoreSlot.handle`).
If the connection closes first, the slot is closed for good, and such a request
meets a :class:`~jupyter_fsbroker.core.errors.ClosedError`, which the desk
answers ``connection_closed`` like the core does.

Everything the desk reads of the core per request is here too: where a request
may be answered off the loop (:meth:`CoreSlot.route`), the core's
:class:`~jupyter_fsbroker.core.limits.Limits` (the memory budget and the read
sizes, read per request so that a change applies at once) and the buffers large
answers are encoded in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

from ...core.broker import Broker
from ...core.buffers import BufferPool
from ...core.connection import Connection
from ...core.consent import Consenter
from ...core.errors import ClosedError
from ...core.watch import ChangeEvent
from .desk import FilesRoute
from .route import ON_LOOP

__all__ = ["CoreSlot"]

log = logging.getLogger(__name__)


class CoreSlot:
    """The broker-side connection of one server connection, once it is named.

    Parameters
    ----------
    broker
        The broker the connection's requests are answered by.
    consenter
        Answers the connection's ``files/consent`` requests.
    notify
        Called (on the core's watch thread) with each change event of its watches.
    on_request
        Called (on the thread that took it) for every ``files/*`` request, before it is answered.
    """

    def __init__(
        self,
        broker: Broker,
        *,
        consenter: Consenter | None,
        notify: Callable[[ChangeEvent], None],
        on_request: Callable[[], None] | None = None,
    ) -> None:
        self._broker = broker
        self._consenter = consenter
        self._notify = notify
        self._on_request = on_request
        self._connection: Connection | None = None
        self._settled = anyio.Event()  # opened, or closed before it was

    @property
    def connection(self) -> Connection | None:
        """The broker-side connection, once opened."""
        return self._connection

    @property
    def ready(self) -> bool:
        """Whether the broker-side connection is open (or was: the core answers for a closed one)."""
        return self._connection is not None

    @property
    def gone(self) -> bool:
        """Whether the slot closed before it was ever opened: it never will be."""
        return self._connection is None and self._settled.is_set()

    @property
    def settled(self) -> bool:
        """Whether the slot was opened or closed (a request need not wait for the name any more)."""
        return self._settled.is_set()

    def open(self, name: str) -> Connection:
        """Open the broker-side connection, named *name*."""
        if self._connection is None:
            self._connection = self._broker.connect(name, consenter=self._consenter, notify=self._notify)
        self._settled.set()
        return self._connection

    def close(self, reason: str | None = None) -> None:
        """Close the broker-side connection (its later refusals say *reason*), or else the slot for good."""
        if self._connection is not None:
            self._connection.close(reason)
        self._settled.set()  # a files/* request waiting for it is answered (closed)

    # -- what the desk asks of it ---------------------------------------------------------------

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        """On the loop: answer one request (waiting for the name first, if need be)."""
        self._requested()
        if self._connection is None and not self._settled.is_set():
            # A server that asks before the handshake ended: wait for the name.
            log.debug("%s waits for the connection to be named", method)
            await self._settled.wait()
        if self._connection is None:
            raise ClosedError("the connection closed before it was named")
        return await self._connection.ahandle(method, params)

    def route(self, method: str) -> FilesRoute | None:
        """Where a request can be answered off the loop; ``None`` sends it the task's way.

        A consent waits for the user on the loop, and a request that comes
        before the connection is named, or after the broker closed its pool, is
        answered there.
        """
        self._requested()  # every request that may go this way comes here first
        connection = self._connection
        if connection is None or method in ON_LOOP:
            return None
        try:
            executor = self._broker.executor()
        except ClosedError:
            return None
        return executor.submit, connection.handle

    def memory_budget(self) -> int:
        """Bytes one connection's answers may hold (the core's limit, read now)."""
        return self._broker.config.limits.memory_budget

    def read_sizes(self) -> tuple[int, int, int]:
        """``(default, maximum)`` length of a ``files/read`` and the most entries of a ``files/list``."""
        limits = self._broker.config.limits
        return limits.default_read_bytes, limits.max_chunk_bytes, limits.max_list_entries

    def buffers(self) -> BufferPool | None:
        """What lends the buffers large answers are encoded in (the connection's, once open)."""
        return None if self._connection is None else self._connection.buffers

    def _requested(self) -> None:
        if self._on_request is not None:
            self._on_request()
