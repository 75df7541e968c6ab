"""The notebook's connections by name: :class:`ConnectionRegistry` opens, finds, replaces and ends them.

Connecting is three steps: the target is checked on the caller's thread (and a
connection of the same name is told to close: re-running a cell does what it
says), the server is reached on the background loop (after the replaced one is
down), and the new connection is registered, shown and watched until its
transport ends. The registry holds the connections; the notebook broker hands
its public ``connect`` and ``aconnect`` to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Unpack

from ..core.broker import Broker
from ..core.consent import Consenter
from ..core.errors import ClosedError, ConfigError
from ..sandbox import Sandbox
from .calls import CallRunner
from .notebook_connection import KernelConnection
from .servers import ServerTarget, TargetOptions
from .sign_ins import NotebookSignIns
from .views import NotebookViews

if TYPE_CHECKING:  # the MCP client is imported with the first connection (see .servers)
    from ..protocol.auth import SignIn
    from ..protocol.server_connection import ServerConnection

__all__ = ["ConnectionRegistry"]

log = logging.getLogger(__name__)

#: Seconds a replaced connection, or every connection at close, gets to come down.
CLOSE_TIMEOUT = 10.0


class ConnectionRegistry:
    """The connections of one notebook broker, by name.

    Parameters
    ----------
    owner
        The notebook broker the connections belong to (what they call ``broker``).
    core
        The core broker they are opened on.
    runner
        Runs the connecting on the background loop.
    views
        Shows each connection (its card, the dashboard) and its changes.
    consenter
        Who answers the connections' consent requests.
    default_sandbox
        Returns the sandbox of a connection that does not name one (the setting's).
    before
        Called on the caller's thread before each connect (the warm-up's imports, which it
        waits for: the caller imports the MCP client next).
    closed
        Returns whether the owner is closed: then nothing new connects.
    sign_ins
        Decides the sign-in settings of URL connections, and shows a sign-in a connect starts
        in the connecting cell (with *views*).
    """

    def __init__(
        self,
        owner: Any,
        core: Broker,
        *,
        runner: CallRunner,
        views: NotebookViews,
        consenter: Callable[[], Consenter],
        default_sandbox: Callable[[], Sandbox | None],
        before: Callable[[], None],
        closed: Callable[[], bool],
        sign_ins: NotebookSignIns,
    ) -> None:
        self._owner = owner
        self._sign_ins = sign_ins
        self._core = core
        self._runner = runner
        self._views = views
        self._consenter = consenter
        self._default_sandbox = default_sandbox
        self._before = before
        self._closed = closed
        self._lock = threading.Lock()
        self._by_name: dict[str, KernelConnection] = {}
        self._ended = False

    # -- finding -------------------------------------------------------------------------------

    def by_name(self) -> dict[str, KernelConnection]:
        """The connections by name (closed ones stay until replaced)."""
        with self._lock:
            return dict(self._by_name)

    def all(self) -> tuple[KernelConnection, ...]:
        """Every connection, in the order they connected."""
        with self._lock:
            return tuple(self._by_name.values())

    def get(self, name: str) -> KernelConnection:
        """The connection called *name*.

        Raises
        ------
        ConfigError
            No connection has that name.
        """
        with self._lock:
            conn = self._by_name.get(name)
            names = sorted(self._by_name)
        if conn is None:
            known = ", ".join(names) or "none"
            raise ConfigError(f"no connection named {name!r} (connections: {known})")
        return conn

    # -- connecting ----------------------------------------------------------------------------

    def connect(self, name: str, **options: Unpack[TargetOptions]) -> KernelConnection:
        """Connect from a cell (see :meth:`NotebookBroker.connect <.notebook.NotebookBroker.connect>`)."""
        self._runner.check_thread()
        self._before()
        target = self._target(name, **options)
        future = self._runner.submit(self._open(target))
        return self._register(self._sign_ins.wait_connecting(name, future, self._show_sign_in))

    async def aconnect(self, name: str, **options: Unpack[TargetOptions]) -> KernelConnection:
        """:meth:`connect` for async cells."""
        self._runner.check_thread()
        self._before()
        target = self._target(name, **options)
        future = self._runner.submit(self._open(target))
        return self._register(await self._sign_ins.await_connecting(name, future, self._show_sign_in))

    def _show_sign_in(self, sign_in: SignIn) -> None:
        self._views.show_sign_in(sign_in, self._sign_ins.respond)

    def _target(self, name: str, **options: Unpack[TargetOptions]) -> ServerTarget:
        """Check the arguments; tell a connection of the same name to close."""
        if self._closed():
            raise ClosedError("the broker is closed (%reload_ext jupyter_fsbroker starts a new one)")
        target = ServerTarget.check(name, default_sandbox=self._default_sandbox(), **options)
        target = dataclasses.replace(
            target, auth=self._sign_ins.settings_for(name, target.url, options.get("auth"))
        )
        with self._lock:
            old = self._by_name.get(name)
        if old is not None and not old.closed:
            log.info("connection %r replaced", name)
            old.server.close("replaced by a new connection with the same name")
        return target

    async def _open(self, target: ServerTarget) -> ServerConnection:
        """On the loop: wait for a replaced connection to end, then connect."""
        with self._lock:
            old = self._by_name.get(target.name)
        if old is not None:
            try:
                await asyncio.wait_for(old.server.wait_closed(), CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("the old connection %r did not close in time", target.name)
        return await target.open(self._core, self._consenter())

    def _register(self, server: ServerConnection) -> KernelConnection:
        conn = KernelConnection(
            server, broker=self._owner, runner=self._runner, on_change=self._views.connection_changed
        )
        with self._lock:
            if self._ended or self._closed():
                server.close("the broker was closed")
                raise ClosedError("the broker is closed")
            self._by_name[server.name] = conn
        # Followed before the card shows: the card reads the notice in force once it follows
        # (NotebookViews.show_card), and every later one comes through here.
        unfollow = server.roots_offer.follow(lambda _notice: self._views.connection_changed(conn))
        self._views.show_card(conn)
        with contextlib.suppress(ClosedError):  # closing: close() ends the connection
            self._runner.submit(self._watch(conn, unfollow))
        self._views.refresh()
        return conn

    async def _watch(self, conn: KernelConnection, unfollow: Callable[[], None]) -> None:
        """On the loop, until the transport is down: then show the change."""
        try:
            await conn.server.wait_closed()
        finally:
            unfollow()
        self._views.connection_changed(conn)

    # -- ending --------------------------------------------------------------------------------

    def disconnect(self, name: str, *, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close the connection *name* and wait (at most *timeout* seconds) until it is down."""
        conn = self.get(name)
        conn.close()
        conn.wait_closed(timeout)

    def close(self) -> None:
        """Close every connection and wait (a few seconds at most) until they are down. Idempotent."""
        with self._lock:
            self._ended = True
            conns = list(self._by_name.values())
        for conn in conns:
            conn.server.close("the notebook's broker was closed")
        if not conns:
            return
        try:
            waiter = self._runner.submit(_wait_all([c.server for c in conns], CLOSE_TIMEOUT))
            waiter.result(CLOSE_TIMEOUT + 1.0)
        except ClosedError:
            return  # the loop is down: so are the transports
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            log.warning("some connections did not close in time")


async def _wait_all(servers: list[ServerConnection], timeout: float) -> None:
    await asyncio.wait_for(asyncio.gather(*(s.wait_closed() for s in servers)), timeout)
