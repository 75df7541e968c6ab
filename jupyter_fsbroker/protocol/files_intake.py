"""Where a ``files/*`` request leaves the MCP plumbing: :class:`FilesIntake` hands it to the desk.

The middleware sees every message a server sends; the ``files/*`` requests
among them are the desk's (:class:`~.desk.desk.FilesDesk`, which decides who
answers each one). The intake builds the connection's desk from its broker side
(:class:`FilesCore`) and gives it those requests the two ways they arrive: as a
transport that can (stdio's pipes: :meth:`~.transports.pipes.PipeReader.offer_to`)
reads them, on its reading thread, so a small request need not cross the event
loop; or from the middleware's pump, on the loop. It also takes the server's
``notifications/cancelled`` of a request the desk holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeGuard

from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCRequest

from ..core.buffers import BufferPool
from ..wire.methods import FILES_PREFIX
from .desk.budget import MemoryBudget
from .desk.desk import CoreState, FilesDesk, FilesRoute
from .desk.route import Route, Where
from .roots_gate import RootsGate
from .transports.message_streams import MessageWriter

__all__ = ["FilesCore", "FilesIntake", "is_files_request"]


class FilesCore(CoreState, Protocol):
    """The broker side of a connection as the desk asks it (:class:`~.desk.core_slot.CoreSlot`)."""

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        """On the loop: the result of one ``files/*`` request, or a :class:`~.core.errors.FilesError`."""
        ...

    def route(self, method: str) -> FilesRoute | None:
        """Where a request of *method* can be answered off the loop; ``None``: on it."""
        ...

    def memory_budget(self) -> int:
        """Bytes the connection's answers may hold while produced and until written (read per request)."""
        ...

    def read_sizes(self) -> tuple[int, int, int]:
        """The default and largest ``files/read`` length and the most ``files/list`` entries."""
        ...

    def buffers(self) -> BufferPool | None:
        """What lends the buffers large answers are encoded in (``None``: none yet)."""
        ...


def is_files_request(message: JSONRPCMessage) -> TypeGuard[JSONRPCRequest]:
    """Whether *message* is a ``files/*`` request (the desk's)."""
    return isinstance(message, JSONRPCRequest) and message.method.startswith(FILES_PREFIX)


class FilesIntake:
    """The connection's desk, and the ``files/*`` requests handed to it.

    Parameters
    ----------
    loop
        The connection's event loop.
    writer
        The transport's write side (answers go there).
    core
        The broker side: it answers ``files/*`` and says the limits.
    max_in_flight
        How many ``files/*`` requests of the connection are handled at once.
    gate
        Armed, it keeps the desk from answering on the reading thread (see :mod:`.roots_gate`).
    on_failure
        Called on the loop with an exception the desk did not expect (a bug): it ends the connection.
    label
        Names the connection in log messages.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: MessageWriter,
        core: FilesCore,
        *,
        max_in_flight: int,
        gate: RootsGate | None,
        on_failure: Callable[[BaseException], None],
        label: str = "",
    ) -> None:
        self._desk = FilesDesk(
            loop,
            writer,
            handle=core.handle,
            route=core.route,
            budget_limit=core.memory_budget,
            read_sizes=core.read_sizes,
            max_in_flight=max_in_flight,
            gate=gate,
            buffers=core.buffers,
            on_failure=on_failure,
            core=core,
            label=label,
        )

    @property
    def in_flight(self) -> int:
        """The number of ``files/*`` requests being answered."""
        return self._desk.in_flight

    @property
    def budget(self) -> MemoryBudget:
        """The connection's memory budget (see :mod:`.desk.budget`)."""
        return self._desk.budget

    def offer_reads(self, reader: object) -> None:
        """Let *reader*, if it can (stdio's pipes), show each request to the desk as it reads it."""
        offer_to = getattr(reader, "offer_to", None)
        if offer_to is not None and self._desk.answers_on_threads:
            offer_to(self._take)

    def take_on_loop(self, request: JSONRPCRequest) -> JSONRPCError | None:
        """Give the desk a ``files/*`` request the pump read: the refusal to write now, if it is refused
        at once (too many wait for memory), else ``None`` (the desk answers it)."""
        if self._desk.take(request, Where.LOOP) is Route.BUSY:
            return self._desk.refusal(request)
        return None

    def cancel(self, params: dict[str, Any] | None) -> bool:
        """A ``notifications/cancelled`` with *params*: whether it was for a request the desk holds."""
        request_id = (params or {}).get("requestId")
        return (
            isinstance(request_id, str | int)
            and not isinstance(request_id, bool)
            and self._desk.cancel(request_id)
        )

    async def aclose(self) -> None:
        """Close the desk: every answer not yet being written is dropped (see :meth:`.FilesDesk.aclose`)."""
        await self._desk.aclose()

    def _take(self, item: SessionMessage, where: Where) -> bool | Callable[[], None]:
        """The transport's one hook, as it reads *item* (see :meth:`.transports.pipes.PipeReader.offer_to`).

        On the reading thread: what answers *item* there, now, or ``False``
        (hand it to the loop). On the loop: whether the desk took it; what it
        does not take (anything but a ``files/*`` request, one refused at
        once) goes on to the pump, in order.
        """
        message = item.message
        if not is_files_request(message):
            return False
        taken = self._desk.take(message, where)
        if callable(taken):
            return taken
        return taken not in (Route.LOOP, Route.BUSY)
