"""The stream middleware between an MCP transport and mcp's ``ClientSession``.

mcp 2.3's ``ClientSession`` cannot carry SEP-1708 by itself: its typed models
drop the ``filesystemBrokering`` capability key, it answers every server→client
method it does not know with ``-32601``, and it has no way to send vendor
notifications. :class:`BrokerMiddleware` therefore sits *between* a transport's
``(read, write)`` stream pair and the session, where every JSON-RPC message
passes as a plain ``SessionMessage``::

    transport read ─┬─► files/* ──► the reading or a worker thread: core, answer ► transport write
                    └─► pump_in ──┬─► files/* ──► one task each ──► core ─┐
                                  ├─► roots/list (answered here)          │
                                  └─► everything else ──► ClientSession   │
    transport write ◄── pump_out ◄── ClientSession                        │
                    ◄── responses, notifications ◄────────────────────────┘

* ``initialize`` going out gets ``capabilities.roots = {"listChanged": true,
  "filesystemBrokering": true, "filesystemBrokeringFeatures": ["perPathConsent"]}``
  written into its raw params.
* ``files/*`` requests are answered through an async handler (the core
  connection's ``ahandle``), each in its own task, so a slow read or a pending
  consent never holds up another request. At most ``max_in_flight`` of one
  connection run at once (the others wait their turn), so that one server
  cannot occupy every worker thread the broker shares between connections. A
  failure is answered as the core maps it
  (:func:`~jupyter_fsbroker.core.errors.to_files_error`: a connection closed
  under the request is ``connection_closed``); only the unexpected is logged
  here, and answered ``-32603`` with a summary. A server's
  ``notifications/cancelled`` for one of them stops the task and nothing is sent.
* Where the transport allows it (the project's stdio pipes: a reader that
  shows each message as it is read, a writer that takes a whole answer from
  any thread) and ``route_files`` gives a worker thread, a ``files/*`` request
  whose slot and memory are free at once skips the loop altogether: the
  worker decides it and writes its answer, and the loop only takes back the
  slot and the memory afterwards (:mod:`.threaded`). Where the reader also
  reads on threads of its own (``read_on_thread``), a request that is alone on
  its connection is answered by the thread that read it, without a worker.
  Every other request (a consent, one that must wait, any over HTTP) goes the
  task's way.
* ``roots/list`` is answered with what a :class:`RootsProvider` says (see
  :mod:`.roots_offer`), computed as the request is read, so that whatever the
  server sends next finds its consequences (a notice) in place.
* A :class:`~.roots_gate.RootsGate`, if given, is told when roots are offered
  (``initialized`` and ``roots/list_changed`` going out, if the answer would
  hand over locations: a server told names only needs no head start), when
  the server speaks, asks ``roots/list`` and gets its answer; the client
  awaits it before tool calls, so that a call does not race the server's
  fetch of the roots.
* The server's answer to ``initialize`` is shown to ``on_initialize_result``
  before the session sees it, so the client can prepare (name the connection)
  before ``notifications/initialized`` lets the server send requests.
* A message the transport could not read (a
  :class:`~.framing.MalformedMessage`: not JSON, or JSON that is not
  a valid request) is answered here with its ``-32700`` / ``-32600`` error, so
  every request gets exactly one answer and the connection goes on.
* Answers are bounded in bytes by a :class:`~.budget.MemoryBudget`: a
  ``files/*`` request waits until its estimated answer fits, its answer is
  counted until it is written, and a request that finds too many others
  waiting is answered ``RATE_LIMITED`` at once. A transport that takes
  encoded messages (``send_bytes``: the project's own) gets each answer as
  JSON bytes, encoded once; any other gets a ``SessionMessage``.
* :meth:`BrokerMiddleware.notify` / :meth:`BrokerMiddleware.notify_threadsafe`
  queue client→server notifications (``notifications/roots/list_changed``,
  ``notifications/files/changed``); the thread-safe form only schedules a
  callback on the event loop and never blocks its caller.

The middleware runs on asyncio: each request is answered in a plain asyncio
task (cancelled with ``Task.cancel``; anyio's task groups and cancel scopes cost
more per request than the rest of its way through the loop); every other await
is anyio.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from ..core.buffers import BufferPool
from ..core.errors import InternalError, RateLimited, to_jsonrpc_error
from ..core.hop import post
from .desk.budget import MemoryBudget, Reservation, answer_estimate, held_by
from .framing import LentMessage, MalformedMessage, encode_message, encode_response, release
from .roots_gate import RootsGate
from .threaded import DirectWriter, FilesRoute, ThreadedAnswers, failure_answer

__all__ = [
    "BROKERING_FEATURES",
    "CHANGED_NOTIFICATION",
    "DEFAULT_MAX_IN_FLIGHT",
    "FILES_PREFIX",
    "PER_PATH_CONSENT",
    "ROOTS_CAPABILITY",
    "BrokerMiddleware",
    "FilesHandler",
    "MessageReader",
    "MessageWriter",
    "RootsProvider",
]

log = logging.getLogger(__name__)

#: The prefix of the server→client methods answered through the core.
FILES_PREFIX = "files/"

#: The client→server notification that carries a watch event (PROTOCOL.md).
CHANGED_NOTIFICATION = "notifications/files/changed"

#: The key of ``capabilities.roots`` listing the optional parts of PROTOCOL.md a client implements.
BROKERING_FEATURES = "filesystemBrokeringFeatures"

#: The feature of a client that takes per-path items in ``files/consent`` (the core does).
PER_PATH_CONSENT = "perPathConsent"

#: What ``capabilities.roots`` of the outgoing ``initialize`` carries (PROTOCOL.md).
ROOTS_CAPABILITY: dict[str, Any] = {
    "listChanged": True,
    "filesystemBrokering": True,
    BROKERING_FEATURES: [PER_PATH_CONSENT],
}

#: Answers one ``files/*`` request: ``(method, params) -> result``, raising ``FilesError``.
FilesHandler = Callable[[str, Any], Awaitable[dict[str, Any]]]


class RootsProvider(Protocol):
    """What answers ``roots/list`` (:class:`~.roots_offer.RootsOffer`); called on the event loop."""

    def answer(self) -> dict[str, Any]:
        """The result of the ``roots/list`` the server just sent."""
        ...

    def located(self) -> bool:
        """Whether that result would now hand over any root's ``file://`` location."""
        ...


class MessageReader(Protocol):
    """The read side of a transport: what the transports of :mod:`.transports` (or mcp's) yield first."""

    def __aiter__(self) -> AsyncIterator[SessionMessage | Exception]: ...


class MessageWriter(Protocol):
    """The write side of a transport."""

    async def send(self, item: SessionMessage, /) -> None: ...


@runtime_checkable
class BytesWriter(Protocol):
    """A write side that also takes a message already encoded as JSON (the project's transports)."""

    async def send_bytes(self, data: bytes | memoryview, /) -> None: ...


#: How many ``files/*`` requests of one connection are handled at once, by default.
DEFAULT_MAX_IN_FLIGHT = 16

#: The default memory budget of one connection's answers, in bytes (see :mod:`.budget`).
DEFAULT_MEMORY_BUDGET = 32 * 1024 * 1024

# How long a request refused for want of memory is told to wait before trying again.
_BUDGET_RETRY_MS = 100

# Client→server notifications queued at once before they wait for the transport;
# beyond that, watch events are dropped (and logged) rather than piling up.
_OUTBOX_SIZE = 10_000

_Stream = MemoryObjectSendStream[SessionMessage | Exception]
_Sizes = tuple[int, int, int]
_INITIALIZED = "notifications/initialized"
_ROOTS_CHANGED = "notifications/roots/list_changed"
_ClosedErrors = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class BrokerMiddleware:
    """Answers ``files/*`` and ``roots/list``, adds the capability, sends notifications.

    Parameters
    ----------
    read_stream, write_stream
        The transport's streams (as yielded by the project's transports in
        :mod:`.transports`, or by mcp's ``stdio_client`` and
        ``streamable_http_client``).
    handle_files
        Awaited for each ``files/*`` request with ``(method, params)``; returns
        the result or raises :class:`~jupyter_fsbroker.core.errors.FilesError`.
    roots
        Answers each ``roots/list``; says whether locations are offered.
    on_transport_closed
        Called once, on the event loop, when the transport's read side ends
        (the server exited or went away).
    label
        Names the connection in log messages.
    max_in_flight
        How many ``files/*`` requests of this connection are handled at once.
    memory_budget
        Bytes that this connection's answers may hold while they are produced
        and until they are written (see :mod:`.budget`), or a callable
        returning it (read for every request, so a change applies at once).
    read_sizes
        ``(default, maximum)`` length of a ``files/read`` and the most entries
        of a ``files/list``, for estimating answers (the core's limits), or a
        callable returning them.
    roots_gate
        Told about the roots' exchange (see :mod:`.roots_gate`).
    on_initialize_result
        Called on the event loop with the raw result of ``initialize`` before
        the session sees it.
    route_files
        ``route_files(method)``: where a ``files/*`` request may be answered
        off the loop (see :mod:`.threaded`), or ``None`` for the task's way.
    buffers
        Returns what lends the buffers large answers are encoded in (see
        :mod:`.framing`; the core connection's, once there is one).

    Notes
    -----
    Enter :meth:`attach` (an async context manager) in the task that owns the
    connection; it yields the ``(read, write)`` streams to give
    ``ClientSession``. Leaving it stops every pump and every request still
    being answered.
    """

    def __init__(
        self,
        read_stream: MessageReader,
        write_stream: MessageWriter,
        *,
        handle_files: FilesHandler,
        roots: RootsProvider,
        on_transport_closed: Callable[[], None] | None = None,
        label: str = "",
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        memory_budget: int | Callable[[], int] = DEFAULT_MEMORY_BUDGET,
        read_sizes: _Sizes | Callable[[], _Sizes] = (1024 * 1024, 2 * 1024 * 1024, 10_000),
        roots_gate: RootsGate | None = None,
        on_initialize_result: Callable[[dict[str, Any]], None] | None = None,
        route_files: Callable[[str], FilesRoute | None] | None = None,
        buffers: Callable[[], BufferPool | None] | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._budget_limit = memory_budget if callable(memory_budget) else (lambda: memory_budget)
        self._read_sizes = read_sizes if callable(read_sizes) else (lambda: read_sizes)
        #: The connection's memory budget (see :mod:`.budget`).
        self.budget = MemoryBudget(self._budget_limit())
        self._bytes_writer = write_stream if isinstance(write_stream, BytesWriter) else None
        self._malformed = 0
        self._read = read_stream
        self._write = write_stream
        self._handle_files = handle_files
        self._roots = roots
        self._on_transport_closed = on_transport_closed
        self._label = label
        self._max_in_flight = max_in_flight
        self._gate = roots_gate
        self._on_initialize_result = on_initialize_result
        self._route_files = route_files
        self._buffers = buffers
        self._threaded: ThreadedAnswers | None = None
        self._slots: anyio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._outbox: MemoryObjectSendStream[SessionMessage] | None = None
        # The requests being answered, by id: the ones a server may still cancel.
        self._in_flight: dict[RequestId, asyncio.Task[None]] = {}
        # Every answering task, cancellable or not (stopped when the middleware closes).
        self._tasks: set[asyncio.Task[None]] = set()
        self._dropped: set[asyncio.Task[None]] = set()  # cancelled by the server: never answered
        self._task_failure: BaseException | None = None
        self._initialized = False
        self._closing = False
        self._initialize_id: RequestId | None = None
        #: The protocol version proposed in the outgoing ``initialize``.
        self.requested_version: str | None = None
        #: The protocol version in the server's answer to ``initialize`` (whatever it is).
        self.answered_version: str | None = None
        #: Set when the transport's read side ends (the server exited or went away).
        self.transport_closed = anyio.Event()

    # -- public ---------------------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        """Whether ``notifications/initialized`` has gone out (notifications are sent from then on)."""
        return self._initialized

    @property
    def in_flight(self) -> int:
        """The number of ``files/*`` requests being answered."""
        threaded = self._threaded
        return len(self._in_flight) + (0 if threaded is None else threaded.count)

    @property
    def malformed(self) -> int:
        """How many messages from the server could not be read (each was answered when it was a request)."""
        return self._malformed

    @asynccontextmanager
    async def attach(
        self,
    ) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
    ]:
        """Run the pumps; yield the ``(read_stream, write_stream)`` pair for ``ClientSession``."""
        self._loop = asyncio.get_running_loop()
        to_session, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        session_write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        outbox, outbox_reader = anyio.create_memory_object_stream[SessionMessage](_OUTBOX_SIZE)
        self._outbox = outbox
        # Fast acquire: a free slot costs no loop turn (a request's own await follows at once).
        self._slots = anyio.Semaphore(self._max_in_flight, fast_acquire=True)
        self._offer_threads()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._pump_in, to_session)
                tg.start_soon(self._pump_out, from_session)
                tg.start_soon(self._drain_outbox, outbox_reader)
                try:
                    yield session_read, session_write
                finally:
                    self._closing = True
                    tg.cancel_scope.cancel()
        finally:
            self._closing = True
            self._tg = None
            with anyio.CancelScope(shield=True):
                await self._stop_answering()
            for stream in (to_session, session_read, session_write, from_session, outbox, outbox_reader):
                stream.close()
        if self._task_failure is not None:
            raise self._task_failure

    def notify(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Queue a client→server notification; call on the event loop.

        Returns
        -------
        bool
            Whether it was queued. Nothing is sent before the handshake has
            completed or once the middleware is closing; a full queue drops the
            notification (logged).
        """
        if not self._initialized or self._closing or self._outbox is None:
            return False
        if params is None:
            message = JSONRPCNotification(jsonrpc="2.0", method=method)
        else:
            message = JSONRPCNotification(jsonrpc="2.0", method=method, params=params)
        try:
            self._outbox.send_nowait(SessionMessage(message))
        except anyio.WouldBlock:
            log.warning("%s: too many notifications waiting; dropped a %s", self._label, method)
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        if method == _ROOTS_CHANGED:
            self._roots_offered()  # from now on, not once written: a call queued next must see it
        return True

    def notify_threadsafe(self, method: str, params: dict[str, Any] | None = None) -> None:
        """:meth:`notify` from any thread: schedules it on the loop and returns at once."""
        loop = self._loop
        if loop is None or self._closing:
            return
        post(loop, self.notify, method, params)  # a closed loop: the connection is gone anyway

    # -- inbound --------------------------------------------------------------------------------

    def _offer_threads(self) -> None:
        """Let the transport hand ``files/*`` requests to worker threads, where both of its sides can."""
        set_intercept = getattr(self._read, "set_intercept", None)
        if self._route_files is None or set_intercept is None or not isinstance(self._write, DirectWriter):
            return
        assert self._loop is not None
        self._threaded = ThreadedAnswers(
            self._loop,
            self._write,
            encode=self._encode,
            finish=self._threaded_done,
            write_later=self._write_later,
            label=self._label,
        )
        set_intercept(self._take)
        read_on_thread = getattr(self._read, "read_on_thread", None)
        if read_on_thread is not None:
            read_on_thread(self._take_here)

    def _take_here(self, item: SessionMessage) -> Callable[[], None] | None:
        """On the transport's reading thread: what answers *item* there, or ``None`` (see :mod:`.threaded`).

        Only a ``files/*`` request the worker way would take, read while the
        connection has nothing else on its way (no request, no answer being
        written, no memory held, no offer of roots waiting for activity), and
        whose answer the empty budget grants at once.
        """
        message = item.message
        if not isinstance(message, JSONRPCRequest) or not message.method.startswith(FILES_PREFIX):
            return None
        threaded, route_files, slots, budget = self._threaded, self._route_files, self._slots, self.budget
        if (
            self._closing
            or threaded is None
            or route_files is None
            or slots is None
            or threaded.count
            or self._tasks
            or budget.used
            or budget.waiting
            or (self._gate is not None and self._gate.armed)
        ):
            return None
        read_default, read_max, list_max = self._read_sizes()
        estimate = answer_estimate(
            message.method, message.params, read_default=read_default, read_max=read_max, list_max=list_max
        )
        if estimate > self._budget_limit():
            return None
        route = route_files(message.method)
        if route is None:
            return None
        return threaded.take_here(message, route[1])

    def _take(self, item: SessionMessage) -> bool:
        """On the loop, as the transport reads *item*: whether it goes to a worker thread (it then has).

        Only a ``files/*`` request whose slot and memory are free at once, and
        whose connection can answer it without the loop (not a consent), goes
        this way; anything else is left to the pump.
        """
        message = item.message
        if not isinstance(message, JSONRPCRequest) or not message.method.startswith(FILES_PREFIX):
            return False
        slots, threaded, route_files = self._slots, self._threaded, self._route_files
        if self._closing or slots is None or threaded is None or route_files is None or slots.value < 1:
            return False
        route = route_files(message.method)
        if route is None:
            return False
        reservation = self._reserve(message)
        if reservation is None:
            return False  # the pump answers RATE_LIMITED
        if self._gate is not None:
            self._gate.activity()
        if not reservation.granted:
            self._start(message, reservation)  # it waits for memory on the loop's way
            return True
        slots.acquire_nowait()
        if threaded.start(message, reservation, route):
            return True
        slots.release()
        self._start(message, reservation)
        return True

    def _threaded_done(self, reservation: Reservation) -> None:
        reservation.release()
        if self._slots is not None:
            self._slots.release()

    def _write_later(
        self, data: bytes | LentMessage, reservation: Reservation | None, then: Callable[[], None]
    ) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._send_later(data, reservation, then))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_later(
        self, data: bytes | LentMessage, reservation: Reservation | None, then: Callable[[], None]
    ) -> None:
        try:
            if reservation is not None:
                reservation.resize(len(data))
            await self._send_bytes(data)
        finally:
            then()

    async def _pump_in(self, to_session: _Stream) -> None:
        ended = False  # by the transport (not by the session going away, nor by cancellation)
        try:
            async with to_session:
                async for item in self._read:
                    if isinstance(item, MalformedMessage):
                        await self._refuse_malformed(item)
                        continue
                    if isinstance(item, SessionMessage):
                        if self._gate is not None:
                            self._gate.activity()
                        message = item.message
                        if isinstance(message, JSONRPCRequest) and message.method.startswith(FILES_PREFIX):
                            reservation = self._reserve(message)
                            if reservation is None:
                                # Answered here, not in a task: a server that floods
                                # without reading its answers stops being read.
                                await self._send(self._budget_refusal(message))
                            else:
                                self._start(message, reservation)
                            continue
                        if self._intercept(message):
                            continue
                    try:
                        await to_session.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return  # the session is gone
            ended = True
        except _ClosedErrors:
            ended = True
        finally:
            if ended:
                self.transport_closed.set()
                if self._on_transport_closed is not None and not self._closing:
                    self._on_transport_closed()

    def _intercept(self, message: JSONRPCMessage) -> bool:
        """Handle *message* here if it is ours; return whether it was."""
        if isinstance(message, JSONRPCRequest):
            if message.method == "roots/list":
                if self._gate is not None:
                    self._gate.asked()
                self._start(message, answer=self._roots_answer(message))
                return True
        elif isinstance(message, JSONRPCResponse) and message.id == self._initialize_id:
            version = message.result.get("protocolVersion")
            self.answered_version = version if isinstance(version, str) else None
            if self._on_initialize_result is not None:
                self._on_initialize_result(message.result)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                if self._threaded is not None and self._threaded.cancel(request_id):
                    return True
                task = self._in_flight.pop(request_id, None)
                if task is not None:
                    self._dropped.add(task)  # even if the cancellation were swallowed
                    task.cancel()
                    return True
        return False

    async def _refuse_malformed(self, item: MalformedMessage) -> None:
        self._malformed += 1
        log.log(
            logging.WARNING if self._malformed == 1 else logging.DEBUG,
            "%s: the server sent a message that is not valid JSON-RPC (%s: %s)%s",
            self._label,
            item.reason,
            item,
            "; further ones are logged at debug level" if self._malformed == 1 else "",
        )
        if item.reply is not None:
            await self._send(item.reply)

    def _reserve(self, request: JSONRPCRequest) -> Reservation | None:
        """Ask the budget for the bytes of *request*'s answer; ``None``: too many wait already."""
        self.budget.limit = self._budget_limit()
        read_default, read_max, list_max = self._read_sizes()
        estimate = answer_estimate(
            request.method, request.params, read_default=read_default, read_max=read_max, list_max=list_max
        )
        return self.budget.request(estimate, held=held_by(request.params))

    def _budget_refusal(self, request: JSONRPCRequest) -> JSONRPCError:
        path = (request.params or {}).get("path")
        error = RateLimited(
            "too many requests are waiting for memory on this connection; retry later",
            reason="memory_budget",
            path=path if isinstance(path, str) else None,
            retryAfterMs=_BUDGET_RETRY_MS,
        )
        return JSONRPCError(
            jsonrpc="2.0", id=request.id, error=ErrorData.model_validate(to_jsonrpc_error(error))
        )

    def _start(
        self,
        request: JSONRPCRequest,
        reservation: Reservation | None = None,
        answer: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        # A plain asyncio task, not a task group's: a request is the hot path, and
        # anyio's task and cancel scope cost more than the rest of its way on the loop.
        # _stop_answering ends them with the middleware; a failure ends the connection.
        assert self._loop is not None
        task = self._loop.create_task(self._answer(request, reservation, answer))
        self._in_flight[request.id] = task
        self._tasks.add(task)
        task.add_done_callback(partial(self._answered, request.id, reservation))

    async def _answer(
        self,
        request: JSONRPCRequest,
        reservation: Reservation | None,
        answer: tuple[str, dict[str, Any]] | None,
    ) -> None:
        task = asyncio.current_task()
        try:
            if reservation is not None:
                await reservation.wait()
            if answer is None:
                answer = await self._reply_to(request)
            if task in self._dropped:
                return
            if self._in_flight.get(request.id) is task:
                # Too late to cancel: an answer cut off halfway would break the framing.
                del self._in_flight[request.id]
            if self._bytes_writer is not None:
                data = self._encode(request, answer)
                if reservation is not None:
                    reservation.resize(len(data))
                del answer  # only the encoded bytes wait for the writer
                await self._send_bytes(data)
            else:
                await self._send(_message(request.id, answer))
            if request.method == "roots/list" and self._gate is not None:
                self._gate.answered()
        finally:
            if reservation is not None:
                reservation.release()  # at once, not when the task's callbacks run

    def _answered(
        self, request_id: RequestId, reservation: Reservation | None, task: asyncio.Task[None]
    ) -> None:
        # Also for a task cancelled before it ran: its own finally never did.
        if reservation is not None:
            reservation.release()
        if self._in_flight.get(request_id) is task:
            del self._in_flight[request_id]
        self._tasks.discard(task)
        self._dropped.discard(task)
        if task.cancelled():
            return
        failure = task.exception()
        if failure is not None and self._task_failure is None:
            # As a task group would: the failure ends the connection and is raised by attach.
            self._task_failure = failure
            if self._tg is not None:
                self._tg.cancel_scope.cancel()

    async def _stop_answering(self) -> None:
        if self._threaded is not None:
            self._threaded.stop()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def _roots_answer(self, request: JSONRPCRequest) -> tuple[str, dict[str, Any]]:
        """``("result", result)`` or ``("error", error)`` for a ``roots/list``."""
        try:
            return "result", self._roots.answer()
        except Exception as exc:
            log.exception("%s: unexpected failure answering roots/list", self._label)
            return "error", self._internal_error(
                request, f"the client failed to answer roots/list ({type(exc).__name__})"
            )

    async def _reply_to(self, request: JSONRPCRequest) -> tuple[str, dict[str, Any]]:
        """``("result", result)`` or ``("error", error)`` for a ``files/*`` *request*."""
        method = request.method
        try:
            assert self._slots is not None
            async with self._slots:
                return "result", await self._handle_files(method, request.params)
        except Exception as exc:
            return "error", failure_answer(request, exc, self._label)

    def _encode(self, request: JSONRPCRequest, answer: tuple[str, dict[str, Any]]) -> bytes | LentMessage:
        kind, body = answer
        try:
            pool = None if self._buffers is None else self._buffers()
            return encode_response(request.id, kind, body, buffers=pool)
        except ValueError:
            # Something JSON cannot carry (a lone surrogate in a name): never a dead connection.
            log.exception("%s: the answer to %s cannot be encoded as JSON", self._label, request.method)
            error = self._internal_error(request, f"the answer to {request.method} cannot be encoded as JSON")
            return encode_message({"jsonrpc": "2.0", "id": request.id, "error": error})

    @staticmethod
    def _internal_error(request: JSONRPCRequest, message: str) -> dict[str, Any]:
        path = (request.params or {}).get("path")
        return to_jsonrpc_error(InternalError(message, path=path if isinstance(path, str) else None))

    async def _send(self, message: JSONRPCMessage) -> None:
        try:
            await self._write.send(SessionMessage(message))
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

    # -- outbound -------------------------------------------------------------------------------

    async def _pump_out(self, from_session: MemoryObjectReceiveStream[SessionMessage]) -> None:
        try:
            async with from_session:
                async for item in from_session:
                    message = item.message
                    if isinstance(message, JSONRPCRequest) and message.method == "initialize":
                        item = SessionMessage(self._with_capability(message), metadata=item.metadata)
                    await self._write.send(item)
                    if isinstance(message, JSONRPCNotification) and message.method == _INITIALIZED:
                        self._initialized = True
                        self._roots_offered()
        except _ClosedErrors:
            pass

    def _with_capability(self, request: JSONRPCRequest) -> JSONRPCRequest:
        params = dict(request.params or {})
        capabilities = dict(params.get("capabilities") or {})
        roots = dict(capabilities.get("roots") or {})
        roots.update(copy.deepcopy(ROOTS_CAPABILITY))  # no message shares the module's list
        capabilities["roots"] = roots
        params["capabilities"] = capabilities
        version = params.get("protocolVersion")
        self.requested_version = version if isinstance(version, str) else None
        self._initialize_id = request.id
        return JSONRPCRequest(jsonrpc="2.0", id=request.id, method=request.method, params=params)

    async def _drain_outbox(self, outbox: MemoryObjectReceiveStream[SessionMessage]) -> None:
        try:
            async with outbox:
                async for item in outbox:
                    await self._write.send(item)
        except _ClosedErrors:
            pass

    def _roots_offered(self) -> None:
        if self._gate is not None:
            self._gate.offered(self._roots.located())


def _message(request_id: RequestId, answer: tuple[str, dict[str, Any]]) -> JSONRPCMessage:
    kind, body = answer
    if kind == "result":
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=body)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData.model_validate(body))
