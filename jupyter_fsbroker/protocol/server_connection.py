"""One live connection to an MCP server: :class:`ServerConnection`.

Made by :func:`~.connector.connect` (or :func:`~.connector.open_connection`), it
owns the transport, the middleware and its desk (:mod:`.desk`) that answer
``files/*``, the MCP session, and one broker-side :class:`~jupyter_fsbroker.core.broker.Connection` (its own
grants, locks, watches and staged uploads) named as the user named the
connection, so consent prompts and the audit log name it as the user knows it;
what the server says about itself is in :attr:`ServerConnection.server_info`.
Without a name, the connection takes the server's own (``serverInfo.name``),
resolved from its answer to ``initialize`` before the server may send any
request.

What the server says meanwhile (its stderr over stdio, its MCP log messages
over any transport) goes to :attr:`ServerConnection.log`, in order, and to
Python logging under ``jupyter_fsbroker.server.<name>`` (:mod:`.voice`).

Roots: the server is told their names, and their locations only where the
user allows it (:mod:`.roots_offer`). A server that reads the locations fetches
them after the handshake, and nothing in MCP holds tool calls back meanwhile,
so a call is let through only once the roots are settled (briefly and
boundedly: see :mod:`.roots_gate`).

Threading
---------
Everything runs on the asyncio event loop that called :func:`connect`. The
connection's whole ``async with`` stack (transport, middleware, session) lives
in one long-lived task on that loop, which waits for a close request or for the
transport to end, so :meth:`ServerConnection.aclose` works from any task and
:meth:`ServerConnection.close` from any thread. Watch events (core dispatcher
thread) and root changes (whatever thread changed the roots) hop onto the loop
with ``call_soon_threadsafe``; they never block the thread they come from.

Results are plain JSON-able dicts in their wire spelling: nothing from ``mcp``
leaks to the layers above.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import anyio.lowlevel
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from .._version import __version__
from ..core.broker import Broker
from ..core.connection import Connection as CoreConnection
from ..core.consent import Consenter
from ..core.errors import BrokerError
from ..core.hop import post
from ..core.serverlog import ServerLog
from ..core.watch import ChangeEvent
from .client_errors import (
    ConnectError,
    ConnectionClosedError,
    ProtocolVersionError,
    ServerError,
    describe_failure,
    find_connect_error,
    innermost,
)
from .desk.core_slot import CoreSlot
from .middleware import CHANGED_NOTIFICATION, BrokerMiddleware
from .roots_gate import RootsGate, RootsGrace
from .roots_offer import RootsOffer
from .tools import list_tools
from .transports import Opener
from .validation import prepare_output_validation
from .voice import ServerVoice, clean_name, fallback_name

if TYPE_CHECKING:
    from ..sandbox import SandboxStatus

__all__ = ["CLIENT_INFO", "ConnectionState", "ServerConnection", "TransportKind"]

log = logging.getLogger(__name__)

#: How a connection reaches its server: a local command over stdio, or Streamable HTTP.
TransportKind = Literal["stdio", "http"]
#: Where a connection is in its life: ``connecting`` → ``open`` → ``closing`` → ``closed``.
ConnectionState = Literal["connecting", "open", "closing", "closed"]

#: How this client introduces itself in ``initialize``.
CLIENT_INFO = types.Implementation(name="jupyter_fsbroker", version=__version__)

# How long a failed call waits for the connection to finish closing, to name why.
_CLOSE_REASON_WAIT = 5.0

# Seconds a liveness probe after a dropped response waits for the ping.
_PROBE_TIMEOUT = 5.0

# Keep-alive pings left unanswered in a row after which the server counts as gone, and seconds
# the transport gets to shut down once the connection is closing (then it is cut off).
_SILENT_PINGS = 3
_TEARDOWN_TIMEOUT = 10.0

_TRANSPORT_NAMES = {"stdio": "stdio", "http": "HTTP"}

_VERSIONS = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)


# -- the connection -----------------------------------------------------------------------------


class ServerConnection:
    """One live connection from the broker to an MCP server.

    Created by :func:`~.connector.connect` (or :func:`~.connector.open_connection`); not meant to be
    instantiated directly.

    Attributes
    ----------
    name
        The connection's name: the one the user gave, or else the server's own
        (``serverInfo.name``, cleaned of control characters and cut to 64
        characters). The broker-side connection, consent prompts and audit
        records use it.
    transport
        ``"stdio"`` or ``"http"``.
    target
        The command line (stdio) or URL (HTTP, without user info or query), for display.
    broker
        The broker whose files this connection serves.
    log
        What the server said: its stderr lines (stdio) and MCP log messages, in order.
    roots_offer
        What the server is told of the roots (their names; their locations only
        where the user allows it), and the notice when it asked for more (see
        :mod:`.roots_offer`).
    """

    def __init__(
        self,
        broker: Broker,
        name: str | None,
        *,
        transport: TransportKind,
        target: str,
        opener: Opener,
        consenter: Consenter | None,
        keepalive: float | None,
        roots_grace: RootsGrace | None = None,
        sandbox: SandboxStatus | None = None,
        advertise_roots: bool | None = None,
    ) -> None:
        self.broker = broker
        #: Whether :attr:`name` came from the server (none was given).
        self.named_by_server = name is None
        self.name = name if name is not None else fallback_name(transport, target)
        self.transport: TransportKind = transport
        self.target = target
        #: stdio: whether the server runs confined, and how (``None``: over HTTP, it runs elsewhere).
        self.sandbox = sandbox
        self.log = ServerLog()
        self._opener = opener
        self._keepalive = keepalive
        self._loop = asyncio.get_running_loop()
        self._voice = ServerVoice(self.log, self.name)
        self._gate = RootsGate(roots_grace) if roots_grace is not None else None
        self.roots_offer = RootsOffer(broker, advertise=advertise_roots, sandbox=sandbox, label=self._label)
        self._slot = CoreSlot(
            broker, consenter=consenter, notify=self._on_change, on_request=self.roots_offer.files_used
        )
        if name is not None:
            self._slot.open(self.name)
        self._state: ConnectionState = "connecting"
        self._close_reason: str | None = None
        self._asked_reason: str | None = None  # set by close() before the broker side closes
        self._interrupted = False
        self._failure: BaseException | None = None
        self._server_info: dict[str, Any] = {}
        self._server_capabilities: dict[str, Any] = {}
        self._instructions: str | None = None
        self._protocol_version: str | None = None
        self._tools: tuple[dict[str, Any], ...] = ()
        self._session: ClientSession | None = None
        self._middleware: BrokerMiddleware | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<ServerConnection {self.name!r} {self.transport} {self._state}>"

    # -- what is known about the server --------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """``connecting``, ``open``, ``closing`` or ``closed``."""
        core = self._slot.connection
        if self._state == "open" and core is not None and core.closed:
            return "closing"  # the kill switch ended the broker side; the loop has yet to end the transport
        return self._state

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (``state == "closed"``)."""
        return self._state == "closed"

    @property
    def close_reason(self) -> str | None:
        """Why the connection ended (or is ending); ``None`` while it is open."""
        return self._close_reason

    @property
    def connection(self) -> CoreConnection:
        """The broker side of this connection: its grants, locks, watches, uploads."""
        core = self._slot.connection
        if core is None:
            raise ConnectionClosedError(f"the connection {self.name!r} has no broker side yet")
        return core

    @property
    def roots_gate(self) -> RootsGate | None:
        """What holds tool calls back while the server takes in the roots (``None``: nothing does)."""
        return self._gate

    @property
    def server_info(self) -> dict[str, Any]:
        """``serverInfo`` from the server's ``initialize`` result (``name``, ``version``, ...)."""
        return dict(self._server_info)

    @property
    def server_name(self) -> str | None:
        """The name the server gives itself (``serverInfo.name``)."""
        name = self._server_info.get("name")
        return name if isinstance(name, str) else None

    @property
    def server_version(self) -> str | None:
        """The version the server gives itself (``serverInfo.version``)."""
        version = self._server_info.get("version")
        return version if isinstance(version, str) else None

    @property
    def server_capabilities(self) -> dict[str, Any]:
        """The server's capabilities from ``initialize``, in wire spelling."""
        return dict(self._server_capabilities)

    @property
    def instructions(self) -> str | None:
        """The server's ``instructions``, if it gave any."""
        return self._instructions

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version (one of the handshake era's)."""
        return self._protocol_version

    @property
    def tools(self) -> tuple[dict[str, Any], ...]:
        """The server's tools in wire spelling (``name``, ``description``, ``inputSchema`` ...).

        Fetched at connect time and again whenever the server sends
        ``notifications/tools/list_changed``; :meth:`refresh_tools` re-fetches.
        Descriptions are cleaned of their docstring indentation
        (``inspect.cleandoc``), as servers often send them raw.
        """
        return self._tools

    # -- calls ---------------------------------------------------------------------------------

    async def refresh_tools(self) -> tuple[dict[str, Any], ...]:
        """Fetch the tool list again (every page) and return it.

        Raises
        ------
        ConnectionClosedError
            The connection is closed or closed during the call.
        ServerError
            The server answered ``tools/list`` with an error.
        """
        session = self._require_session("list tools")
        try:
            self._tools = await list_tools(session)
        except MCPError as exc:
            raise await self._call_error(exc, "tools/list", None) from None
        return self._tools

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Call the server's tool *name* and return its result.

        Parameters
        ----------
        name
            The tool's name.
        arguments
            Its arguments (a JSON object).
        timeout
            Seconds to wait for the result; ``None`` waits as long as it takes.
            On timeout the server is sent ``notifications/cancelled``.

        Returns
        -------
        dict
            The ``CallToolResult`` in wire spelling: ``content`` (a list of
            JSON content blocks), ``isError`` (always present; ``True`` when the
            tool reported a failure), and ``structuredContent`` / ``_meta`` when
            the server sent them. JSON-able as is.

        Raises
        ------
        ConnectionClosedError
            The connection is closed, or ended before the result arrived (the
            server exited or went away); the message says why.
        TimeoutError
            *timeout* elapsed.
        ServerError
            The server answered with a JSON-RPC error (unknown tool, bad arguments ...).

        Notes
        -----
        Right after connecting, or after the roots changed, the call first waits
        (briefly, at most ``RootsGrace.limit``) until the server has fetched the
        roots or shown it does not (see :mod:`.roots_gate`).
        """
        session = self._require_session(f"call tool {name!r}")
        if self._gate is not None:
            # A root changed just before, by this thread: its notification is queued on the
            # loop; let it go first, so that the gate knows.
            await anyio.lowlevel.checkpoint()
            if self._gate.armed:
                await self._gate.wait()
        try:
            result = await session.call_tool(
                name, dict(arguments) if arguments is not None else None, read_timeout_seconds=timeout
            )
        except MCPError as exc:
            raise await self._call_error(exc, f"tools/call {name!r}", timeout) from None
        except (ValidationError, RuntimeError) as exc:
            # A result that is not a CallToolResult, or structured content that
            # does not match the tool's output schema.
            raise ServerError(
                types.INTERNAL_ERROR, f"the server's result for tool {name!r} is not valid: {exc}"
            ) from None
        # ``resultType`` is a 2026-07-28 member the model fills in by default: not on this wire.
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})
        dumped.setdefault("isError", False)
        return dumped

    # -- closing -------------------------------------------------------------------------------

    def close(self, reason: str = "closed by the user") -> None:
        """Close the connection: the kill switch. Thread-safe; returns at once.

        The broker-side connection is closed immediately (every grant, lock,
        watch, staged upload and pending consent of this server ends now);
        the transport is torn down on the event loop right after (stdio: the
        server process is stopped; HTTP: the session is deleted). Await
        :meth:`wait_closed` (or use :meth:`aclose`) to know when that is done.

        Closing the broker side directly (``conn.connection.close()``, or
        ``broker.close()``) has the same effect.
        """
        self._asked_reason = self._asked_reason or reason
        self._slot.close(reason)
        post(self._loop, self._request_close, reason)  # a closed loop: nothing left to tear down

    async def aclose(self, reason: str = "closed by the user") -> None:
        """Close the connection (see :meth:`close`) and wait until the transport is down."""
        self._asked_reason = self._asked_reason or reason
        self._slot.close(reason)
        self._request_close(reason)
        await self.wait_closed()

    async def wait_closed(self) -> None:
        """Wait until the connection has ended, for whatever reason."""
        await self._done.wait()

    async def __aenter__(self) -> ServerConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the connection's task ----------------------------------------------------------------

    def postpone_deadline(self, seconds: float) -> None:
        """Give the handshake *seconds* more (a person is signing in meanwhile); nothing once open."""
        if not self._ready.done() and self._scope.deadline != math.inf:
            self._scope.deadline += seconds

    async def start(self, timeout: float | None) -> None:
        """Start the connection's task; wait until the handshake is done (what ``connect`` does).

        Raises
        ------
        ConnectError
            As :func:`.connector.connect`.
        """
        if timeout is not None:
            self._scope.deadline = anyio.current_time() + timeout
        self._task = self._loop.create_task(self._run(timeout), name=f"fsbroker-connection-{self.name}")
        try:
            await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            self._slot.close()
            self._request_close("connecting was cancelled")
            with anyio.CancelScope(shield=True):  # the teardown is bounded (stdio: a few seconds at most)
                await self._done.wait()
            raise

    async def _run(self, timeout: float | None) -> None:
        try:
            with self._scope:
                await self._serve()
        except Exception as exc:
            self._failure = exc
            if self._ready.done():
                log.warning("connection %r failed: %s", self.name, describe_failure(exc))
                if self._asked_reason is None:  # not closed on purpose: say what broke
                    self._close_reason = (
                        f"the {_TRANSPORT_NAMES[self.transport]} transport failed: {describe_failure(exc)}"
                    )
        finally:
            self._finish(timeout)

    async def _serve(self) -> None:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._opener(self._voice.stderr))
            middleware = BrokerMiddleware(
                read,
                write,
                core=self._slot,
                roots=self.roots_offer,
                on_transport_closed=self._transport_closed,
                label=f"connection {self.name!r}",
                max_in_flight=self.broker.config.limits.max_in_flight,
                roots_gate=self._gate,
                on_initialize_result=self._on_initialize_result,
            )
            session_read, session_write = await stack.enter_async_context(middleware.attach())
            self._middleware = middleware
            session = await stack.enter_async_context(
                ClientSession(
                    session_read,
                    session_write,
                    client_info=CLIENT_INFO,
                    message_handler=self._on_message,
                    logging_callback=self._voice.message,
                )
            )
            await self._handshake(session, middleware)
            self._tools = await self._initial_tools(session)
            if any("outputSchema" in tool for tool in self._tools):
                prepare_output_validation()
            self._session = session
            stack.callback(self.broker.roots.subscribe(self._roots_changed))
            stack.callback(self.broker.on_connections(self._connections_changed))
            self._connections_changed()  # closed while connecting?
            self._scope.deadline = math.inf
            self._state = "open"
            self._ready.set_result(None)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self._keepalive is not None:
                    tg.start_soon(self._keep_alive, session, self._keepalive)
                await self._stop.wait()
                self._state = "closing"
                tg.cancel_scope.cancel()
            self._tg = None

    async def _handshake(self, session: ClientSession, middleware: BrokerMiddleware) -> None:
        requested = LATEST_HANDSHAKE_VERSION
        try:
            result = await session.initialize()
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise ConnectError(
                    f"the server of {self.name!r} closed the connection during the handshake"
                ) from None
            offered = _supported_versions(exc.data)
            if exc.code == UNSUPPORTED_PROTOCOL_VERSION or offered:
                raise ProtocolVersionError(
                    f"the server of {self.name!r} refused MCP protocol version {requested}"
                    + (f" and supports only {', '.join(offered)}" if offered else "")
                    + f": jupyter_fsbroker needs the handshake era ({_VERSIONS}), the only one"
                    " with server-to-client requests",
                    requested=requested,
                    offered=offered,
                ) from None
            raise ConnectError(
                f"the server of {self.name!r} refused to initialize: {exc.message} (code {exc.code})"
            ) from None
        except RuntimeError:
            # ClientSession refuses an answer outside the handshake era's versions.
            version = middleware.answered_version
            if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
                raise
            raise ProtocolVersionError(
                f"the server of {self.name!r} answered with MCP protocol version {version}: "
                f"jupyter_fsbroker needs the handshake era ({_VERSIONS}), the only one with "
                "server-to-client requests",
                requested=requested,
                offered=(version,),
            ) from None
        self._protocol_version = result.protocol_version
        self._server_info = result.server_info.model_dump(by_alias=True, mode="json", exclude_none=True)
        self._server_capabilities = result.capabilities.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        self._instructions = result.instructions

    async def _initial_tools(self, session: ClientSession) -> tuple[dict[str, Any], ...]:
        if "tools" not in self._server_capabilities:
            return ()
        try:
            return await list_tools(session)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise ConnectError(
                    f"the server of {self.name!r} closed the connection after the handshake"
                ) from None
            log.warning("connection %r: the server refused tools/list: %s", self.name, exc.message)
            return ()

    def _finish(self, timeout: float | None) -> None:
        """Runs once the connection's task is done, however it ended."""
        self._state = "closed"
        self._session = None
        self._middleware = None
        self._slot.close()
        error: BaseException | None = None
        if not self._ready.done():
            error = self._quote_stderr(self._connect_error(timeout))
        if self._close_reason is None:
            if error is not None:
                self._close_reason = str(error)
            elif self._failure is not None:
                transport = _TRANSPORT_NAMES[self.transport]
                self._close_reason = f"the {transport} transport failed: {describe_failure(self._failure)}"
            else:
                self._close_reason = "the connection ended"
        if error is not None:
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved here, so an abandoned connect never warns
        self._done.set()

    def _quote_stderr(self, error: BaseException) -> BaseException:
        """*error*, quoting the last lines the server wrote on its stderr (they often say why)."""
        lines = [e.text for e in self.log.entries() if e.source == "stderr" and e.text.strip()]
        if type(error) is not ConnectError or not lines:
            return error
        tail = " | ".join(_short(line) for line in lines[-3:])
        return ConnectError(f"{error}; its stderr ended with: {tail}")

    def _connect_error(self, timeout: float | None) -> BaseException:
        failure = self._failure
        if failure is None:
            if self._interrupted:
                return ConnectionClosedError(
                    f"{self.name!r} was closed before it was connected ({self._close_reason})"
                )
            if self._scope.cancelled_caught and timeout is not None:
                return ConnectError(
                    f"{self.name!r} did not complete the MCP handshake within {timeout:g} s ({self.target})"
                )
            return ConnectError(
                f"the server of {self.name!r} ended the connection during the handshake ({self.target})"
            )
        own = find_connect_error(failure)
        if own is not None:
            return own
        leaf = innermost(failure)
        if self.transport == "stdio" and isinstance(leaf, OSError):
            return ConnectError(f"cannot start the server of {self.name!r} ({self.target}): {leaf}")
        if self.transport == "http" and isinstance(leaf, httpx2.HTTPError | OSError):
            return ConnectError(
                f"cannot reach the server of {self.name!r} at {self.target}: {describe_failure(leaf)}"
            )
        return ConnectError(f"connecting {self.name!r} ({self.target}) failed: {describe_failure(leaf)}")

    # -- events from elsewhere ----------------------------------------------------------------

    def _request_close(self, reason: str, *, interrupt: bool = True) -> None:
        """On the loop: end the connection's task (before or after the handshake).

        *interrupt* also stops a handshake in progress (a close by the user);
        without it, a handshake in progress fails on its own.
        """
        if self._done.is_set():
            return
        # Whatever the transport does next, the server's grants, locks, watches and uploads end now.
        self._slot.close()
        if self._close_reason is None:
            self._close_reason = reason
            self._interrupted = interrupt and not self._ready.done()
        if self._state == "open":
            self._state = "closing"
        if interrupt and not self._ready.done():
            self._scope.cancel()
        self._stop.set()
        # A transport wedged by a peer that died mid-stream must not keep the connection closing forever.
        self._scope.deadline = min(self._scope.deadline, self._loop.time() + _TEARDOWN_TIMEOUT)

    def _transport_closed(self) -> None:
        if self.transport == "stdio":
            self._request_close("the server process exited", interrupt=False)
        else:
            self._request_close("the server closed the connection", interrupt=False)

    def _on_change(self, event: ChangeEvent) -> None:
        """The core's watch dispatcher thread: forward one change, never block."""
        middleware = self._middleware
        if middleware is not None:
            middleware.notify_threadsafe(CHANGED_NOTIFICATION, event.to_params())

    def _roots_changed(self, generation: int) -> None:
        """Any thread: the roots changed."""
        del generation
        middleware = self._middleware
        if middleware is not None:
            middleware.notify_threadsafe("notifications/roots/list_changed")

    def _connections_changed(self) -> None:
        """Any thread: a broker-side connection opened or closed; if it is ours, end the transport."""
        core = self._slot.connection
        if core is not None and core.closed and not self._done.is_set():
            reason = self._asked_reason or "the broker closed the connection"
            post(self._loop, self._request_close, reason)  # a closed loop: nothing left to tear down

    def _label(self) -> str:
        return self.name

    def _on_initialize_result(self, result: dict[str, Any]) -> None:
        """On the loop, before the session sees the answer: name the connection after the server."""
        if self._slot.settled:
            return
        info = result.get("serverInfo")
        raw = info.get("name") if isinstance(info, dict) else None
        name = clean_name(raw) if isinstance(raw, str) else ""
        if name:
            self.name = name
            self._voice.rename(name)
        self._slot.open(self.name)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            log.warning("connection %r: the transport reported %s", self.name, describe_failure(message))
        elif isinstance(message, types.ToolListChangedNotification) and self._tg is not None:
            self._tg.start_soon(self._refresh_quietly)

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh_tools()
        except (BrokerError, TimeoutError) as exc:
            log.warning("connection %r: could not refresh the tool list: %s", self.name, exc)

    async def _keep_alive(self, session: ClientSession, interval: float) -> None:
        silent = 0
        while True:
            await anyio.sleep(interval)
            alive = await self._ping(session, max(interval, 10.0))
            if alive is False:
                return
            silent = silent + 1 if alive is None else 0
            if silent >= _SILENT_PINGS:  # or it would hold its locks and watches forever
                self._request_close(f"the server did not answer {silent} pings in a row")
                return

    async def _ping(self, session: ClientSession, timeout: float) -> bool | None:
        """Ping the server; close the connection if it is gone.

        Returns ``True`` (it answered), ``None`` (no answer within *timeout*) or
        ``False`` (it is gone: the connection is closing).
        """
        try:
            # The whole ping is bounded, not only the wait for its answer: a transport whose
            # writer is stuck on a dead peer never even starts that wait.
            with anyio.move_on_after(timeout):
                await session.send_request(
                    types.PingRequest(), types.EmptyResult, request_read_timeout_seconds=timeout
                )
                return True
        except MCPError as exc:
            if exc.code != REQUEST_TIMEOUT:
                if self._maybe_lost(exc):
                    # An HTTP 404 for our session id: the server forgot it (it restarted).
                    self._request_close(f"the server no longer knows the HTTP session ({exc.message})")
                else:
                    self._request_close(f"the server stopped answering ({exc.message})")
                return False
        log.warning("connection %r: the server did not answer a ping within %g s", self.name, timeout)
        return None

    def _maybe_lost(self, exc: MCPError) -> bool:
        """Whether *exc* may mean that the connection is gone (a ping tells)."""
        return exc.code == CONNECTION_CLOSED or (self.transport == "http" and exc.code == INVALID_REQUEST)

    # -- helpers -------------------------------------------------------------------------------

    def _require_session(self, what: str) -> ClientSession:
        session = self._session
        if session is None or self._state != "open":
            raise ConnectionClosedError(
                f"cannot {what}: the connection {self.name!r} is {self._state}"
                + (f" ({self._close_reason})" if self._close_reason else "")
            )
        return session

    async def _call_error(self, exc: MCPError, what: str, timeout: float | None) -> Exception:
        if exc.code == REQUEST_TIMEOUT:
            within = "" if timeout is None else f" within {timeout:g} s"
            return TimeoutError(f"{what} on {self.name!r} got no answer{within}")
        if not self._maybe_lost(exc):
            return ServerError(exc.code, exc.message, exc.data)
        # Either the connection is ending, or (HTTP) the response stream broke or the
        # server no longer knows our session: a ping tells whether it is still there.
        session = self._session
        if session is not None and not self._stop.is_set():
            alive = await self._ping(session, _PROBE_TIMEOUT)
            if alive:
                return ServerError(exc.code, f"{what}: {exc.message}", exc.data)
            if alive is None:  # the stream broke and it is silent: gone, or its transport wedged
                self._request_close(f"the server stopped answering (no answer within {_PROBE_TIMEOUT:g} s)")
        with anyio.move_on_after(_CLOSE_REASON_WAIT):
            await self._done.wait()
        return ConnectionClosedError(
            f"{what} failed: the connection {self.name!r} closed ({self._close_reason or 'connection lost'})"
        )


def _short(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _supported_versions(data: Any) -> tuple[str, ...]:
    if isinstance(data, Mapping):
        supported = data.get("supported")
        if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
            return tuple(supported)
    return ()
