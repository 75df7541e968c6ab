"""The notebook's Python API: :func:`get_broker`, :class:`NotebookBroker`, :class:`KernelConnection`.

::

    import jupyter_fsbroker as fsb

    broker = fsb.get_broker()                               # one per kernel
    broker.add_root("./data", name="data")
    broker.allow("data/raw", ops=("read",))                 # pre-approval
    conn = broker.connect("analysis", url="http://127.0.0.1:8765/mcp")
    result = conn.call_tool("profile_csv", {"path": "data/sales.csv"})         # sync cell
    result = await conn.acall_tool("profile_csv", {"path": "data/sales.csv"})  # async cell
    conn.revoke("data/raw"); conn.close()
    broker.dashboard()

Everything that talks to servers runs on the broker's background event loop
(:mod:`.loop`); the methods here are thin, thread-safe entry points that wait
for it. A synchronous call blocks the cell on a :class:`concurrent.futures.Future`
and stays interruptible: Ctrl-C / Interrupt cancels the call and re-raises
:class:`KeyboardInterrupt`. Consent requests that arrive meanwhile appear in
the calling cell (see :mod:`.consent`).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import html
import json
import logging
import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TextIO, TypeVar

from ..core.broker import Broker
from ..core.config import BrokerConfig
from ..core.connection import Connection as CoreConnection
from ..core.consent import Consenter, DenyingConsenter
from ..core.errors import ClosedError, ConfigError
from ..core.grants import Grant
from ..core.locks import LockInfo
from ..core.roots import Root
from ..core.specs import split_allow, split_root
from ..protocol.client import DEFAULT_CONNECT_TIMEOUT, ConnectionClosedError, ServerConnection, connect
from . import ipykernel_compat as ipk
from .consent import Ask, CallScope, KernelConsenter
from .loop import BackgroundLoop, LoopClosedError
from .settings import LIVE_TRAITS, FSBroker

__all__ = ["KernelConnection", "NotebookBroker", "ToolResult", "get_broker"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Decided prompts kept visible in the dashboard or under a connecting cell.
_KEEP_DECIDED = 3

#: Seconds :meth:`NotebookBroker.close` waits for the transports to come down.
_CLOSE_TIMEOUT = 10.0


# -- results -----------------------------------------------------------------------------------


class ToolResult(dict[str, Any]):
    """A tool's result: the MCP ``CallToolResult`` as a JSON-able dict, with shortcuts.

    Keys are the wire's: ``content`` (a list of content blocks), ``isError``,
    and ``structuredContent`` when the server sent it.
    """

    @property
    def is_error(self) -> bool:
        """Whether the tool reported a failure (``isError``)."""
        return bool(self.get("isError"))

    @property
    def text(self) -> str:
        """The text content blocks, joined by newlines."""
        blocks = self.get("content") or []
        return "\n".join(
            str(block.get("text", ""))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text"
        )

    @property
    def data(self) -> Any:
        """``structuredContent`` when present, else the text parsed as JSON, else the text."""
        if "structuredContent" in self:
            return self["structuredContent"]
        text = self.text
        try:
            return json.loads(text)
        except ValueError:
            return text


# -- waiting -----------------------------------------------------------------------------------


def _wait(future: Future[T]) -> T:
    """Block until *future* is done; Ctrl-C cancels it and re-raises."""
    try:
        concurrent.futures.wait((future,))
        return future.result()
    except BaseException:
        future.cancel()
        raise


def _command_argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ConfigError("the server command is empty")
    return argv


# -- one connection ----------------------------------------------------------------------------


class KernelConnection:
    """The notebook's live connection to one MCP server.

    Returned by :meth:`NotebookBroker.connect`; not created directly. Thread-safe.

    Attributes
    ----------
    broker
        The notebook broker it belongs to.
    """

    def __init__(
        self, broker: NotebookBroker, server: ServerConnection, stderr: TextIO | None = None
    ) -> None:
        self.broker = broker
        self._server = server
        self._stderr = stderr
        self._card: Any | None = None
        self._card_line: Any | None = None

    def __repr__(self) -> str:
        return f"<KernelConnection {self.name!r} {self.transport} {self.state}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    # -- what it is ----------------------------------------------------------------------------

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
    def target(self) -> str:
        """The server's command line or URL (without secrets), for display."""
        return self._server.target

    def server_log(self, lines: int = 50) -> str:
        """The last *lines* a stdio server wrote to its stderr (empty over HTTP).

        A server's stderr is kept apart from the notebook's: otherwise ipykernel
        would show it in whichever cell happens to run.
        """
        stderr = self._stderr
        if stderr is None or stderr.closed:
            return ""
        with open(os.dup(stderr.fileno()), encoding="utf-8", errors="replace", closefd=True) as reader:
            reader.seek(0)
            return "".join(collections.deque(reader, maxlen=lines))

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
    def tools(self) -> tuple[dict[str, Any], ...]:
        """The server's tools (``name``, ``description``, ``inputSchema`` ...), kept up to date."""
        return self._server.tools

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
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
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

        Returns
        -------
        ToolResult
            The result; ``result.is_error`` tells whether the tool failed,
            ``result.data`` holds its structured content.

        Raises
        ------
        ConnectionClosedError
            The connection is closed, or closed during the call.
        ServerError
            The server answered with a JSON-RPC error (unknown tool, bad arguments).
        TimeoutError
            *timeout* elapsed (the server is told to cancel).
        KeyboardInterrupt
            The call was interrupted (and cancelled).
        """
        self.broker._check_not_loop_thread()
        scope = self.broker._enter_call(self)
        try:
            future = self.broker._submit(self._server.call_tool(tool, arguments, timeout=timeout))
            return ToolResult(scope.wait(future))
        except concurrent.futures.CancelledError:
            raise ConnectionClosedError(f"the call of {tool!r} on {self.name!r} was cancelled") from None
        finally:
            self.broker._leave_call(scope)

    async def acall_tool(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> ToolResult:
        """Call the server's tool *tool* from an async cell: ``await conn.acall_tool(...)``.

        The call runs on the broker's loop; this awaits it on the caller's loop,
        which keeps handling widget clicks. Takes the arguments of
        :meth:`call_tool` and raises the same errors (cancelling the awaiting
        task cancels the call).
        """
        self.broker._check_not_loop_thread()
        scope = self.broker._enter_call(self)
        try:
            future = self.broker._submit(self._server.call_tool(tool, arguments, timeout=timeout))
            try:
                return ToolResult(await scope.wait_async(future))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and not (task is not None and task.cancelling()):
                    # The broker was closed under the call, not this task cancelled.
                    raise ConnectionClosedError(
                        f"the call of {tool!r} on {self.name!r} was cancelled"
                    ) from None
                raise
        finally:
            self.broker._leave_call(scope)

    def refresh_tools(self) -> tuple[dict[str, Any], ...]:
        """Fetch the tool list again and return it."""
        self.broker._check_not_loop_thread()
        return _wait(self.broker._submit(self._server.refresh_tools()))

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
        self.broker._changed()

    def wait_closed(self, timeout: float | None = 10.0) -> bool:
        """Wait until the transport is down; return whether it is (``False`` on timeout)."""
        if self._server.closed:
            return True
        self.broker._check_not_loop_thread()
        try:
            future = self.broker._submit(self._server.wait_closed())
        except LoopClosedError:
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

    def _ended(self) -> None:
        """On the loop, once the transport is down: update what is shown."""
        if self._stderr is not None:
            self._stderr.close()  # an anonymous file: nothing stays on disk
        line = self._card_line
        if line is not None:
            try:
                line.value = _card_text(self)
            except Exception:
                log.debug("could not update the connection card", exc_info=True)
        self.broker._changed()


def _card_text(conn: KernelConnection) -> str:
    name = html.escape(conn.name)
    if conn.closed:
        reason = html.escape(conn.close_reason or "closed")
        return f"<i>{name}</i>: disconnected ({reason})"
    tools = len(conn.tools)
    return (
        f"Connected <b>{name}</b> — server {html.escape(conn.server_name or '?')}, {conn.transport}, "
        f"MCP {html.escape(conn.protocol_version or '?')}, {tools} tool{'' if tools == 1 else 's'}"
    )


class _PromptPlace:
    """A container shown outside any call (dashboard, connection card) holding consent prompts."""

    def __init__(self, add: Callable[[Any], None], remove: Callable[[Any], None]) -> None:
        self._add = add
        self._remove = remove
        self._lock = threading.Lock()
        self._asks: list[Ask] = []

    def put(self, ask: Ask, forget: Callable[[Ask], None]) -> None:
        self._add(ask.prompt)
        with self._lock:
            self._asks.append(ask)
            decided = [a for a in self._asks if a.future.done()]
            drop = decided[: max(0, len(decided) - _KEEP_DECIDED)]
            self._asks = [a for a in self._asks if a not in drop]
        for old in drop:
            prompt = old.prompt
            if prompt is None:
                continue
            try:
                self._remove(prompt)
                prompt.close()
            except Exception:
                log.debug("could not remove a consent prompt", exc_info=True)
            forget(old)


class _Text:
    """Text standing in for a widget where there are no widgets (a terminal)."""

    def __init__(self, render: Callable[[], str]) -> None:
        self._render = render

    def __repr__(self) -> str:
        return self._render()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self._render())


# -- the notebook's broker ---------------------------------------------------------------------


class NotebookBroker:
    """The kernel's broker: shared folders, grants and server connections, with their views.

    One per kernel: get it with :func:`get_broker` (``%load_ext jupyter_fsbroker``
    creates it). It owns a core :class:`~jupyter_fsbroker.core.broker.Broker`
    (:attr:`core`) and the background event loop its connections run on.

    Parameters
    ----------
    settings
        The ``FSBroker`` configurable; default: its defaults.
    shell
        The IPython shell, if any.
    consenter
        Who answers consent requests; default: prompts in the notebook (widgets,
        stdin), the terminal in a terminal IPython, or refusal without either.
    config
        The core configuration to start from (lock and trash folders ...);
        *settings* are applied over it.
    widgets
        Whether to show widgets; default: inside a kernel with ``ipywidgets``.
    """

    def __init__(
        self,
        settings: FSBroker | None = None,
        *,
        shell: Any | None = None,
        consenter: Consenter | None = None,
        config: BrokerConfig | None = None,
        widgets: bool | None = None,
    ) -> None:
        self.settings = settings if settings is not None else FSBroker()
        self.shell = shell
        self._kernel = ipk.get_kernel() if shell is None or hasattr(shell, "kernel") else None
        if widgets is None:  # widgets need a kernel (and a frontend) to show them
            widgets = self._kernel is not None and _widgets_available()
        self._widgets = widgets
        self._lock = threading.RLock()
        self._server_logs: dict[str, TextIO] = {}  # stdio servers' stderr, until connected
        self._closed = False
        self._connections: dict[str, KernelConnection] = {}
        self._dashboard: Any | None = None
        self._dashboard_shown = False
        self._dashboard_place: _PromptPlace | None = None
        self._owned_widgets: list[Any] = []
        self._terminal: Any | None = None
        self._base_limits = (config or BrokerConfig()).limits
        self.core = Broker(self.settings.make_config(config))
        self._loop = BackgroundLoop(prepare=self._prepare_loop)
        try:
            self._loop.start()
        except BaseException:
            self.core.close()
            raise
        self._kernel_consenter: KernelConsenter | None = None
        self._consenter = consenter if consenter is not None else self._default_consenter()
        self._apply_roots_and_allow(report=True)
        self.settings.observe(self._live_setting_changed, names=list(LIVE_TRAITS))
        self.settings.observe(self._roots_changed, names=["roots", "read_only_roots", "allow"])
        self.settings.observe(self._audit_changed, names=["audit_file"])

    def _prepare_loop(self) -> None:
        ipk.detach(self._kernel)

    def _default_consenter(self) -> Consenter:
        if self._kernel is not None:
            make_prompt = None
            if self._widgets:
                from ..widgets.consent import ConsentPrompt

                make_prompt = ConsentPrompt
            self._kernel_consenter = KernelConsenter(
                make_prompt=make_prompt, place_outside=self._place_outside
            )
            return self._kernel_consenter
        if sys.stdin is not None and sys.stdin.isatty():
            from ..widgets.text import TerminalConsenter

            self._terminal = TerminalConsenter()
            return self._terminal
        return DenyingConsenter()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<NotebookBroker {state}: {len(self.core.roots.snapshot())} roots, "
            f"{len(self._connections)} connections>"
        )

    # -- settings ------------------------------------------------------------------------------

    def _apply_roots_and_allow(self, *, report: bool) -> None:
        problems: list[str] = []
        existing = {root.name: root for root in self.core.roots.snapshot()}
        for specs, read_only in ((self.settings.roots, False), (self.settings.read_only_roots, True)):
            for spec in specs:
                name, path = split_root(spec)
                try:
                    self.add_root(path, name, read_only=read_only)
                except ConfigError as exc:
                    if name is None or name not in existing:
                        problems.append(f"FSBroker root {spec!r}: {exc}")
        for spec in self.settings.allow:
            path, ops = split_allow(spec)
            try:
                self.allow(path, ops)
            except ConfigError as exc:
                problems.append(f"FSBroker.allow {spec!r}: {exc}")
        for problem in problems:
            log.warning("%s", problem)
            if report:
                print(f"jupyter_fsbroker: {problem}", file=sys.stderr)

    def _live_setting_changed(self, change: Any) -> None:
        if self._closed:
            return
        try:
            limits = self.settings.make_limits(self._base_limits)
            # Reaches every part of the broker that reads them (lock wait, rates of open connections ...).
            self.core.configure(limits=limits, permanent_delete=self.settings.permanent_delete)
        except ConfigError as exc:
            print(f"jupyter_fsbroker: FSBroker.{change['name']} not applied: {exc}", file=sys.stderr)

    def _roots_changed(self, change: Any) -> None:
        if not self._closed:
            self._apply_roots_and_allow(report=True)

    def _audit_changed(self, change: Any) -> None:
        if not self._closed:
            print(
                "jupyter_fsbroker: FSBroker.audit_file takes effect at the next %reload_ext", file=sys.stderr
            )

    # -- roots and grants ----------------------------------------------------------------------

    @property
    def roots(self) -> tuple[Root, ...]:
        """The shared folders."""
        return self.core.roots.snapshot()

    def add_root(
        self, path: str | os.PathLike[str], name: str | None = None, *, read_only: bool = False
    ) -> Root:
        """Share the folder *path* with servers as root *name* (default: the folder's name).

        Adding the same folder under the same name again (re-running a cell)
        returns the existing root.

        Parameters
        ----------
        path
            An existing folder; ``~`` and relative paths are expanded. ``/`` and
            your home folder itself are refused.
        name
            The root's name: servers write paths as ``NAME/rest``.
        read_only
            Refuse every change below this folder.

        Raises
        ------
        ConfigError
            Missing or too broad folder, or the name is taken by another folder.
        """
        self._check_open()
        wanted = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))
        existing = self.core.roots.get(name if name is not None else os.path.basename(wanted))
        if existing is not None and existing.path == wanted and existing.read_only == read_only:
            return existing
        return self.core.add_root(path, name, read_only=read_only)

    def remove_root(self, name: str) -> Root:
        """Stop sharing root *name*; its grants, watches and staged uploads end with it.

        Raises
        ------
        ConfigError
            No root has that name.
        """
        self._check_open()
        return self.core.remove_root(name)

    def allow(
        self,
        path: str,
        ops: Sequence[str] | str = ("read",),
        *,
        include_sensitive: bool = False,
        duration: float | None = None,
    ) -> Grant:
        """Pre-approve *path* for *ops* for every connection (no consent prompt needed).

        Parameters
        ----------
        path
            Root-relative (``data/raw``), absolute, or ``file://`` inside a root.
        ops
            Some of ``read``, ``write``, ``delete``, ``watch``, as a sequence or a comma list.
        include_sensitive
            Also allow sensitive names (``.env``, keys ...) below *path*.
        duration
            Seconds the pre-approval lasts; ``None``: until revoked.

        Raises
        ------
        ConfigError
            *path* is outside every root, or an operation is unknown.
        """
        self._check_open()
        return self.core.allow(
            path,
            tuple(ops) if not isinstance(ops, str) else ops,
            include_sensitive=include_sensitive,
            duration=duration,
        )

    def revoke(
        self, path: str | None = None, *, connection: str | KernelConnection | None = None
    ) -> tuple[Grant, ...]:
        """Revoke grants on *path* (or all): of *connection*, or the pre-approvals when ``None``.

        Returns
        -------
        tuple of Grant
            What was revoked.
        """
        self._check_open()
        if connection is None:
            return self.core.revoke(path)
        conn = self.connection(connection) if isinstance(connection, str) else connection
        return conn.revoke(path)

    def grants(self) -> tuple[Grant, ...]:
        """Every live grant: consents of each connection and the pre-approvals."""
        return self.core.grants.grants()

    def locks(self) -> tuple[LockInfo, ...]:
        """Every lock held now (kept locks carry a ``lock_id``)."""
        try:
            return self.core.locks.held()
        except ClosedError:
            return ()

    def force_unlock(self, lock_id: str) -> None:
        """Release a kept lock, whoever holds it."""
        self.core.force_unlock(lock_id)

    # -- connections ---------------------------------------------------------------------------

    @property
    def connections(self) -> dict[str, KernelConnection]:
        """The connections by name (closed ones stay listed until replaced)."""
        with self._lock:
            return dict(self._connections)

    def connection(self, name: str) -> KernelConnection:
        """The connection called *name*.

        Raises
        ------
        ConfigError
            No connection has that name.
        """
        with self._lock:
            conn = self._connections.get(name)
            names = sorted(self._connections)
        if conn is None:
            known = ", ".join(names) or "none"
            raise ConfigError(f"no connection named {name!r} (connections: {known})")
        return conn

    def __getitem__(self, name: str) -> KernelConnection:
        return self.connection(name)

    def connect(
        self,
        name: str,
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        command: str | Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ) -> KernelConnection:
        """Connect to an MCP server and give it brokered access to the shared folders.

        Give either *url* (Streamable HTTP) or *command* (stdio: the server is
        started as a subprocess). Connecting again under a name in use closes
        the old connection first (re-running a cell does what it says).

        Parameters
        ----------
        name
            Your name for the connection: prompts, the dashboard and the audit log use it.
        url, headers
            The server's Streamable HTTP endpoint and extra HTTP headers (``Authorization`` ...).
        command, env, cwd
            The server's command line (a list, or a string split like a shell
            would), extra environment variables and working folder.
        timeout
            Seconds for the server to start and complete the handshake.

        Returns
        -------
        KernelConnection
            Open, with its tools listed.

        Raises
        ------
        ConnectError
            The server could not be started or reached, or refused the handshake.
        ProtocolVersionError
            The server cannot speak the MCP versions with server-to-client requests.
        ConfigError
            Neither or both of *url* and *command*, a URL that is not http(s),
            or an empty name.
        """
        self._check_not_loop_thread()
        coro = self._prepare_connect(name, url, headers, command, env, cwd, timeout)
        server = _wait(self._submit(coro))
        return self._connected(server)

    async def aconnect(
        self,
        name: str,
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        command: str | Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ) -> KernelConnection:
        """:meth:`connect` for async cells: ``conn = await broker.aconnect(...)``."""
        self._check_not_loop_thread()
        coro = self._prepare_connect(name, url, headers, command, env, cwd, timeout)
        future = self._submit(coro)
        try:
            server = await asyncio.wrap_future(future)
        except BaseException:
            future.cancel()
            raise
        return self._connected(server)

    def _prepare_connect(
        self,
        name: str,
        url: str | None,
        headers: Mapping[str, str] | None,
        command: str | Sequence[str] | None,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float | None,
    ) -> Any:
        self._check_open()
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("give the connection a name")
        if (url is None) == (command is None):
            raise ConfigError("give either url= (Streamable HTTP) or command= (stdio)")
        if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ConfigError(f"not an http(s) URL: {url!r}")
        argv = _command_argv(command) if command is not None else None
        with self._lock:
            old = self._connections.get(name)
        if old is not None and not old.closed:
            log.info("connection %r replaced", name)
            old._server.close("replaced by a new connection with the same name")
        return self._open(old, name, url, headers, argv, env, cwd, timeout)

    async def _open(
        self,
        old: KernelConnection | None,
        name: str,
        url: str | None,
        headers: Mapping[str, str] | None,
        argv: list[str] | None,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float | None,
    ) -> ServerConnection:
        if old is not None:
            try:
                await asyncio.wait_for(old._server.wait_closed(), _CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("the old connection %r did not close in time", name)
        errlog = self._new_server_log(name) if argv else None
        try:
            return await self._connect(name, errlog, url, headers, argv, env, cwd, timeout)
        except BaseException:
            if errlog is not None:
                with self._lock:
                    if self._server_logs.get(name) is errlog:
                        del self._server_logs[name]
                errlog.close()
            raise

    async def _connect(
        self,
        name: str,
        errlog: TextIO | None,
        url: str | None,
        headers: Mapping[str, str] | None,
        argv: list[str] | None,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float | None,
    ) -> ServerConnection:
        return await connect(
            self.core,
            name,
            errlog=errlog,
            command=argv[0] if argv else None,
            args=argv[1:] if argv else (),
            env=env,
            cwd=os.fspath(cwd) if cwd is not None else None,
            url=url,
            headers=headers,
            consenter=self._consenter,
            timeout=timeout,
        )

    def _new_server_log(self, name: str) -> TextIO:
        # Closed when the connection ends (or fails to open); anonymous, so nothing stays on disk.
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        with self._lock:
            previous = self._server_logs.pop(name, None)
            self._server_logs[name] = stderr
        if previous is not None and not previous.closed and previous is not stderr:
            previous.close()
        return stderr

    def _connected(self, server: ServerConnection) -> KernelConnection:
        with self._lock:
            stderr = self._server_logs.pop(server.name, None)
        conn = KernelConnection(self, server, stderr)
        with self._lock:
            if self._closed:
                server.close("the broker was closed")
                raise ClosedError("the broker is closed")
            self._connections[server.name] = conn
        if self._widgets and threading.current_thread() is threading.main_thread():
            self._show_card(conn)
        with contextlib.suppress(LoopClosedError):
            self._submit(self._watch(conn))
        self._changed()
        return conn

    async def _watch(self, conn: KernelConnection) -> None:
        await conn._server.wait_closed()
        conn._ended()

    def _show_card(self, conn: KernelConnection) -> None:
        try:
            import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]
            from IPython.display import display

            line = widgets.HTML(_card_text(conn))
            prompts = widgets.VBox()
            card = widgets.VBox([line, prompts])
            card.add_class("fsbroker-connection")

            def add(prompt: Any) -> None:
                with self._lock:
                    prompts.children = (*prompts.children, prompt)

            def remove(prompt: Any) -> None:
                with self._lock:
                    prompts.children = tuple(p for p in prompts.children if p is not prompt)

            conn._card_line = line
            conn._card = _PromptPlace(add, remove)
            with self._lock:
                self._owned_widgets += [card, line, prompts]
            display(card)  # type: ignore[no-untyped-call,unused-ignore]
        except Exception:
            log.exception("could not show the connection card")

    def disconnect(self, name: str, *, timeout: float = _CLOSE_TIMEOUT) -> None:
        """Close the connection *name* and wait (at most *timeout* seconds) until it is down."""
        conn = self.connection(name)
        conn.close()
        conn.wait_closed(timeout)

    # -- views ---------------------------------------------------------------------------------

    def dashboard(self) -> Any:
        """The dashboard widget: folders, connections (Disconnect), grants (Revoke), locks
        (Force release), changes, activity, and consent requests outside calls.

        One per broker; each display of it is a live view. In a terminal, the
        same information as text.
        """
        if not self._widgets:
            return _Text(self.status)
        dash = self._ensure_dashboard()
        with self._lock:
            self._dashboard_shown = True
        return dash

    def show_status(self) -> None:
        """Display the dashboard (or print the status where there are no widgets)."""
        if self._widgets:
            from IPython.display import display

            display(self.dashboard())  # type: ignore[no-untyped-call,unused-ignore]
        else:
            print(self.status())

    def status(self) -> str:
        """The dashboard as text."""
        from ..widgets.text import status_text

        return status_text(self.core, self._views)

    def _views(self) -> tuple[KernelConnection, ...]:
        with self._lock:
            return tuple(self._connections.values())

    def _ensure_dashboard(self) -> Any:
        with self._lock:
            self._check_open()
            if self._dashboard is not None:
                return self._dashboard
            from ..widgets.dashboard import Dashboard

            dash = ipk.run_detached(Dashboard, self.core, self._views)
            render = dash.refresh

            def refresh() -> None:
                # Rows are created while rendering, on the dashboard's timer thread: keep their
                # comms unpinned so Disconnect works while a cell blocks (see ipykernel_compat).
                ipk.run_detached(render)
                ipk.free_routing(dash)

            setattr(dash, "refresh", refresh)  # noqa: B010 - replaces the instance's method
            ipk.free_routing(dash)
            self._dashboard = dash
            self._dashboard_place = _PromptPlace(dash.add_prompt, dash.remove_prompt)
            return dash

    def _changed(self) -> None:
        dash = self._dashboard
        if dash is not None:
            dash.schedule_refresh()

    def _place_outside(self, ask: Ask) -> None:
        """A consent request with no call in flight: the dashboard if shown, else the connection's card."""
        if ask.prompt is None or self._closed:
            return
        with self._lock:
            place = self._dashboard_place if self._dashboard_shown else None
            if place is None:
                owner = next(
                    (c for c in self._connections.values() if c.id == ask.request.connection_id), None
                )
                place = owner._card if owner is not None else None
        if place is None:
            log.warning(
                "consent request from %s with no visible place to ask: run %%fsbroker status to see it",
                ask.request.server,
            )
            try:
                self._ensure_dashboard()
            except ClosedError:
                return
            place = self._dashboard_place
        assert place is not None
        forget = self._kernel_consenter.forget if self._kernel_consenter is not None else (lambda ask: None)
        place.put(ask, forget)

    # -- calls (used by KernelConnection) ------------------------------------------------------

    def _enter_call(self, conn: KernelConnection) -> CallScope:
        scope = CallScope(
            conn.id,
            broker=self.core,
            kernel=self._kernel,
            widgets=self._widgets,
            stdin_mode=lambda: str(self.settings.stdin_fallback).lower(),
            show_progress=lambda: bool(self.settings.show_progress),
            place_outside=self._place_outside,
        )
        if self._kernel_consenter is not None:
            self._kernel_consenter.enter(scope)
        return scope

    def _leave_call(self, scope: CallScope) -> None:
        if self._kernel_consenter is not None:
            self._kernel_consenter.leave(scope)
        scope.end()
        if scope.panel is not None:
            with self._lock:
                self._owned_widgets.append(scope.panel)

    def _submit(self, coro: Any) -> Future[Any]:
        try:
            return self._loop.submit(coro)
        except LoopClosedError:
            raise ClosedError("the broker is closed") from None

    def _check_not_loop_thread(self) -> None:
        if self._loop.in_loop_thread():
            raise RuntimeError("blocking broker calls cannot run on the broker's own event loop")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the broker is closed (%reload_ext jupyter_fsbroker starts a new one)")

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, *, at_exit: bool = False) -> None:
        """Close every connection, then the broker: no thread, watcher, lock or temp file remains.

        Idempotent. Waits a few seconds at most for transports to come down.

        Parameters
        ----------
        at_exit
            The process is ending (``atexit``): leave the widgets alone.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._connections.values())
            dash, self._dashboard = self._dashboard, None
            owned, self._owned_widgets = self._owned_widgets, []
        self.settings.unobserve(self._live_setting_changed, names=list(LIVE_TRAITS))
        self.settings.unobserve(self._roots_changed, names=["roots", "read_only_roots", "allow"])
        self.settings.unobserve(self._audit_changed, names=["audit_file"])
        for conn in conns:
            conn._server.close("the notebook's broker was closed")
        if conns and self._loop.running:
            try:
                waiter = self._loop.submit(_wait_all([c._server for c in conns], _CLOSE_TIMEOUT))
                waiter.result(_CLOSE_TIMEOUT + 1.0)
            except (LoopClosedError, concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                log.warning("some connections did not close in time")
        for conn in conns:
            if conn._stderr is not None:
                conn._stderr.close()
        with self._lock:
            pending_logs, self._server_logs = list(self._server_logs.values()), {}
        for stderr in pending_logs:
            stderr.close()
        asks = self._kernel_consenter.asks() if self._kernel_consenter is not None else []
        if self._kernel_consenter is not None:
            self._kernel_consenter.close()
        if not at_exit:
            for widget in [*(a.prompt for a in asks if a.prompt is not None), *owned]:
                try:
                    widget.close()
                except Exception:
                    log.debug("could not close a widget", exc_info=True)
            if dash is not None:
                try:
                    dash.close()
                except Exception:
                    log.debug("could not close the dashboard", exc_info=True)
        self.core.close()
        self._loop.stop()
        if self._terminal is not None:
            self._terminal.close()

    def __enter__(self) -> NotebookBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _wait_all(servers: list[ServerConnection], timeout: float) -> None:
    await asyncio.wait_for(asyncio.gather(*(s.wait_closed() for s in servers)), timeout)


def _widgets_available() -> bool:
    try:
        import ipywidgets  # type: ignore[import-untyped,unused-ignore]  # noqa: F401

        from ..widgets import consent, dashboard, progress  # noqa: F401
    except ImportError:
        return False
    return True


# -- one per kernel ----------------------------------------------------------------------------

_current: NotebookBroker | None = None
_current_lock = threading.Lock()
_standalone_atexit = False


def _set_current(broker: NotebookBroker | None) -> None:
    global _current
    with _current_lock:
        _current = broker


def _get_shell() -> Any | None:
    if "IPython" not in sys.modules:
        return None
    from IPython.core.getipython import get_ipython

    return get_ipython()  # type: ignore[no-untyped-call,unused-ignore]


def get_broker() -> NotebookBroker:
    """The broker of this kernel, started (as ``%load_ext jupyter_fsbroker`` would) if needed.

    In IPython or a Jupyter kernel this loads the extension, so ``%fsbroker``
    and the ``FSBroker`` settings work too; in a plain Python process it starts
    a broker that closes when the process exits.

    Returns
    -------
    NotebookBroker
        The same object on every call until the extension is unloaded.
    """
    global _standalone_atexit
    broker = _current
    if broker is not None and not broker.closed:
        return broker
    shell = _get_shell()
    if shell is not None:
        from .extension import load_ipython_extension

        manager = getattr(shell, "extension_manager", None)
        if manager is not None and "jupyter_fsbroker" not in manager.loaded:
            manager.load_extension("jupyter_fsbroker")
        broker = _current
        if broker is None or broker.closed:  # loaded once, then closed by hand
            load_ipython_extension(shell)
            broker = _current
        assert broker is not None
        return broker
    with _current_lock:
        broker = _current
        if broker is None or broker.closed:
            broker = NotebookBroker()
            globals()["_current"] = broker
            if not _standalone_atexit:
                atexit.register(_close_standalone)
                _standalone_atexit = True
    return broker


def _close_standalone() -> None:
    broker = _current
    if broker is not None:
        broker.close(at_exit=True)
