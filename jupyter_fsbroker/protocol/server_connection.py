"""One live connection to an MCP server: :class:`ServerConnection`.

Made by :func:`~.connector.connect` (or :func:`~.connector.open_connection`), it
owns the transport, the middleware and its desk (:mod:`.desk`) that answer
``files/*``, the MCP session, and one broker-side :class:`~jupyter_fsbroker.core.broker.Connection` (its own
grants, locks, watches and staged uploads) named as the user named the
connection, so consent prompts and the audit log name it as the user knows it;
what the server says about itself is in :attr:`ServerConnection.info`.
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

This module is the public handle. Behind it: the task that holds the connection open and
says why it ended (:mod:`.lifecycle`), the handshake (:mod:`.handshake`), the keep-alive pings
and the probe after a lost answer (:mod:`.liveness`), and the broker's events for the server
(:mod:`.broker_bridge`).

Threading
---------
Everything runs on the asyncio event loop that called :func:`connect`. The
connection's whole ``async with`` stack (transport, middleware, session) lives
in one long-lived task on that loop (:class:`~.lifecycle.ConnectionTask`), which
waits for a close request or for the transport to end, so
:meth:`ServerConnection.aclose` works from any task and
:meth:`ServerConnection.close` from any thread. Watch events (core dispatcher
thread) and root changes (whatever thread changed the roots) hop onto the loop
with ``call_soon_threadsafe``; they never block the thread they come from.

Results are plain JSON-able dicts in their wire spelling: nothing from ``mcp``
leaks to the layers above.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..core.broker import Broker
from ..core.connection import Connection as CoreConnection
from ..core.consent import Consenter
from ..core.serverlog import ServerLog
from .broker_bridge import BrokerBridge
from .client_errors import ConnectionClosedError, ServerError
from .desk.core_slot import CoreSlot
from .files_batches import FilesBatch, calling
from .handshake import CLIENT_INFO, DEFAULT_ERA, EraChoice, ServerInfo, WireEra
from .lifecycle import ConnectionTask
from .roots_gate import RootsGate, RootsGrace
from .roots_offer import RootsOffer
from .tools import list_tools
from .transports import Opener
from .voice import ServerVoice, fallback_name

if TYPE_CHECKING:
    from ..sandbox import SandboxStatus

__all__ = ["CLIENT_INFO", "ConnectionState", "ServerConnection", "TransportKind"]

#: How a connection reaches its server: a local command over stdio, or Streamable HTTP.
TransportKind = Literal["stdio", "http"]
#: Where a connection is in its life: ``connecting`` → ``open`` → ``closing`` → ``closed``.
ConnectionState = Literal["connecting", "open", "closing", "closed"]


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
        era: EraChoice = DEFAULT_ERA,
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
        self._gate = RootsGate(roots_grace) if roots_grace is not None else None
        self.roots_offer = RootsOffer(broker, advertise=advertise_roots, sandbox=sandbox, label=self._label)
        bridge = BrokerBridge(broker)
        self._slot = CoreSlot(
            broker, consenter=consenter, notify=bridge.on_change, on_request=self.roots_offer.files_used
        )
        if name is not None:
            self._slot.open(self.name)
        self._life = ConnectionTask(
            self,
            opener=opener,
            keepalive=keepalive,
            slot=self._slot,
            voice=ServerVoice(self.log, self.name),
            bridge=bridge,
            era=era,
        )

    def __repr__(self) -> str:
        return f"<ServerConnection {self.name!r} {self.transport} {self._life.state}>"

    # -- what is known about the server --------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """``connecting``, ``open``, ``closing`` or ``closed``."""
        core = self._slot.connection
        if self._life.state == "open" and core is not None and core.closed:
            return "closing"  # the kill switch ended the broker side; the loop has yet to end the transport
        return self._life.state

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (``state == "closed"``)."""
        return self._life.state == "closed"

    @property
    def close_reason(self) -> str | None:
        """Why the connection ended (or is ending); ``None`` while it is open."""
        return self._life.close_reason

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
    def info(self) -> ServerInfo:
        """What the server said about itself in ``initialize`` (empty before the handshake)."""
        return self._life.info

    @property
    def era(self) -> WireEra | None:
        """The era of MCP the connection speaks: ``modern`` (2026-07-28, ``files/*`` in batches)
        or ``legacy`` (the handshake era, ``files/*`` requests); ``None`` before the handshake."""
        return self._life.info.era

    # The six properties below are :attr:`info`'s, kept one release.

    @property
    def server_info(self) -> dict[str, Any]:
        """``serverInfo`` from the server's ``initialize`` result (``name``, ``version``, ...)."""
        return dict(self._life.info.server_info)

    @property
    def server_name(self) -> str | None:
        """The name the server gives itself (``serverInfo.name``)."""
        return self._life.info.name

    @property
    def server_version(self) -> str | None:
        """The version the server gives itself (``serverInfo.version``)."""
        return self._life.info.version

    @property
    def server_capabilities(self) -> dict[str, Any]:
        """The server's capabilities from ``initialize``, in wire spelling."""
        return dict(self._life.info.capabilities)

    @property
    def instructions(self) -> str | None:
        """The server's ``instructions``, if it gave any."""
        return self._life.info.instructions

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version (one of the handshake era's)."""
        return self._life.info.protocol_version

    @property
    def tools(self) -> tuple[dict[str, Any], ...]:
        """The server's tools in wire spelling (``name``, ``description``, ``inputSchema`` ...).

        Fetched at connect time and again whenever the server sends
        ``notifications/tools/list_changed``; :meth:`refresh_tools` re-fetches.
        Descriptions are cleaned of their docstring indentation
        (``inspect.cleandoc``), as servers often send them raw.
        """
        return self._life.tools

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
            self._life.tools = await list_tools(session)
        except MCPError as exc:
            raise await self._life.liveness.call_error(exc, "tools/list", None) from None
        return self._life.tools

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
        args = dict(arguments) if arguments is not None else None
        extension = self._life.extension
        meta = extension.call_meta() if self.era == "modern" else None
        try:
            with calling(name, args):
                result = await session.call_tool(
                    name, args, read_timeout_seconds=timeout, meta=meta, allow_claimed=True
                )
                if isinstance(result, FilesBatch):
                    result = await extension.resolve(
                        session, result, name=name, arguments=args, timeout=timeout
                    )
        except (ServerError, ConnectionClosedError):
            raise
        except MCPError as exc:
            raise await self._life.liveness.call_error(exc, f"tools/call {name!r}", timeout) from None
        except (ValidationError, RuntimeError) as exc:
            # A result that is not a CallToolResult, or structured content that
            # does not match the tool's output schema.
            raise ServerError(
                types.INTERNAL_ERROR, f"the server's result for tool {name!r} is not valid: {exc}"
            ) from None
        if not isinstance(result, types.CallToolResult):
            raise ServerError(
                types.INTERNAL_ERROR, f"the server's result for tool {name!r} is not a tool result"
            )
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
        self._life.ask_close(reason)

    async def aclose(self, reason: str = "closed by the user") -> None:
        """Close the connection (see :meth:`close`) and wait until the transport is down."""
        self._life.ask_close_here(reason)
        await self.wait_closed()

    async def wait_closed(self) -> None:
        """Wait until the connection has ended, for whatever reason."""
        await self._life.wait_closed()

    async def __aenter__(self) -> ServerConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def postpone_deadline(self, seconds: float) -> None:
        """Give the handshake *seconds* more (a person is signing in meanwhile); nothing once open."""
        self._life.postpone_deadline(seconds)

    async def start(self, timeout: float | None) -> None:
        """Start the connection's task; wait until the handshake is done (what ``connect`` does).

        Raises
        ------
        ConnectError
            As :func:`.connector.connect`.
        """
        await self._life.start(timeout)

    # -- helpers -------------------------------------------------------------------------------

    def _label(self) -> str:
        return self.name

    def _require_session(self, what: str) -> ClientSession:
        session = self._life.session
        state = self._life.state
        if session is None or state != "open":
            reason = self._life.close_reason
            raise ConnectionClosedError(
                f"cannot {what}: the connection {self.name!r} is {state}" + (f" ({reason})" if reason else "")
            )
        return session
