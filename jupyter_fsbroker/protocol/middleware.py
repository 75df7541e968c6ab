"""The stream middleware between an MCP transport and mcp's ``ClientSession``.

mcp 2.3's ``ClientSession`` cannot carry SEP-1708 by itself: its typed models
drop the ``filesystemBrokering`` capability key, it answers every server→client
method it does not know with ``-32601``, and it has no way to send vendor
notifications. :class:`BrokerMiddleware` therefore sits *between* a transport's
``(read, write)`` stream pair and the session, where every JSON-RPC message
passes as a plain ``SessionMessage``::

    transport read ─┬─► files/* (read on the transport's thread, or on the loop) ──► the desk
                    └─► pump_in ──┬─► files/* ──► the desk ──► here, a worker or a task ─► write
                                  ├─► roots/list (answered here)
                                  └─► everything else ──► ClientSession
    transport write ◄── pump_out ◄── ClientSession
                    ◄── answers, notifications

The middleware is MCP plumbing only:

* ``initialize`` going out gets ``capabilities.roots = {"listChanged": true,
  "filesystemBrokering": true, "filesystemBrokeringFeatures": ["perPathConsent"]}``
  written into its raw params.
* Every ``files/*`` request goes to the connection's
  :class:`~.desk.desk.FilesDesk`, which decides who answers it (the reading
  thread, a worker, a task on the loop; or a refusal at once), holds it in its
  one in-flight table, bounds its memory and answers it with the core's own
  error mapping (see :mod:`.desk`). How it gets there (from the transport's
  reading thread or from the pump) is :mod:`.files_intake`; a server's
  ``notifications/cancelled`` for a ``files/*`` request goes to the desk, any
  other to the session.
* ``roots/list`` is answered by the connection's
  :class:`~.roots_exchange.RootsExchange` with what a :class:`RootsProvider`
  says (see :mod:`.roots_offer`); the exchange tells a
  :class:`~.roots_gate.RootsGate`, if given, when roots are offered
  (``initialized`` and ``roots/list_changed`` going out), when the server
  speaks, asks ``roots/list`` and gets its answer; the client awaits the gate
  before tool calls, so that a call does not race the server's fetch of the roots.
* The server's answer to ``initialize`` is shown to ``on_initialize_result``
  before the session sees it, so the client can prepare (name the connection)
  before ``notifications/initialized`` lets the server send requests.
* A message the transport could not read (a
  :class:`~.framing.MalformedMessage`: not JSON, or JSON that is not
  a valid request) is answered here with its ``-32700`` / ``-32600`` error, so
  every request gets exactly one answer and the connection goes on.
* :meth:`BrokerMiddleware.notify` / :meth:`BrokerMiddleware.notify_threadsafe`
  queue client→server notifications (``notifications/roots/list_changed``,
  ``notifications/files/changed``); the thread-safe form only schedules a
  callback on the event loop and never blocks its caller.

The middleware runs on asyncio; every await is anyio's.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, RequestId

from ..core.hop import post
from ..core.limits import Limits
from ..wire.brokering import BROKERING_FEATURES, PER_PATH_CONSENT, roots_capability
from ..wire.methods import CHANGED_NOTIFICATION, FILES_PREFIX
from ..wire.modern import CONTINUATION, ROUTE_HEADER, split_route
from .desk.budget import MemoryBudget
from .desk.desk import FilesHandler
from .files_batches import EXTENSION, FEATURES
from .files_intake import FilesCore, FilesIntake, is_files_request
from .framing import MalformedMessage
from .roots_exchange import RootsExchange, RootsProvider
from .roots_gate import RootsGate
from .transports.message_streams import LendingWriter, MessageReader, MessageWriter

__all__ = [
    "BROKERING_FEATURES",
    "CHANGED_NOTIFICATION",
    "DEFAULT_MAX_IN_FLIGHT",
    "FILES_PREFIX",
    "PER_PATH_CONSENT",
    "ROOTS_CAPABILITY",
    "BrokerMiddleware",
    "FilesCore",
    "FilesHandler",
    "MessageReader",
    "MessageWriter",
    "RootsProvider",
]

log = logging.getLogger(__name__)

#: What ``capabilities.roots`` of the outgoing ``initialize`` carries (PROTOCOL.md).
ROOTS_CAPABILITY: dict[str, Any] = roots_capability()


#: How many ``files/*`` requests of one connection are handled at once, by default.
DEFAULT_MAX_IN_FLIGHT = Limits.max_in_flight

# Client→server notifications queued at once before they wait for the transport;
# beyond that, watch events are dropped (and logged) rather than piling up.
_OUTBOX_SIZE = 10_000

_Stream = MemoryObjectSendStream[SessionMessage | Exception]
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
    core
        The broker side as the desk sees it (:class:`FilesCore`; the connection's
        :class:`~.desk.core_slot.CoreSlot`): it answers ``files/*`` and says the limits.
    roots
        Answers each ``roots/list``; says whether locations are offered.
    on_transport_closed
        Called once, on the event loop, when the transport's read side ends
        (the server exited or went away).
    label
        Names the connection in log messages.
    max_in_flight
        How many ``files/*`` requests of this connection are handled at once.
    roots_gate
        Told about the roots' exchange (see :mod:`.roots_gate`).
    on_initialize_result
        Called on the event loop with the raw result of ``initialize`` before
        the session sees it.

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
        core: FilesCore,
        roots: RootsProvider,
        on_transport_closed: Callable[[], None] | None = None,
        label: str = "",
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        roots_gate: RootsGate | None = None,
        on_initialize_result: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._core = core
        self._malformed = 0
        self._read = read_stream
        self._write = write_stream
        self._roots = RootsExchange(roots, roots_gate, send=self._send, on_failure=self._failed, label=label)
        self._on_transport_closed = on_transport_closed
        self._label = label
        self._max_in_flight = max_in_flight
        self._gate = roots_gate
        self._on_initialize_result = on_initialize_result
        self._files: FilesIntake | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._outbox: MemoryObjectSendStream[SessionMessage] | None = None
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
        return 0 if self._files is None else self._files.in_flight

    @property
    def budget(self) -> MemoryBudget:
        """The connection's memory budget (see :mod:`.desk.budget`), once :meth:`attach` is entered."""
        assert self._files is not None, "the middleware is not attached"
        return self._files.budget

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
        self._files = FilesIntake(
            self._loop,
            self._write,
            self._core,
            max_in_flight=self._max_in_flight,
            gate=self._gate,
            on_failure=self._failed,
            label=self._label,
        )
        self._files.offer_reads(self._read)
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
                await self._files.aclose()
                await self._roots.aclose()
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
            self._roots.offered()  # from now on, not once written: a call queued next must see it
        return True

    def notify_threadsafe(self, method: str, params: dict[str, Any] | None = None) -> None:
        """:meth:`notify` from any thread: schedules it on the loop and returns at once."""
        loop = self._loop
        if loop is None or self._closing:
            return
        post(loop, self.notify, method, params)  # a closed loop: the connection is gone anyway

    # -- inbound --------------------------------------------------------------------------------

    def _failed(self, failure: BaseException) -> None:
        # As a task group would: the failure ends the connection and is raised by attach.
        if self._task_failure is None:
            self._task_failure = failure
            if self._tg is not None:
                self._tg.cancel_scope.cancel()

    async def _pump_in(self, to_session: _Stream) -> None:
        ended = False  # by the transport (not by the session going away, nor by cancellation)
        try:
            async with to_session:
                async for item in self._read:
                    if isinstance(item, MalformedMessage):
                        await self._refuse_malformed(item)
                        continue
                    if isinstance(item, SessionMessage):
                        self._roots.activity()
                        message = item.message
                        if is_files_request(message):
                            assert self._files is not None
                            refusal = self._files.take_on_loop(message)
                            if refusal is not None:
                                # Answered here, not in a task: a server that floods
                                # without reading its answers stops being read.
                                await self._send(refusal)
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
                self._roots.answer(message)
                return True
        elif isinstance(message, JSONRPCResponse) and message.id == self._initialize_id:
            version = message.result.get("protocolVersion")
            self.answered_version = version if isinstance(version, str) else None
            if self._on_initialize_result is not None:
                self._on_initialize_result(message.result)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            return self._files is not None and self._files.cancel(message.params)
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

    async def _send(self, message: JSONRPCMessage) -> None:
        try:
            await self._write.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("%s: transport closed; dropped a message", self._label)

    # -- outbound -------------------------------------------------------------------------------

    async def _pump_out(self, from_session: MemoryObjectReceiveStream[SessionMessage]) -> None:
        try:
            async with from_session:
                async for item in from_session:
                    message = item.message
                    if isinstance(message, JSONRPCRequest) and message.method == "initialize":
                        item = SessionMessage(self._with_capability(message), metadata=item.metadata)
                    elif isinstance(message, JSONRPCRequest) and message.method == "tools/call":
                        item = _routed(item, message)
                        if isinstance(self._write, LendingWriter):
                            # A continuation carries megabytes of answers: encoded in the
                            # connection's buffers, as the legacy wire's answers are.
                            await self._write.send_lending(item, self._core.buffers())
                            continue
                    await self._write.send(item)
                    if isinstance(message, JSONRPCNotification) and message.method == _INITIALIZED:
                        self._initialized = True
                        self._roots.offered()
        except _ClosedErrors:
            pass

    def _with_capability(self, request: JSONRPCRequest) -> JSONRPCRequest:
        params = dict(request.params or {})
        capabilities = dict(params.get("capabilities") or {})
        roots = dict(capabilities.get("roots") or {})
        roots.update(copy.deepcopy(ROOTS_CAPABILITY))  # no message shares the module's list
        capabilities["roots"] = roots
        # The files extension is advertised on the handshake era too (PROTOCOL.md, "Identifier and
        # advertisement"); nothing else changes on that wire.
        extensions = dict(capabilities.get("extensions") or {})
        extensions.setdefault(EXTENSION, {"features": list(FEATURES)})
        capabilities["extensions"] = extensions
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


def _routed(item: SessionMessage, request: JSONRPCRequest) -> SessionMessage:
    """*item*, with the instance its continuation names in the route header (PROTOCOL.md, "Routing
    a call to the instance that holds it"): a proxy routes on a header, not on a body."""
    meta = (request.params or {}).get("_meta")
    ours = meta.get(EXTENSION) if isinstance(meta, dict) else None
    token = ours.get(CONTINUATION) if isinstance(ours, dict) else None
    instance = split_route(token)[0] if isinstance(token, str) else None
    if instance is None:
        return item
    metadata = item.metadata if isinstance(item.metadata, ClientMessageMetadata) else None
    headers = dict((metadata.headers if metadata is not None else None) or {})
    headers[ROUTE_HEADER] = instance
    return SessionMessage(
        request,
        metadata=ClientMessageMetadata(
            resumption_token=metadata.resumption_token if metadata is not None else None,
            on_resumption_token_update=metadata.on_resumption_token_update if metadata is not None else None,
            headers=headers,
        ),
    )
