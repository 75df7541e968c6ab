"""The roots' side of a connection's MCP exchange: :class:`RootsExchange`.

A server learns the shared folders by asking ``roots/list``; the client says
when they changed (``notifications/roots/list_changed``). The exchange answers
each ``roots/list`` with what a :class:`RootsProvider` says
(:class:`~.roots_offer.RootsOffer`), computed as the request is read, so that
whatever the server sends next finds its consequences (a notice) in place, and
written in a task of its own, so the middleware's pump reads on. It tells the
connection's :class:`~.roots_gate.RootsGate` how the exchange goes: roots
offered (only if the answer would hand over locations: a server told names
only needs no head start), the server heard from, ``roots/list`` asked and
answered. Everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCRequest, JSONRPCResponse

from ..core.errors import InternalError, to_jsonrpc_error
from .roots_gate import RootsGate

__all__ = ["RootsExchange", "RootsProvider"]

log = logging.getLogger(__name__)


class RootsProvider(Protocol):
    """What answers ``roots/list`` (:class:`~.roots_offer.RootsOffer`); called on the event loop."""

    def answer(self) -> dict[str, Any]:
        """The result of the ``roots/list`` the server just sent."""
        ...

    def located(self) -> bool:
        """Whether that result would now hand over any root's ``file://`` location."""
        ...


class RootsExchange:
    """Answers one connection's ``roots/list`` requests and tells its gate how the exchange goes.

    Parameters
    ----------
    roots
        Answers each ``roots/list``; says whether locations are offered.
    gate
        Told about the exchange (see :mod:`.roots_gate`); ``None``: nobody waits for it.
    send
        Writes a message to the server (the middleware's, which drops it once the transport closed).
    on_failure
        Called with an exception a task of the exchange did not expect (a bug): it ends the connection.
    label
        Names the connection in log messages.
    """

    def __init__(
        self,
        roots: RootsProvider,
        gate: RootsGate | None,
        *,
        send: Callable[[JSONRPCMessage], Awaitable[None]],
        on_failure: Callable[[BaseException], None],
        label: str = "",
    ) -> None:
        self._roots = roots
        self._gate = gate
        self._send = send
        self._on_failure = on_failure
        self._label = label
        self._tasks: set[asyncio.Task[None]] = set()

    def offered(self) -> None:
        """The roots were offered (``initialized`` or ``roots/list_changed`` went out)."""
        if self._gate is not None:
            self._gate.offered(self._roots.located())

    def activity(self) -> None:
        """The server sent something."""
        if self._gate is not None:
            self._gate.activity()

    def answer(self, request: JSONRPCRequest) -> None:
        """Answer the ``roots/list`` *request* just read: computed now, written in a task."""
        if self._gate is not None:
            self._gate.asked()
        task = asyncio.get_running_loop().create_task(self._write(self._answer_of(request)))
        self._tasks.add(task)
        task.add_done_callback(self._written)

    async def aclose(self) -> None:
        """Stop writing the answers not yet written, and wait until they are stopped."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _write(self, answer: JSONRPCMessage) -> None:
        await self._send(answer)
        if self._gate is not None:
            self._gate.answered()

    def _written(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._on_failure(task.exception())  # type: ignore[arg-type]

    def _answer_of(self, request: JSONRPCRequest) -> JSONRPCMessage:
        try:
            return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=self._roots.answer())
        except Exception as exc:
            log.exception("%s: unexpected failure answering roots/list", self._label)
            path = (request.params or {}).get("path")
            failure = f"the client failed to answer roots/list ({type(exc).__name__})"
            error = to_jsonrpc_error(InternalError(failure, path=path if isinstance(path, str) else None))
            return JSONRPCError(jsonrpc="2.0", id=request.id, error=ErrorData.model_validate(error))
