"""Server→client requests written straight onto the helper's own stdio pipe, and their answers.

A ``files/*`` request sent through mcp 2.3's ``ServerSession.send_request``
passes a typed request model, a dump of it, the dispatcher (its pending
table, a memory stream per request, an OpenTelemetry span and trace-context
injection, a request clock), the outbound memory stream and a second dump;
its answer is validated as a JSON-RPC model, routed by the dispatcher and
validated twice more. Over :func:`~.stdio_server.run_stdio`, that costs the
server about as much CPU per small ``files/read`` as the brokering client
spends answering it (``benchmarks/README.md``, "Why the code is shaped this way").

When the helper serves stdio on its own pipes (:func:`~.stdio_server.stdio_streams`),
a :class:`DirectChannel` sends such requests itself: one JSON line, with an id
of its own (``"fsb-"`` and a number, a string, so it can never be one of the
integers mcp's session gives its requests), and the pipe's reader hands every
answer carrying such an id back to it (:meth:`DirectChannel.route`) before mcp
parses anything. What the wire carries is the same JSON-RPC request, and the
caller sees what the session would have given it: the raw result, or the
error answer as an ``MCPError``-equivalent :class:`~.exceptions.FilesRequestError`, a
timeout as :class:`~.exceptions.RequestTimeoutError` after a
``notifications/cancelled``, a cancelled caller likewise announced, and
:class:`~.exceptions.ClientDisconnectedError` when the pipe ends. Over any other
transport (Streamable HTTP, mcp's own stdio) requests go through the session
as before: :func:`current_channel` is ``None`` there.

A request sent with ``binary=True`` (a chunk of :meth:`~.files_client.FilesClient.iter_chunks`)
gets a large base64 ``content`` decoded where its answer is read
(:meth:`DirectChannel.wants_bytes`, asked by :class:`~.inbound.LineReader`):
the bytes the tool needs, and no 1.4 MB of text made and dropped for each MiB.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
import pydantic_core
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

from .exceptions import error_from_jsonrpc

__all__ = ["DirectChannel", "current_channel"]

log = logging.getLogger(__name__)

#: How the ids of direct requests begin (mcp's own requests have integer ids).
ID_PREFIX = "fsb-"

# How long a courtesy cancellation may take to write when the caller gives up.
_CANCEL_WRITE_TIMEOUT = 1.0

_current: ContextVar[DirectChannel | None] = ContextVar("jupyter_fsbroker_direct_channel", default=None)


def current_channel() -> DirectChannel | None:
    """The channel of the stdio pipe this task serves, or ``None`` (requests go through the session)."""
    channel = _current.get()
    return None if channel is None or channel.closed else channel


class DirectChannel:
    """Requests to the client written as JSON lines on *writer*, answered through :meth:`route`.

    Parameters
    ----------
    writer
        The pipe to the client (the one mcp's messages are written to as well:
        each message is one ``write`` of a whole line, so lines never interleave).
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._binary: set[str] = set()  # ids of the requests whose base64 content comes decoded
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the pipe ended (or the server stopped serving it)."""
        return self._closed

    @contextmanager
    def active(self) -> Iterator[DirectChannel]:
        """Make this the channel of :func:`current_channel` in this context (and the tasks it starts)."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)
            self.close()

    async def request(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None, *, binary: bool = False
    ) -> dict[str, Any]:
        """Send one request and return the result of its answer.

        With *binary*, a large base64 ``content`` of the result comes as
        ``bytes``, decoded (see :meth:`wants_bytes`).

        Raises
        ------
        FilesRequestError
            The client answered with an error (the class :func:`~.exceptions.error_from_jsonrpc`
            picks), did not answer within *timeout* seconds
            (:class:`~.exceptions.RequestTimeoutError`), or the pipe ended
            (:class:`~.exceptions.ClientDisconnectedError`).
        """
        if self._closed:
            raise error_from_jsonrpc(CONNECTION_CLOSED, "Connection closed", method=method)
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = dict(params)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        if binary:
            self._binary.add(request_id)
        written = False
        try:
            try:
                self._write(message)
                written = True
                await self._writer.drain()
                with anyio.fail_after(timeout):
                    outcome = await answer
            except TimeoutError:
                if not written:
                    raise
                await self._cancel(request_id, f"timed out after {timeout}s")
                raise error_from_jsonrpc(
                    REQUEST_TIMEOUT, f"Request {method!r} timed out", method=method
                ) from None
            except (ConnectionError, OSError):
                raise error_from_jsonrpc(CONNECTION_CLOSED, "Connection closed", method=method) from None
            except anyio.get_cancelled_exc_class():
                if written and not self._closed:
                    with anyio.CancelScope(shield=True):
                        await self._cancel(request_id, "caller cancelled")
                raise
        finally:
            self._pending.pop(request_id, None)
            self._binary.discard(request_id)
        return _result_of(outcome, method)

    def wants_bytes(self, message: object) -> bool:
        """Whether *message* (a parsed answer, its content aside) answers a request sent with ``binary``."""
        return type(message) is dict and message.get("id") in self._binary

    def route(self, raw: object) -> bool:
        """Take *raw* (a message read from the pipe) if it answers one of this channel's requests.

        An answer to a request that was given up (timed out, cancelled) is
        taken and dropped, as mcp's session drops late answers.
        """
        if type(raw) is not dict or "method" in raw:
            return False
        request_id = raw.get("id")
        if not isinstance(request_id, str) or not request_id.startswith(ID_PREFIX):
            return False
        answer = self._pending.get(request_id)
        if answer is not None and not answer.done():
            answer.set_result(raw)
        return True

    def close(self) -> None:
        """The pipe ended: every request still waiting fails with ``ClientDisconnectedError``."""
        self._closed = True
        for answer in self._pending.values():
            if not answer.done():
                answer.set_result(_CLOSED)

    def _write(self, message: dict[str, Any]) -> None:
        self._writer.write(pydantic_core.to_json(message) + b"\n")

    async def _cancel(self, request_id: str, reason: str) -> None:
        """A courtesy ``notifications/cancelled`` for a request given up (never raises)."""
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        try:
            self._write(notice)
            with anyio.move_on_after(_CANCEL_WRITE_TIMEOUT):
                await self._writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            log.debug("could not cancel request %s: the pipe is gone", request_id)


#: What :meth:`DirectChannel.close` hands the requests still waiting.
_CLOSED: dict[str, Any] = {"error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}}


def _result_of(outcome: dict[str, Any], method: str) -> dict[str, Any]:
    """The result of an answer, or the typed error it carries."""
    result = outcome.get("result")
    if isinstance(result, dict) and "error" not in outcome:
        return result
    error = outcome.get("error")
    if isinstance(error, dict) and "result" not in outcome:
        code = error.get("code")
        message = error.get("message")
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            raise error_from_jsonrpc(code, message, error.get("data"), method=method)
    raise error_from_jsonrpc(INTERNAL_ERROR, "the client's answer is not valid JSON-RPC", method=method)
