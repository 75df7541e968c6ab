"""Whether a connected server is still there: keep-alive pings, and the probe after a lost answer.

A :class:`Liveness` belongs to one :class:`~.lifecycle.ConnectionTask`. It pings the server
every ``keepalive`` seconds (a server silent for :data:`SILENT_PINGS` pings in a row counts as
gone, or it would hold its locks and watches forever), and when a call fails in a way that may
mean the connection is gone, a ping tells whether it is: the call's error then says so, with the
reason the connection closed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT

from .client_errors import ConnectionClosedError, ServerError

if TYPE_CHECKING:
    from .lifecycle import ConnectionTask

__all__ = ["SILENT_PINGS", "Liveness"]

log = logging.getLogger(__name__)

#: Keep-alive pings left unanswered in a row after which the server counts as gone.
SILENT_PINGS = 3

# How long a failed call waits for the connection to finish closing, to name why.
_CLOSE_REASON_WAIT = 5.0

# Seconds a liveness probe after a dropped response waits for the ping.
_PROBE_TIMEOUT = 5.0


class Liveness:
    """Pings for one connection, and what a failed call's error says.

    Parameters
    ----------
    task
        The connection's task: its session, and how it closes.
    """

    def __init__(self, task: ConnectionTask) -> None:
        self._task = task

    async def keep_alive(self, session: ClientSession, interval: float) -> None:
        """Ping every *interval* seconds until the server is gone or silent too long."""
        silent = 0
        while True:
            await anyio.sleep(interval)
            alive = await self.ping(session, max(interval, 10.0))
            if alive is False:
                return
            silent = silent + 1 if alive is None else 0
            if silent >= SILENT_PINGS:  # or it would hold its locks and watches forever
                self._task.request_close(f"the server did not answer {silent} pings in a row")
                return

    async def ping(self, session: ClientSession, timeout: float) -> bool | None:
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
                if self.maybe_lost(exc):
                    # An HTTP 404 for our session id: the server forgot it (it restarted).
                    self._task.request_close(f"the server no longer knows the HTTP session ({exc.message})")
                else:
                    self._task.request_close(f"the server stopped answering ({exc.message})")
                return False
        log.warning("connection %r: the server did not answer a ping within %g s", self._task.name, timeout)
        return None

    def maybe_lost(self, exc: MCPError) -> bool:
        """Whether *exc* may mean that the connection is gone (a ping tells)."""
        return exc.code == CONNECTION_CLOSED or (
            self._task.transport == "http" and exc.code == INVALID_REQUEST
        )

    async def call_error(self, exc: MCPError, what: str, timeout: float | None) -> Exception:
        """The error to raise for a call (*what*) that failed with *exc*.

        A timeout is a :class:`TimeoutError`; an error that may mean the connection is gone is
        probed with a ping: a :class:`~.client_errors.ConnectionClosedError` naming why it
        closed, or the server's error if it is still there; anything else is a
        :class:`~.client_errors.ServerError`.
        """
        task = self._task
        if exc.code == REQUEST_TIMEOUT:
            within = "" if timeout is None else f" within {timeout:g} s"
            return TimeoutError(f"{what} on {task.name!r} got no answer{within}")
        if not self.maybe_lost(exc):
            return ServerError(exc.code, exc.message, exc.data)
        # Either the connection is ending, or (HTTP) the response stream broke or the
        # server no longer knows our session: a ping tells whether it is still there.
        session = task.session
        if session is not None and not task.stopping:
            alive = await self.ping(session, _PROBE_TIMEOUT)
            if alive:
                return ServerError(exc.code, f"{what}: {exc.message}", exc.data)
            if alive is None:  # the stream broke and it is silent: gone, or its transport wedged
                task.request_close(f"the server stopped answering (no answer within {_PROBE_TIMEOUT:g} s)")
        with anyio.move_on_after(_CLOSE_REASON_WAIT):
            await task.wait_closed()
        return ConnectionClosedError(
            f"{what} failed: the connection {task.name!r} closed ({task.close_reason or 'connection lost'})"
        )
