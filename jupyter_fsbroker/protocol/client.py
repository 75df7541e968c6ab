"""Connect a broker to an MCP server over stdio or Streamable HTTP.

:func:`connect` starts one connection and returns a :class:`ServerConnection`
once the handshake is done; :func:`open_connection` is the same as an
``async with`` block. Each connection owns one broker-side
:class:`~jupyter_fsbroker.core.broker.Connection` (its own grants, locks,
watches and staged uploads) created under the name the user gave, so consent
prompts and the audit log name the connection as the user knows it; what the
server says about itself is in :attr:`ServerConnection.server_info`.

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
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import Any, Literal, TextIO

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from .. import __version__
from ..core.broker import Broker
from ..core.connection import Connection as CoreConnection
from ..core.consent import Consenter
from ..core.errors import BrokerError, ClosedError
from ..core.watch import ChangeEvent
from .middleware import CHANGED_NOTIFICATION, BrokerMiddleware, MessageReader, MessageWriter

__all__ = [
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionState",
    "ProtocolVersionError",
    "ServerConnection",
    "ServerError",
    "TransportKind",
    "connect",
    "open_connection",
]

log = logging.getLogger(__name__)

#: How a connection reaches its server: a local command over stdio, or Streamable HTTP.
TransportKind = Literal["stdio", "http"]
#: Where a connection is in its life: ``connecting`` → ``open`` → ``closing`` → ``closed``.
ConnectionState = Literal["connecting", "open", "closing", "closed"]

#: How this client introduces itself in ``initialize``.
CLIENT_INFO = types.Implementation(name="jupyter_fsbroker", version=__version__)

#: Default seconds for the transport to come up and the handshake to complete.
DEFAULT_CONNECT_TIMEOUT = 30.0

#: Default seconds between keep-alive pings on HTTP connections.
DEFAULT_KEEPALIVE = 30.0

# The HTTP client's timeouts: connecting and writing are bounded, reading is not
# (a tools/call's event stream may stay silent for as long as the tool runs;
# the keep-alive ping notices a server that went away).
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=None)

# How long a failed call waits for the connection to finish closing, to name why.
_CLOSE_REASON_WAIT = 5.0

# Seconds a liveness probe after a dropped response waits for the ping.
_PROBE_TIMEOUT = 5.0

_TRANSPORT_NAMES = {"stdio": "stdio", "http": "HTTP"}

_VERSIONS = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)


# -- errors -------------------------------------------------------------------------------------


class ConnectError(BrokerError, RuntimeError):
    """The connection could not be established (spawn failure, unreachable URL, handshake refused)."""


class ProtocolVersionError(ConnectError):
    """The server cannot speak the handshake era of MCP (protocol versions 2024-11-05 … 2025-11-25).

    Attributes
    ----------
    requested
        The protocol version this client proposed.
    offered
        The version(s) the server answered with or said it supports.
    """

    def __init__(self, message: str, *, requested: str, offered: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.requested = requested
        self.offered = tuple(offered)


class ConnectionClosedError(ClosedError):
    """The connection is closed, or closed while a call was waiting for its answer."""


class ServerError(BrokerError, RuntimeError):
    """The server answered a request with a JSON-RPC error.

    Attributes
    ----------
    code, message, data
        The JSON-RPC error's members.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


# -- the connection -----------------------------------------------------------------------------


class ServerConnection:
    """One live connection from the broker to an MCP server.

    Created by :func:`connect` (or :func:`open_connection`); not meant to be
    instantiated directly.

    Attributes
    ----------
    name
        The name the user gave the connection; the broker-side connection,
        consent prompts and audit records use it.
    transport
        ``"stdio"`` or ``"http"``.
    target
        The command line (stdio) or URL (HTTP, without user info or query), for display.
    broker
        The broker whose files this connection serves.
    """

    def __init__(
        self,
        broker: Broker,
        name: str,
        *,
        transport: TransportKind,
        target: str,
        opener: AbstractAsyncContextManager[tuple[MessageReader, MessageWriter]],
        consenter: Consenter | None,
        keepalive: float | None,
    ) -> None:
        self.broker = broker
        self.name = name
        self.transport: TransportKind = transport
        self.target = target
        self._opener = opener
        self._keepalive = keepalive
        self._loop = asyncio.get_running_loop()
        self._core = broker.connect(name, consenter=consenter, notify=self._on_change)
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
        return self._core

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
            self._tools = await _list_tools(session)
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
        """
        session = self._require_session(f"call tool {name!r}")
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
        self._core.close()
        with suppress(RuntimeError):  # a closed loop: nothing left to tear down
            self._loop.call_soon_threadsafe(self._request_close, reason)

    async def aclose(self, reason: str = "closed by the user") -> None:
        """Close the connection (see :meth:`close`) and wait until the transport is down."""
        self._asked_reason = self._asked_reason or reason
        self._core.close()
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

    async def _start(self, timeout: float | None) -> None:
        if timeout is not None:
            self._scope.deadline = anyio.current_time() + timeout
        self._task = self._loop.create_task(self._run(timeout), name=f"fsbroker-connection-{self.name}")
        try:
            await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            self._core.close()
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
                log.warning("connection %r failed: %s", self.name, _describe(exc))
                if self._asked_reason is None:  # not closed on purpose: say what broke
                    self._close_reason = (
                        f"the {_TRANSPORT_NAMES[self.transport]} transport failed: {_describe(exc)}"
                    )
        finally:
            self._finish(timeout)

    async def _serve(self) -> None:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._opener)
            middleware = BrokerMiddleware(
                read,
                write,
                handle_files=self._core.ahandle,
                list_roots=self._list_roots,
                on_transport_closed=self._transport_closed,
                label=f"connection {self.name!r}",
            )
            session_read, session_write = await stack.enter_async_context(middleware.attach())
            self._middleware = middleware
            session = await stack.enter_async_context(
                ClientSession(
                    session_read, session_write, client_info=CLIENT_INFO, message_handler=self._on_message
                )
            )
            await self._handshake(session, middleware)
            self._tools = await self._initial_tools(session)
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
            return await _list_tools(session)
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
        self._core.close()
        error: BaseException | None = None
        if not self._ready.done():
            error = self._connect_error(timeout)
        if self._close_reason is None:
            if error is not None:
                self._close_reason = str(error)
            elif self._failure is not None:
                transport = _TRANSPORT_NAMES[self.transport]
                self._close_reason = f"the {transport} transport failed: {_describe(self._failure)}"
            else:
                self._close_reason = "the connection ended"
        if error is not None:
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved here, so an abandoned connect never warns
        self._done.set()

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
        own = _find(failure, ConnectError)
        if own is not None:
            return own
        leaf = _leaf(failure)
        if self.transport == "stdio" and isinstance(leaf, OSError):
            return ConnectError(f"cannot start the server of {self.name!r} ({self.target}): {leaf}")
        if self.transport == "http" and isinstance(leaf, httpx2.HTTPError | OSError):
            return ConnectError(
                f"cannot reach the server of {self.name!r} at {self.target}: {_describe(leaf)}"
            )
        return ConnectError(f"connecting {self.name!r} ({self.target}) failed: {_describe(leaf)}")

    # -- events from elsewhere ----------------------------------------------------------------

    def _request_close(self, reason: str, *, interrupt: bool = True) -> None:
        """On the loop: end the connection's task (before or after the handshake).

        *interrupt* also stops a handshake in progress (a close by the user);
        without it, a handshake in progress fails on its own.
        """
        if self._done.is_set():
            return
        if self._close_reason is None:
            self._close_reason = reason
            self._interrupted = interrupt and not self._ready.done()
        if self._state == "open":
            self._state = "closing"
        if interrupt and not self._ready.done():
            self._scope.cancel()
        self._stop.set()

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
        if self._core.closed and not self._done.is_set():
            reason = self._asked_reason or "the broker closed the connection"
            with suppress(RuntimeError):  # a closed loop: nothing left to tear down
                self._loop.call_soon_threadsafe(self._request_close, reason)

    def _list_roots(self) -> list[dict[str, str]]:
        return [{"uri": root.uri, "name": root.name} for root in self.broker.roots.snapshot()]

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            log.warning("connection %r: the transport reported %s", self.name, _describe(message))
        elif isinstance(message, types.ToolListChangedNotification) and self._tg is not None:
            self._tg.start_soon(self._refresh_quietly)

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh_tools()
        except (BrokerError, TimeoutError) as exc:
            log.warning("connection %r: could not refresh the tool list: %s", self.name, exc)

    async def _keep_alive(self, session: ClientSession, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            if not await self._ping(session, max(interval, 10.0)):
                return

    async def _ping(self, session: ClientSession, timeout: float) -> bool:
        """Ping the server; close the connection if it cannot answer. Returns whether it is alive."""
        try:
            await session.send_request(
                types.PingRequest(), types.EmptyResult, request_read_timeout_seconds=timeout
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                log.warning("connection %r: the server did not answer a ping within %g s", self.name, timeout)
                return True
            if self._maybe_lost(exc):
                # An HTTP 404 for our session id: the server forgot it (it restarted).
                self._request_close(f"the server no longer knows the HTTP session ({exc.message})")
            else:
                self._request_close(f"the server stopped answering ({exc.message})")
            return False
        return True

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
        if session is not None and not self._stop.is_set() and await self._ping(session, _PROBE_TIMEOUT):
            return ServerError(exc.code, f"{what}: {exc.message}", exc.data)
        with anyio.move_on_after(_CLOSE_REASON_WAIT):
            await self._done.wait()
        return ConnectionClosedError(
            f"{what} failed: the connection {self.name!r} closed ({self._close_reason or 'connection lost'})"
        )


# -- entry points -------------------------------------------------------------------------------


async def connect(
    broker: Broker,
    name: str,
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    consenter: Consenter | None = None,
    timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    keepalive: float | None = DEFAULT_KEEPALIVE,
    errlog: TextIO | None = None,
) -> ServerConnection:
    """Connect *broker* to an MCP server and complete the handshake.

    Give either *command* (stdio: the server is started as a subprocess) or
    *url* (Streamable HTTP). The connection always uses the handshake era of
    MCP (it proposes protocol version 2025-11-25 and accepts 2024-11-05 …
    2025-11-25) and advertises ``roots.filesystemBrokering``.

    Must be awaited on the asyncio event loop that will run the connection.

    Parameters
    ----------
    broker
        The broker whose roots and files the server may use.
    name
        The user's name for the connection: the broker-side connection,
        consent prompts and audit records carry it.
    command, args, env, cwd
        stdio: the executable, its arguments, extra environment variables
        (merged over a minimal safe environment: ``HOME``, ``PATH``, ...), and
        its working directory.
    url, headers
        Streamable HTTP: the endpoint and extra HTTP headers (``Authorization``
        ...). Server-sent events have no size cap, so 2 MiB chunks fit.
    consenter
        Answers ``files/consent``; default: refuse everything not pre-approved.
    timeout
        Seconds for the transport to come up and the handshake to complete
        (``None``: no limit).
    keepalive
        HTTP only: seconds between pings that notice a server that went away
        (``None``: never ping). stdio notices an exited server at once.
    errlog
        stdio: where the server's stderr goes (default: the process's stderr).

    Returns
    -------
    ServerConnection
        Open, with its tool list fetched.

    Raises
    ------
    ProtocolVersionError
        The server cannot speak the handshake era.
    ConnectError
        The command cannot be started, the URL cannot be reached, the server
        refused the handshake, or *timeout* elapsed.
    ValueError
        Neither or both of *command* and *url*, or a URL that is not http(s).
    """
    if (command is None) == (url is None):
        raise ValueError("give either command (stdio) or url (Streamable HTTP)")
    opener: AbstractAsyncContextManager[tuple[MessageReader, MessageWriter]]
    if command is not None:
        parameters = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        stderr = errlog if errlog is not None else (sys.__stderr__ or sys.stderr)
        opener = stdio_client(parameters, errlog=stderr)
        conn = ServerConnection(
            broker,
            name,
            transport="stdio",
            target=" ".join([command, *args]),
            opener=opener,
            consenter=consenter,
            keepalive=None,
        )
    else:
        assert url is not None
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {url!r}")
        conn = ServerConnection(
            broker,
            name,
            transport="http",
            target=_display_url(url),
            opener=_http_transport(url, dict(headers or {})),
            consenter=consenter,
            keepalive=keepalive,
        )
    await conn._start(timeout)
    return conn


@asynccontextmanager
async def open_connection(
    broker: Broker,
    name: str,
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    consenter: Consenter | None = None,
    timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    keepalive: float | None = DEFAULT_KEEPALIVE,
    errlog: TextIO | None = None,
) -> AsyncIterator[ServerConnection]:
    """``async with open_connection(broker, name, ...) as conn``: :func:`connect`, closed at the end.

    Takes the same arguments as :func:`connect`; leaving the block closes the
    connection (see :meth:`ServerConnection.aclose`).
    """
    conn = await connect(
        broker,
        name,
        command=command,
        args=args,
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        consenter=consenter,
        timeout=timeout,
        keepalive=keepalive,
        errlog=errlog,
    )
    try:
        yield conn
    finally:
        await conn.aclose()


@asynccontextmanager
async def _http_transport(
    url: str, headers: dict[str, str]
) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT) as client,
        streamable_http_client(url, http_client=client, max_sse_event_size=None) as streams,
    ):
        yield streams


async def _list_tools(session: ClientSession) -> tuple[dict[str, Any], ...]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1000):  # a server whose cursor never ends cannot hang us
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


def _display_url(url: str) -> str:
    """*url* for messages and logs: no user info, no query (either may hold a secret)."""
    try:
        parsed = httpx2.URL(url)
        return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return url.split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]


def _supported_versions(data: Any) -> tuple[str, ...]:
    if isinstance(data, Mapping):
        supported = data.get("supported")
        if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
            return tuple(supported)
    return ()


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _find(exc: BaseException, kind: type[ConnectError]) -> ConnectError | None:
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
