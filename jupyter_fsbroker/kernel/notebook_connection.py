"""The notebook's live connection to one MCP server: :class:`KernelConnection`.

What a notebook holds after ``broker.connect(...)``: the server's description
and tools, tool calls from synchronous and async cells (interruptible, with
their consent prompts and progress in the calling cell, see :mod:`.calls`),
the connection's grants, and the kill switch. A thin, thread-safe front of the
protocol-level :class:`~jupyter_fsbroker.protocol.server_connection.ServerConnection`: the
work runs on the broker's background loop, never on the cell's thread, and
nothing here decides what a server may do (the core does).
"""

from __future__ import annotations

import concurrent.futures
import html
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from ..core.connection import Connection as CoreConnection
from ..core.errors import ClosedError
from ..core.grants import Grant
from ..core.serverlog import ServerLog
from ..protocol.client_errors import ConnectionClosedError
from .calls import CallRunner
from .running_calls import CallName
from .tool_results import CallInterrupted, ToolError, ToolResult, Tools

if TYPE_CHECKING:  # imported with the first connection (kernel/servers.py), not at %load_ext
    from ..protocol.roots_offer import RootsNotice
    from ..protocol.server_connection import ServerConnection
    from ..sandbox import SandboxStatus

__all__ = ["CallOptions", "KernelConnection"]


class CallOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`KernelConnection.call_tool` (``timeout``, ``raise_on_error``)."""

    timeout: float | None
    raise_on_error: bool


class KernelConnection:
    """The notebook's live connection to one MCP server.

    Returned by :meth:`NotebookBroker.connect <jupyter_fsbroker.kernel.notebook.NotebookBroker.connect>`;
    not created directly. Thread-safe.

    One class on purpose, like ``httpx.Client``: it is what a notebook user
    holds and tab-completes, so everything about the connection is found on it.
    It holds no state of its own: its properties are one-line reads of the
    protocol connection, and the work is done elsewhere (tool calls framed and
    waited for in :mod:`.calls`, results in :mod:`.tool_results`, grants in the core).

    Parameters
    ----------
    server
        The protocol-level connection, open.
    broker
        The notebook broker it belongs to.
    runner
        Runs the connection's work on the broker's background loop.
    on_change
        Called (any thread) when the connection's state may have changed, so
        the views can follow.

    Attributes
    ----------
    broker
        The notebook broker it belongs to.
    """

    def __init__(
        self,
        server: ServerConnection,
        *,
        broker: Any,
        runner: CallRunner,
        on_change: Callable[[KernelConnection], None],
    ) -> None:
        self.broker = broker
        self._server = server
        self._runner = runner
        self._on_change = on_change

    def __repr__(self) -> str:
        return f"<KernelConnection {self.name!r} {self.transport} {self.state}>"

    def _card(self) -> list[tuple[str, str]]:
        """What the connection's card shows, ``(label, value)``: who, how, and in what state."""
        rows = [("server", self.server_name or "(it gave no name)"), ("transport", self.transport)]
        if self.transport == "stdio":
            # The program's name, not its folder: the card is saved with notebooks and shared.
            program, _, args = self.target.partition(" ")
            rows.append(("command", " ".join(filter(None, (os.path.basename(program), args)))))
        else:
            rows.append(("URL", self.target))
        if self.protocol_version:
            rows.append(("MCP version", self.protocol_version))
        if self.sandbox is not None:
            rows.append(("sandbox", self.sandbox.describe()))
        reason = self.close_reason if self.state in ("closing", "closed") else None
        rows.append(("state", f"{self.state} ({reason})" if reason else self.state))
        return rows

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle:
            printer.text(repr(self))
            return
        width = max(len(label) for label, _ in self._card())
        lines = [f"{self.name}: a connection to an MCP server"]
        lines += [f"  {label:<{width}}  {value}" for label, value in self._card()]
        printer.text("\n".join(lines))

    def _repr_html_(self) -> str:
        cell = "padding:1px 10px 1px 0;text-align:left;vertical-align:top"
        rows = "".join(
            f'<tr><th style="{cell};font-weight:normal;color:var(--jp-ui-font-color2,#666)">'
            f'{html.escape(label)}</th><td style="{cell}">{html.escape(value)}</td></tr>'
            for label, value in self._card()
        )
        return (
            '<div class="fsbroker-connection-card" style="border:1px solid var(--jp-border-color2,#ddd);'
            'border-radius:4px;padding:4px 10px;display:inline-block">'
            f"<div><strong>{html.escape(self.name)}</strong></div><table>{rows}</table></div>"
        )

    # -- what it is ----------------------------------------------------------------------------

    @property
    def server(self) -> ServerConnection:
        """The protocol-level connection: its transport, session and MCP state (advanced use)."""
        return self._server

    @property
    def name(self) -> str:
        """The name you gave the connection (consent prompts and the audit log show it)."""
        return self._server.name

    @property
    def server_name(self) -> str:
        """The name the server gives itself (``serverInfo.name``); empty if it gave none."""
        return self._server.server_name or ""

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return self._server.transport

    @property
    def era(self) -> str | None:
        """``"modern"`` (the 2026-07-28 era: ``files/*`` in batches) or ``"legacy"`` (the handshake era)."""
        return self._server.era

    @property
    def target(self) -> str:
        """The server's command line or URL (without secrets), for display."""
        return self._server.target

    @property
    def sandbox(self) -> SandboxStatus | None:
        """Whether a local server runs confined, and how (``None``: over HTTP, it runs elsewhere).

        ``conn.sandbox.describe()`` says it in words: ``sandboxed (files; Landlock ABI 7)``,
        ``not sandboxed``, or ``not sandboxed (sandbox unavailable: …)``.
        """
        return self._server.sandbox

    @property
    def roots_notice(self) -> RootsNotice | None:
        """Why the server was told only the shared folders' names, when it asked where they are.

        ``None`` unless the server asked ``roots/list`` while their locations
        were withheld (see ``advertise_roots``) and has sent no ``files/*``
        request: it then probably opens files itself, and finds none of yours.
        ``conn.roots_notice.text`` says what it asked, why it was not given it,
        and how to hand it over. Dropped once the server uses ``files/*``.
        """
        return self._server.roots_offer.notice

    def server_log(self, lines: int = 50) -> str:
        """The last *lines* the server said, oldest first, one per line with its time.

        Its stderr lines (a stdio server: ``12:30:01.123 stderr: …``) and its
        MCP log messages (any transport: ``12:30:01.456 [warning] db: …``), in
        the order they came; kept after the connection ended. A server's words
        are kept apart from the notebook's output: otherwise ipykernel would
        show them in whichever cell happens to run.
        """
        return self._server.log.text(lines)

    @property
    def log(self) -> ServerLog:
        """The server's log itself (see :meth:`server_log`), for views and follow-ups."""
        return self._server.log

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version."""
        return self._server.protocol_version

    @property
    def state(self) -> str:
        """``connecting``, ``open``, ``closing`` or ``closed``."""
        return self._server.state

    @property
    def closed(self) -> bool:
        """Whether the connection has ended."""
        return self._server.closed

    @property
    def close_reason(self) -> str | None:
        """Why the connection ended; ``None`` while it is open."""
        return self._server.close_reason

    @property
    def server_info(self) -> dict[str, Any]:
        """``serverInfo`` from the server's ``initialize`` result."""
        return self._server.server_info

    @property
    def instructions(self) -> str | None:
        """The server's instructions for its users, if any."""
        return self._server.instructions

    @property
    def tools(self) -> Tools:
        """The server's tools, kept up to date: a tuple that displays as a table.

        Each is a :class:`~.tool_results.Tool` (its wire dict: ``name``,
        ``description``, ``inputSchema`` ...); ``conn.tools["profile_csv"]``
        finds one by name.
        """
        return Tools(self._server.tools)

    @property
    def tool_names(self) -> list[str]:
        """The names of the server's tools."""
        return [str(tool.get("name")) for tool in self._server.tools]

    @property
    def connection(self) -> CoreConnection:
        """The broker side of the connection: its grants, locks, watches and uploads."""
        return self._server.connection

    @property
    def id(self) -> str:
        """The broker-side connection id (``c1`` ...), as audit records and grants carry it."""
        return self._server.connection.id

    # -- calls ---------------------------------------------------------------------------------

    def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        raise_on_error: bool = True,
    ) -> ToolResult:
        """Call the server's tool *tool* and wait for its result (for synchronous cells).

        Consent requests the server makes meanwhile appear in this cell's
        output; where widget clicks cannot reach a busy kernel, a text prompt
        asks instead. Ctrl-C / Interrupt cancels the call.

        Parameters
        ----------
        tool
            The tool's name (see :attr:`tools`).
        arguments
            The tool's arguments, a JSON object.
        timeout
            Seconds to wait for the result; ``None`` waits as long as it takes.
        raise_on_error
            Raise :class:`~.tool_results.ToolError` when the tool reports a failure
            (the default); ``False`` returns the result, ``result.is_error``
            then says so.

        Returns
        -------
        ToolResult
            The result: ``result.data`` holds its structured content (or its
            text parsed as JSON), ``result.text`` its text; it displays as its data.

        Raises
        ------
        ToolError
            The tool reported a failure (a refused file access names the path,
            the operation and why); ``error.result`` is the result.
        ConnectionClosedError
            The connection is closed, or closed during the call.
        ServerError
            The server answered with a JSON-RPC error (unknown tool, bad arguments).
        TimeoutError
            *timeout* elapsed (the server is told to cancel).
        CallInterrupted
            The call was interrupted (and cancelled); a ``KeyboardInterrupt``.
        CallCancelled
            The call's Cancel button (under the cell, or in the JupyterLab panel) cancelled it.
        """
        try:
            result: dict[str, Any] = self._runner.run_call(
                CallName(self.id, self.name, tool),
                self._server.call_tool(tool, arguments, timeout=timeout),
                cancelled=lambda: self._cancelled(tool),
            )
        except KeyboardInterrupt as exc:
            if isinstance(exc, CallInterrupted):
                raise
            # Where the cell happened to wait (threading, a future) says nothing to the user.
            raise CallInterrupted(f"{self.name} · {tool} was interrupted and cancelled") from None
        return self._result(tool, result, raise_on_error)

    async def acall_tool(
        self, tool: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> ToolResult:
        """Call the server's tool *tool* from an async cell: ``await conn.acall_tool(...)``.

        The call runs on the broker's loop; this awaits it on the caller's loop,
        which keeps handling widget clicks. Takes the arguments of
        :meth:`call_tool` and raises the same errors (cancelling the awaiting
        task cancels the call).
        """
        result: dict[str, Any] = await self._runner.arun_call(
            CallName(self.id, self.name, tool),
            self._server.call_tool(tool, arguments, timeout=options.get("timeout")),
            cancelled=lambda: self._cancelled(tool),
        )
        return self._result(tool, result, options.get("raise_on_error", True))

    def _result(self, tool: str, raw: dict[str, Any], raise_on_error: bool) -> ToolResult:
        result = ToolResult(raw)
        result.tool = tool
        if raise_on_error and result.is_error:
            raise ToolError(result, tool=tool, connection=self.name)
        return result

    def _cancelled(self, tool: str) -> ConnectionClosedError:
        return ConnectionClosedError(
            f"{self.name} · {tool} was cancelled: the connection or the broker closed"
        )

    def refresh_tools(self) -> tuple[dict[str, Any], ...]:
        """Fetch the tool list again and return it."""
        return self._runner.run(self._server.refresh_tools())

    # -- grants and the kill switch ------------------------------------------------------------

    def grants(self) -> tuple[Grant, ...]:
        """The live grants this connection can use (its own and the notebook's pre-approvals)."""
        return self._server.connection.grants()

    def revoke(self, path: str | None = None) -> tuple[Grant, ...]:
        """Revoke this connection's grants on *path* (root-relative, absolute or ``file://``), or all.

        Takes effect for the next operation, and for operations already queued.

        Returns
        -------
        tuple of Grant
            What was revoked.

        Raises
        ------
        ConfigError
            *path* is not inside a root.
        """
        return self._server.connection.revoke(path)

    def close(self) -> None:
        """End the connection now: the kill switch. Returns at once; safe from any thread.

        Every grant, lock, watch, staged upload and pending consent of the
        connection ends immediately; the server process is stopped (stdio) or
        the session deleted (HTTP) right after. Use :meth:`wait_closed` to wait
        for that.
        """
        self._server.close("closed by the user")
        self._on_change(self)

    def wait_closed(self, timeout: float | None = 10.0) -> bool:
        """Wait until the transport is down; return whether it is (``False`` on timeout)."""
        if self._server.closed:
            return True
        self._runner.check_thread()
        try:
            future = self._runner.submit(self._server.wait_closed())
        except ClosedError:  # the broker's loop is gone: nothing more will happen
            return self._server.closed
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return False
        except BaseException:
            future.cancel()
            raise
        return True
