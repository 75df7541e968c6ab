"""The one object the transports and the middleware hand every ``files/*`` request to: :class:`FilesDesk`.

The desk takes a request (:meth:`FilesDesk.take`), asks :func:`~.route.decide`
who answers it, gives it a ticket in its one table (:class:`~.table.InFlight`)
and answers it there, whoever that is:

* **here**, on the transport's reading thread (a request alone on its
  connection: the loop is not woken at all);
* on a **worker** thread of the broker's pool, which writes the answer itself
  when the transport takes it at once (:meth:`DirectWriter.write_now`), and
  otherwise hands the encoded bytes to the loop;
* in a **task** on the loop, which waits its turn for memory and a slot, and
  for the connection's name or the user's consent;
* or refuses it at once (too many wait for memory; the desk is closing).

Every way runs the core the same way and answers a failure with the core's own
mapping (:func:`~jupyter_fsbroker.core.errors.to_files_error`): a connection
that closed under a request is ``connection_closed`` on every way, and only the
unexpected is logged. A ``notifications/cancelled`` (:meth:`FilesDesk.cancel`)
stops a request not started and drops the answer of one running; closing the
desk (:meth:`FilesDesk.aclose`) drops every answer not yet being written and
gives back every slot and byte.

Threads: :meth:`take` is called on the reading thread (``Where.READER``) or on
the loop (``Where.LOOP``); the budget changes on the loop only, so a ticket with
a reservation is always finished there (a worker posts it back).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCRequest, JSONRPCResponse

from ...core.buffers import BufferPool
from ...core.errors import (
    ClosedError,
    FilesError,
    InternalError,
    RateLimited,
    to_files_error,
    to_jsonrpc_error,
)
from ...core.hop import post
from ..framing import LentMessage, encode_message, encode_response, release
from ..roots_gate import RootsGate
from ..transports.message_streams import MessageWriter
from .budget import MemoryBudget, Reservation, answer_estimate, held_by
from .route import DeskState, Route, Where, decide
from .table import InFlight, Ticket

__all__ = [
    "BytesWriter",
    "CoreState",
    "DirectWriter",
    "FilesDesk",
    "FilesHandler",
    "FilesRoute",
    "failure_answer",
]

log = logging.getLogger(__name__)

#: Answers one ``files/*`` request on the loop: ``(method, params) -> result``, raising ``FilesError``.
FilesHandler = Callable[[str, Any], Awaitable[dict[str, Any]]]

#: Where a request can be answered off the loop: ``(submit, handle)``, where
#: ``submit(fn, *args)`` runs ``fn`` on a worker thread (an executor's ``submit``)
#: and ``handle(method, params)`` answers the request there, raising ``FilesError``.
FilesRoute = tuple[Callable[..., "concurrent.futures.Future[Any]"], Callable[[str, Any], dict[str, Any]]]

# How long a request refused for want of memory is told to wait before trying again.
_BUDGET_RETRY_MS = 100

_Sizes = tuple[int, int, int]
_Answer = tuple[str, dict[str, Any]]


@runtime_checkable
class BytesWriter(Protocol):
    """A write side that takes a message already encoded as JSON (the project's transports)."""

    async def send_bytes(self, data: bytes | memoryview, /) -> None: ...


@runtime_checkable
class DirectWriter(Protocol):
    """A write side that takes a whole encoded message from any thread when it can do so at once."""

    def write_now(self, data: bytes, /) -> bool:
        """Write *data* and its newline now, or return ``False`` (nothing written) if it cannot."""
        ...


class CoreState(Protocol):
    """Whether the broker side of a connection exists (:class:`~.core_slot.CoreSlot`)."""

    @property
    def ready(self) -> bool:
        """It is open (the connection is named)."""
        ...

    @property
    def gone(self) -> bool:
        """It closed before it was ever opened: it never will be."""
        ...


def failure_answer(request: JSONRPCRequest, exc: BaseException, label: str) -> dict[str, Any]:
    """The JSON-RPC error answering *request*, which failed with *exc*: the core's own mapping.

    Only a failure the mapping does not know (a bug) is logged, with its traceback.
    """
    path = _path_of(request)
    error = to_files_error(exc, path)
    if isinstance(error, InternalError) and not isinstance(exc, FilesError | OSError):
        log.error("%s: unexpected failure answering %s", label, request.method, exc_info=exc)
        error = InternalError(
            f"the client failed to answer {request.method} ({type(exc).__name__})", path=path
        )
    return to_jsonrpc_error(error)


class FilesDesk:
    """Takes every ``files/*`` request of one connection and answers it, on the way :func:`decide` says.

    Parameters
    ----------
    loop
        The connection's event loop.
    writer
        The transport's write side: ``send`` a ``SessionMessage``; the project's
        transports also ``send_bytes`` (and, over stdio, ``write_now``).
    handle
        Awaited on the loop for a request that goes the task's way.
    route
        ``route(method)``: where a request may be answered off the loop, or
        ``None`` (a consent, a connection not named yet, a closed pool).
    budget_limit, read_sizes
        The memory budget in bytes, and ``(default, maximum)`` length of a read
        and the most entries of a listing: read for every request.
    max_in_flight
        How many requests of the connection run the core at once.
    gate
        The roots gate: while armed, the reading thread answers nothing itself.
    buffers
        What lends the buffers large answers are encoded in, if anything.
    on_failure
        Called on the loop with an exception a task of the desk did not expect
        (a bug): it ends the connection.
    core
        Whether the broker side exists yet (``None``: it always does).
    label
        Names the connection in log messages.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: MessageWriter,
        *,
        handle: FilesHandler,
        route: Callable[[str], FilesRoute | None] | None,
        budget_limit: Callable[[], int],
        read_sizes: Callable[[], _Sizes],
        max_in_flight: int,
        gate: RootsGate | None = None,
        buffers: Callable[[], BufferPool | None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        core: CoreState | None = None,
        label: str = "",
    ) -> None:
        self._loop = loop
        self._core = core
        self._writer = writer
        self._bytes_writer = writer if isinstance(writer, BytesWriter) else None
        self._direct = writer if isinstance(writer, DirectWriter) and self._bytes_writer is not None else None
        self._handle = handle
        # A worker hands an answer it cannot write to the loop as bytes: a writer of bytes only.
        self._route = route if self._bytes_writer is not None else None
        self._budget_limit = budget_limit
        self._read_sizes = read_sizes
        self._gate = gate
        self._buffers = buffers
        self._on_failure = on_failure
        self._label = label
        #: The connection's memory budget (see :mod:`.budget`).
        self.budget = MemoryBudget(budget_limit())
        self._table = InFlight(max_in_flight, on_slot_free=self._slot_freed)
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def in_flight(self) -> int:
        """Requests being answered: taken, and their answer not yet being written."""
        return self._table.answering

    @property
    def answers_on_threads(self) -> bool:
        """Whether a worker or the reading thread may write an answer itself (the transport allows it)."""
        return self._direct is not None and self._route is not None

    # -- taking a request -----------------------------------------------------------------------

    def take(self, request: JSONRPCRequest, where: Where) -> Route | Callable[[], None]:
        """Take *request* where it was read; what became of it.

        On the reading thread: a callable that answers it there, now, or
        :attr:`Route.LOOP` (hand it to the loop, in order). On the loop:
        :attr:`Route.BUSY` (not taken: answer :meth:`refusal` at once), or the
        route it is on its way by.
        """
        method, params = request.method, request.params
        route = self._route(method) if self._route is not None else None
        estimate = self._estimate(method, params)
        used, waiting = self.budget.snapshot()
        limit = self.budget.limit = self._budget_limit()
        core = self._core
        state = DeskState(
            closing=self._closing,
            core_ready=core is None or core.ready,
            core_gone=core is not None and core.gone,
            executor_open=route is not None,
            writes_directly=self._direct is not None,
            in_flight=len(self._table),
            free_slots=self._table.free_slots,
            budget_used=used,
            budget_waiting=waiting,
            budget_limit=limit,
            grants_at_once=self.budget.would_grant(estimate) if where is Where.LOOP else used == 0,
            may_wait=self.budget.may_wait(held_by(params)) if where is Where.LOOP else True,
            gate_armed=self._gate is not None and self._gate.armed,
        )
        decided = decide(method, where, state, estimate)
        if decided is Route.HERE:
            assert route is not None
            return self._here(request, route[1])
        if decided in (Route.LOOP, Route.BUSY):
            return decided
        if self._gate is not None:
            self._gate.activity()
        if decided is Route.CLOSED:
            self._task(request, None, closed=True)
        elif decided is Route.WORKER:
            assert route is not None
            self._worker(request, estimate, route)
        else:
            reservation = self.budget.request(estimate, held=held_by(params))
            assert reservation is not None  # decide said it may wait
            self._task(request, reservation)
        return decided

    def refusal(self, request: JSONRPCRequest) -> JSONRPCError:
        """The answer to a request refused because too many others wait for memory."""
        error = RateLimited(
            "too many requests are waiting for memory on this connection; retry later",
            reason="memory_budget",
            path=_path_of(request),
            retryAfterMs=_BUDGET_RETRY_MS,
        )
        return JSONRPCError(
            jsonrpc="2.0", id=request.id, error=ErrorData.model_validate(to_jsonrpc_error(error))
        )

    def cancel(self, request_id: str | int) -> bool:
        """On the loop: the server cancelled *request_id*; whether it was on its way and still cancellable."""
        return self._table.cancel(request_id) is not None

    async def aclose(self) -> None:
        """Stop answering: drop every answer not yet being written; every slot and byte comes back."""
        self._closing = True
        for ticket in self._table.stop():
            self._finish(ticket)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- here: the reading thread ---------------------------------------------------------------

    def _here(
        self, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]
    ) -> Route | Callable[[], None]:
        ticket = self._table.add(request.id, request.method, Route.HERE)
        if ticket is None:  # closed meanwhile: the loop answers it
            return Route.LOOP
        self._table.run_now(ticket)  # alone: within every bound
        return functools.partial(self._answer_here, ticket, request, handle)

    def _answer_here(
        self, ticket: Ticket, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]
    ) -> None:
        data = self._encode(request, self._answer_of(request, handle))
        if not self._table.writing(ticket):
            release(data)
            self._table.finish(ticket)
        elif self._write_now(data):
            self._table.finish(ticket)  # no reservation: finished on this thread
        else:
            post(self._loop, self._write_later, ticket, data)

    # -- a worker -------------------------------------------------------------------------------

    def _worker(self, request: JSONRPCRequest, estimate: int, route: FilesRoute) -> None:
        submit, handle = route
        reservation = self.budget.request(estimate, held=held_by(request.params))
        ticket = self._table.add(request.id, request.method, Route.WORKER, reservation)
        if ticket is None or not self._table.run(ticket):
            # Closing, or a slot went to the reading thread meanwhile: the task's way waits for one.
            if ticket is not None:
                self._table.finish(ticket)
            self._task(request, reservation)
            return
        try:
            future = submit(self._run, ticket, request, handle)
        except RuntimeError:  # the pool is shut down: the task's way answers the refusal
            self._table.finish(ticket)
            self._task(request, reservation)
            return
        ticket.cancel_handle = functools.partial(self._cancel_future, ticket, future)

    def _cancel_future(self, ticket: Ticket, future: concurrent.futures.Future[Any]) -> None:
        if future.cancel():
            self._finish(ticket)  # it never runs: its slot and memory come back now

    def _run(
        self, ticket: Ticket, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]
    ) -> None:
        try:
            if ticket.dropped:
                return
            data = self._encode(request, self._answer_of(request, handle))
            if not self._table.writing(ticket):
                release(data)
            elif not self._write_now(data):
                post(self._loop, self._write_later, ticket, data)
                return
        except BaseException:
            log.exception("%s: unexpected failure answering %s", self._label, request.method)
        post(self._loop, self._finish, ticket)

    # -- a task on the loop ---------------------------------------------------------------------

    def _task(
        self, request: JSONRPCRequest, reservation: Reservation | None, *, closed: bool = False
    ) -> None:
        # A plain asyncio task, not a task group's: a request is the hot path, and anyio's
        # task and cancel scope cost more than the rest of its way on the loop.
        route = Route.CLOSED if closed else Route.TASK
        ticket = self._table.add(request.id, request.method, route, reservation)
        if ticket is None:
            if reservation is not None:
                reservation.release()
            return
        task = self._loop.create_task(self._answer_task(ticket, request, closed))
        ticket.cancel_handle = task.cancel
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._task_done, ticket))

    async def _answer_task(self, ticket: Ticket, request: JSONRPCRequest, closed: bool) -> None:
        reservation = ticket.reservation
        if reservation is not None:
            await reservation.wait()
        if closed:
            answer: _Answer = (
                "error",
                failure_answer(request, ClosedError("the connection is closed"), self._label),
            )
        else:
            if not await self._slot(ticket):
                return
            answer = await self._answer_async(request)
        if not self._table.writing(ticket):
            return
        if self._bytes_writer is None:
            await self._send(_message(request.id, answer))
            return
        data = self._encode(request, answer)
        if reservation is not None:
            reservation.resize(len(data))
        del answer  # only the encoded bytes wait for the writer
        await self._send_bytes(data)

    async def _answer_async(self, request: JSONRPCRequest) -> _Answer:
        try:
            return "result", await self._handle(request.method, request.params)
        except Exception as exc:
            return "error", failure_answer(request, exc, self._label)

    def _task_done(self, ticket: Ticket, task: asyncio.Task[None]) -> None:
        # Also for a task cancelled before it ran: its own code never did.
        self._tasks.discard(task)
        self._finish(ticket)
        if not task.cancelled():
            failure = task.exception()
            if failure is not None and self._on_failure is not None:
                self._on_failure(failure)

    async def _slot(self, ticket: Ticket) -> bool:
        """Wait for one of the connection's slots (first come, first served); ``False``: dropped meanwhile."""
        while not self._table.run(ticket):
            if ticket.dropped:
                return False
            waiter = self._loop.create_future()
            self._slot_waiters.append(waiter)
            if self._table.free_slots:  # freed between the try and the wait: try again
                waiter.cancel()
                continue
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_slot()  # the slot it was given goes to the next in line
                raise
        return True

    def _slot_freed(self) -> None:
        # Any thread; the common case (nobody waits) costs one check.
        if self._slot_waiters:
            post(self._loop, self._wake_slot)

    def _wake_slot(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # -- answering, whoever answers ---------------------------------------------------------------

    def _answer_of(self, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]) -> _Answer:
        try:
            return "result", handle(request.method, request.params)
        except Exception as exc:
            return "error", failure_answer(request, exc, self._label)

    def _encode(self, request: JSONRPCRequest, answer: _Answer) -> bytes | LentMessage:
        kind, body = answer
        try:
            pool = None if self._buffers is None else self._buffers()
            return encode_response(request.id, kind, body, buffers=pool)
        except ValueError:
            # Something JSON cannot carry (a lone surrogate in a name): never a dead connection.
            log.exception("%s: the answer to %s cannot be encoded as JSON", self._label, request.method)
            error = InternalError(
                f"the answer to {request.method} cannot be encoded as JSON", path=_path_of(request)
            )
            return encode_message({"jsonrpc": "2.0", "id": request.id, "error": to_jsonrpc_error(error)})

    def _write_now(self, data: bytes | LentMessage) -> bool:
        # A lent answer is a large one: never one the writer takes at once.
        return isinstance(data, bytes) and self._direct is not None and self._direct.write_now(data)

    def _write_later(self, ticket: Ticket, data: bytes | LentMessage) -> None:
        """On the loop: write an answer a thread could not write at once, then finish its ticket."""
        if self._closing:
            release(data)
            self._finish(ticket)
            return
        task = self._loop.create_task(self._send_later(ticket, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_later(self, ticket: Ticket, data: bytes | LentMessage) -> None:
        try:
            if ticket.reservation is not None:
                ticket.reservation.resize(len(data))
            await self._send_bytes(data)
        finally:
            self._finish(ticket)

    def _finish(self, ticket: Ticket) -> None:
        """On the loop (or the reading thread for a ticket without memory): done; its bytes come back once."""
        if self._table.finish(ticket) and ticket.reservation is not None:
            ticket.reservation.release()

    async def _send(self, message: JSONRPCMessage) -> None:
        try:
            await self._writer.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("%s: transport closed; dropped a message", self._label)

    async def _send_bytes(self, data: bytes | LentMessage) -> None:
        """Write one encoded message; a lent one's buffer goes back once it is written (or not)."""
        assert self._bytes_writer is not None
        try:
            await self._bytes_writer.send_bytes(data.view if isinstance(data, LentMessage) else data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("%s: transport closed; dropped a message", self._label)
        finally:
            release(data)

    def _estimate(self, method: str, params: Any) -> int:
        read_default, read_max, list_max = self._read_sizes()
        return answer_estimate(
            method, params, read_default=read_default, read_max=read_max, list_max=list_max
        )


def _path_of(request: JSONRPCRequest) -> str | None:
    path = (request.params or {}).get("path")
    return path if isinstance(path, str) else None


def _message(request_id: str | int, answer: _Answer) -> JSONRPCMessage:
    kind, body = answer
    if kind == "result":
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=body)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData.model_validate(body))
