"""The life of a :class:`~.server_connection.ServerConnection`, in one task: :class:`ConnectionTask`.

The connection's whole ``async with`` stack (transport, middleware, session) lives in one
long-lived task on the event loop that connected, which waits for a close request or for the
transport to end, so a close works from any task (and, posted, from any thread). It runs the
handshake (:mod:`.handshake`), the keep-alive pings (:mod:`.liveness`), follows the broker
(:mod:`.broker_bridge`), and once it ends, however, says why: a connect that failed raises a
:class:`~.client_errors.ConnectError` naming the cause (quoting the server's last stderr lines,
which often say it), and :attr:`ConnectionTask.close_reason` is set.

A transport wedged by a peer that died mid-stream gets :data:`TEARDOWN_TIMEOUT` seconds to shut
down once the connection is closing; then it is cut off.
"""

from __future__ import annotations

import asyncio
import logging
import math
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage

from ..core.errors import BrokerError
from ..core.hop import post
from .broker_bridge import BrokerBridge
from .client_errors import (
    ConnectError,
    ConnectionClosedError,
    describe_failure,
    find_connect_error,
    innermost,
)
from .desk.core_slot import CoreSlot
from .files_batches import EXTENSION, BatchDesk, FilesBatchExtension, new_connection_id
from .handshake import (
    CLIENT_INFO,
    DEFAULT_ERA,
    EraChoice,
    ServerInfo,
    asker,
    given_name,
    initial_tools,
    negotiate,
)
from .liveness import Liveness
from .middleware import BrokerMiddleware
from .transports import Opener
from .validation import prepare_output_validation
from .voice import ServerVoice

if TYPE_CHECKING:
    from .server_connection import ConnectionState, ServerConnection

__all__ = ["TEARDOWN_TIMEOUT", "ConnectionTask"]

log = logging.getLogger(__name__)

#: Seconds the transport gets to shut down once the connection is closing (then it is cut off).
TEARDOWN_TIMEOUT = 10.0

_TRANSPORT_NAMES = {"stdio": "stdio", "http": "HTTP"}


class ConnectionTask:
    """The task that holds one connection open, and how it ends.

    Parameters
    ----------
    conn
        The connection it serves (its name, transport, target, log, broker, roots).
    opener
        Opens the transport.
    keepalive
        Seconds between keep-alive pings; ``None``: no pings.
    slot
        The broker side of the connection.
    voice
        Where the server's stderr and log messages go.
    bridge
        The broker's events for the server.
    era
        The era asked for (see :func:`.handshake.discover`).

    Attributes
    ----------
    state
        ``connecting``, ``open``, ``closing`` or ``closed``, as the task sees it.
    close_reason
        Why the connection ended (or is ending); ``None`` while it is open.
    session
        The MCP session while the connection is open.
    info
        What the server said about itself in ``initialize``.
    tools
        The server's tools, in wire spelling (the connection refreshes them).
    liveness
        The connection's pings.
    extension
        The files extension: what the connection advertises, and the connection id of the
        2026-07-28 era.
    batches
        Performs the batches of the 2026-07-28 era while the connection is open on it.
    """

    def __init__(
        self,
        conn: ServerConnection,
        *,
        opener: Opener,
        keepalive: float | None,
        slot: CoreSlot,
        voice: ServerVoice,
        bridge: BrokerBridge,
        era: EraChoice = DEFAULT_ERA,
    ) -> None:
        self._conn = conn
        self._era: EraChoice = era
        self._opener = opener
        self._keepalive = keepalive
        self._slot = slot
        self._voice = voice
        self._bridge = bridge
        self._loop = asyncio.get_running_loop()
        self.state: ConnectionState = "connecting"
        self.close_reason: str | None = None
        self.session: ClientSession | None = None
        self.info = ServerInfo()
        self.tools: tuple[dict[str, Any], ...] = ()
        self.liveness = Liveness(self)
        self.extension = FilesBatchExtension(
            lambda: self.batches, new_connection_id(), self._closed_reason, lambda: self.info.files_features
        )
        self.batches: BatchDesk | None = None
        self._asked_reason: str | None = None  # set by ask_close() before the broker side closes
        self._interrupted = False
        self._failure: BaseException | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        """The connection's name (it may change once, in the handshake)."""
        return self._conn.name

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return self._conn.transport

    @property
    def stopping(self) -> bool:
        """Whether the connection was asked to end."""
        return self._stop.is_set()

    async def start(self, timeout: float | None) -> None:
        """Start the task; wait until the handshake is done.

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
            self.request_close("connecting was cancelled")
            with anyio.CancelScope(shield=True):  # the teardown is bounded (stdio: a few seconds at most)
                await self._done.wait()
            raise

    def postpone_deadline(self, seconds: float) -> None:
        """Give the handshake *seconds* more (a person is signing in meanwhile); nothing once open."""
        if not self._ready.done() and self._scope.deadline != math.inf:
            self._scope.deadline += seconds

    async def wait_closed(self) -> None:
        """Wait until the task has ended, for whatever reason."""
        await self._done.wait()

    def ask_close(self, reason: str) -> None:
        """Any thread: close the broker side now and the transport on the loop, right after."""
        self._asked_reason = self._asked_reason or reason
        self._slot.close(reason)
        post(self._loop, self.request_close, reason)  # a closed loop: nothing left to tear down

    def ask_close_here(self, reason: str) -> None:
        """On the loop: :meth:`ask_close`, with the transport's teardown begun at once."""
        self._asked_reason = self._asked_reason or reason
        self._slot.close(reason)
        self.request_close(reason)

    def request_close(self, reason: str, *, interrupt: bool = True) -> None:
        """On the loop: end the task (before or after the handshake).

        *interrupt* also stops a handshake in progress (a close by the user);
        without it, a handshake in progress fails on its own.
        """
        if self._done.is_set():
            return
        # Whatever the transport does next, the server's grants, locks, watches and uploads end now.
        self._slot.close()
        if self.close_reason is None:
            self.close_reason = reason
            self._interrupted = interrupt and not self._ready.done()
        if self.state == "open":
            self.state = "closing"
        if self.batches is not None:
            self.batches.close(f"the connection {self.name!r} closed ({self.close_reason})")
        if interrupt and not self._ready.done():
            self._scope.cancel()
        self._stop.set()
        # A transport wedged by a peer that died mid-stream must not keep the connection closing forever.
        self._scope.deadline = min(self._scope.deadline, self._loop.time() + TEARDOWN_TIMEOUT)

    # -- the task ------------------------------------------------------------------------------

    async def _run(self, timeout: float | None) -> None:
        try:
            with self._scope:
                await self._serve()
        except Exception as exc:
            self._failure = exc
            if self._ready.done():
                log.warning("connection %r failed: %s", self.name, describe_failure(exc))
                if self._asked_reason is None:  # not closed on purpose: say what broke
                    self.close_reason = (
                        f"the {_TRANSPORT_NAMES[self.transport]} transport failed: {describe_failure(exc)}"
                    )
        finally:
            self._finish(timeout)

    async def _serve(self) -> None:
        conn = self._conn
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._opener(self._voice.stderr))
            middleware = BrokerMiddleware(
                read,
                write,
                core=self._slot,
                roots=conn.roots_offer,
                on_transport_closed=self._transport_closed,
                label=f"connection {self.name!r}",
                max_in_flight=conn.broker.config.limits.max_in_flight,
                roots_gate=conn.roots_gate,
                on_initialize_result=self._on_initialize_result,
            )
            session_read, session_write = await stack.enter_async_context(middleware.attach())
            self._bridge.middleware = middleware
            session = await stack.enter_async_context(
                ClientSession(
                    session_read,
                    session_write,
                    client_info=CLIENT_INFO,
                    message_handler=self._on_message,
                    logging_callback=self._voice.message,
                    extensions={EXTENSION: self.extension.settings()},
                    result_claims={EXTENSION: self.extension.claims()},
                )
            )
            self.info, modern = await negotiate(
                session, middleware, self.name, self._era, per_request_era=self.transport == "http"
            )
            if modern:
                self._on_initialize_result({"serverInfo": dict(self.info.server_info)})
                self.batches = BatchDesk(
                    self._slot,
                    roots_list=conn.roots_offer.answer,
                    max_in_flight=conn.broker.config.limits.max_in_flight,
                    on_failure=self._batch_failed,
                    label=f"connection {self.name!r}",
                )
                stack.push_async_callback(self.batches.aclose)
                core = self._slot.connection
                if core is not None:
                    core.keep_changes()  # no notifications: files/changes hands the events over
            self.tools = await initial_tools(session, self.info, self.name)
            if any("outputSchema" in tool for tool in self.tools):
                prepare_output_validation()
            self.session = session
            self._bridge.follow(stack, self._slot, self._broker_side_closed)
            self._scope.deadline = math.inf
            self.state = "open"
            self._ready.set_result(None)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                # The 2026-07-28 era has no ping, and nothing held open between requests to keep alive.
                if self._keepalive is not None and self.batches is None:
                    tg.start_soon(self.liveness.keep_alive, session, self._keepalive)
                await self._stop.wait()
                self.state = "closing"
                tg.cancel_scope.cancel()
            self._tg = None

    def _finish(self, timeout: float | None) -> None:
        """Runs once the task is done, however it ended."""
        self.state = "closed"
        self.session = None
        self._bridge.middleware = None
        self._slot.close()
        error: BaseException | None = None
        if not self._ready.done():
            error = self._quote_stderr(self._connect_error(timeout))
        if self.close_reason is None:
            if error is not None:
                self.close_reason = str(error)
            elif self._failure is not None:
                transport = _TRANSPORT_NAMES[self.transport]
                self.close_reason = f"the {transport} transport failed: {describe_failure(self._failure)}"
            else:
                self.close_reason = "the connection ended"
        if error is not None:
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved here, so an abandoned connect never warns
        self._done.set()

    def _quote_stderr(self, error: BaseException) -> BaseException:
        """*error*, quoting the last lines the server wrote on its stderr (they often say why)."""
        lines = [e.text for e in self._conn.log.entries() if e.source == "stderr" and e.text.strip()]
        if type(error) is not ConnectError or not lines:
            return error
        tail = " | ".join(_short(line) for line in lines[-3:])
        return ConnectError(f"{error}; its stderr ended with: {tail}")

    def _connect_error(self, timeout: float | None) -> BaseException:
        name, target = self.name, self._conn.target
        failure = self._failure
        if failure is None:
            if self._interrupted:
                return ConnectionClosedError(
                    f"{name!r} was closed before it was connected ({self.close_reason})"
                )
            if self._scope.cancelled_caught and timeout is not None:
                return ConnectError(
                    f"{name!r} did not complete the MCP handshake within {timeout:g} s ({target})"
                )
            return ConnectError(
                f"the server of {name!r} ended the connection during the handshake ({target})"
            )
        own = find_connect_error(failure)
        if own is not None:
            return own
        leaf = innermost(failure)
        if self.transport == "stdio" and isinstance(leaf, OSError):
            return ConnectError(f"cannot start the server of {name!r} ({target}): {leaf}")
        if self.transport == "http" and isinstance(leaf, httpx2.HTTPError | OSError):
            # httpx's own ConnectError would name itself next to ours ("ConnectError: ConnectError: …").
            why = str(leaf) or describe_failure(leaf)
            return ConnectError(f"cannot reach the server of {name!r} at {target}: {why}")
        return ConnectError(f"connecting {name!r} ({target}) failed: {describe_failure(leaf)}")

    # -- events --------------------------------------------------------------------------------

    def _transport_closed(self) -> None:
        if self.transport == "stdio":
            self.request_close("the server process exited", interrupt=False)
        else:
            self.request_close("the server closed the connection", interrupt=False)

    def _closed_reason(self) -> str | None:
        """``None`` while the connection is open (its broker side too), else why it is not."""
        core = self._slot.connection
        if self.state == "open" and not self._stop.is_set() and core is not None and not core.closed:
            return None
        return self.close_reason or self._asked_reason or "the broker closed the connection"

    def _batch_failed(self, failure: BaseException) -> None:
        log.error("connection %r: answering a batch failed", self.name, exc_info=failure)
        self.request_close(f"answering a batch failed ({type(failure).__name__})", interrupt=False)

    def _broker_side_closed(self) -> None:
        """Any thread: our broker-side connection is closed; end the transport too."""
        if not self._done.is_set():
            reason = self._asked_reason or "the broker closed the connection"
            post(self._loop, self.request_close, reason)  # a closed loop: nothing left to tear down

    def _on_initialize_result(self, result: dict[str, Any]) -> None:
        """On the loop, before the session sees the answer: name the connection after the server.

        Consent prompts then also say who asks (the server's own name, where it runs).
        """
        if not self._slot.settled:
            name = given_name(result)
            if name:
                self._conn.name = name
                self._voice.rename(name)
            self._slot.open(self.name)
        core = self._slot.connection
        if core is not None:
            sandbox = self._conn.sandbox
            confined = None if sandbox is None else sandbox.confined
            core.access.asker = asker(result, self.transport, self._conn.target, confined)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            log.warning("connection %r: the transport reported %s", self.name, describe_failure(message))
        elif isinstance(message, types.ToolListChangedNotification) and self._tg is not None:
            self._tg.start_soon(self._refresh_quietly)

    async def _refresh_quietly(self) -> None:
        try:
            await self._conn.refresh_tools()
        except (BrokerError, TimeoutError) as exc:
            log.warning("connection %r: could not refresh the tool list: %s", self.name, exc)


def _short(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
