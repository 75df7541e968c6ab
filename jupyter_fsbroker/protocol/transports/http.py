"""The client side of Streamable HTTP (a stateful session, the handshake era).

:func:`open_session` yields the same ``(read_stream, write_stream)`` pair as
mcp's ``streamable_http_client`` and keeps the session semantics a server
relies on: the ``Mcp-Session-Id`` the server gives on ``initialize`` and the
negotiated ``MCP-Protocol-Version`` on every later request; each request a POST
whose answer is JSON or a server-sent event stream (which also carries the
server's requests while it runs); a GET stream for server→client messages
outside any request, opened once ``notifications/initialized`` is accepted;
``DELETE`` of the session on close. Redirects are followed only when they keep
the method and stay on the endpoint's origin. A request's event stream that ends
or breaks before its answer is resumed (SEP-1699): after the server's ``retry``
delay, a GET with ``Last-Event-ID`` continues it, so the call is answered rather
than lost. The GET stream is resumed the same way after each drop, so what the
server sent while it was down is replayed, not lost.

Why not mcp's ``streamable_http_client`` (mcp 2.3; the figures are in
``benchmarks/README.md``, "Why the code is shaped this way"):

* it never reads the body of a ``202 Accepted``, so httpx cannot reuse the
  connection: nearly every POST opens a new TCP connection (over HTTPS, a new
  TLS handshake). Here every one-way POST reads its answer and the connection
  goes back to the pool.
* it POSTs one message at a time: an answer to a ``files/read`` waits for the
  previous answer's POST, so several reads in flight gain nothing. Here each
  answer is its own POST, on its own pooled connection.
* it caps a server-sent event at 1 MiB by default, formats every outgoing
  message for a debug log that is off (a pydantic ``repr`` of each 1.4 MB chunk)
  and encodes JSON with the standard library: about three times the client's
  CPU per MiB read that this one spends (answers arrive already encoded,
  :meth:`HttpWriter.send_bytes`; events are split with ``memchr`` and may be as
  large as :data:`~jupyter_fsbroker.protocol.framing.MAX_MESSAGE_BYTES`).
* it answers nothing when an event is not valid JSON-RPC; here it is parsed by
  :func:`~jupyter_fsbroker.protocol.framing.parse_message` and answered by the
  middleware.

Failures are reported as mcp's transport reports them, so the connection
names them the same way: a request whose stream breaks or whose POST is refused
gets a JSON-RPC error (``CONNECTION_CLOSED`` for a broken stream,
``INVALID_REQUEST`` "Session terminated" for a 404 once a session exists); a
server that cannot be reached at all fails the transport.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import anyio.abc
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from ...core.buffers import BufferPool
from ..framing import LentMessage, encode_outgoing, parse_message, release
from .sse import EventStream

__all__ = ["HttpWriter", "open_session"]

log = logging.getLogger(__name__)

_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"
_BASE_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
_SSE_HEADERS = {"accept": "text/event-stream", "cache-control": "no-store"}

# The GET stream: how often it is reopened after failing, and how long to wait first.
_GET_ATTEMPTS = 2
_GET_RETRY_DELAY = 1.0
# How long a request's event stream may stay open after its answer before it is dropped
# (the server normally ends it at once, and then the connection can be reused).
_STREAM_END_WAIT = 0.5
# Resuming a request's event stream: the delay when the server names none (mcp's client waits
# as long), and how many resumptions in a row may fail before the request does.
_DEFAULT_RETRY_MS = 1000
_RESUME_ATTEMPTS = 2
# Closing: how long the DELETE of the session may take.
_DELETE_TIMEOUT = 5.0
# Messages received and not yet taken by the session before the streams wait.
_INBOX = 32
# Below common servers' keep-alive (uvicorn: 5 s), so a pooled connection is not reused
# just as the server closes it.
_KEEPALIVE_EXPIRY = 4.0
# A one-way POST on a reused connection that the server had just closed is sent again, once.
_STALE_CONNECTION = (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError)
# A large body is written in slices this long: httpx takes a body as bytes only (or streams an
# iterable of them), and copying all of a lent buffer's megabytes into new bytes would make the
# pages the buffer saves (each slice's copy is small and dropped at once).
_BODY_SLICE = 256 * 1024

_Item = SessionMessage | Exception


class HttpWriter:
    """The write side: each message is a POST to the endpoint.

    A request's POST runs in the background (its answer, and the server's
    requests meanwhile, arrive on the read side); :meth:`send` of any other
    message, and :meth:`send_bytes`, return once the server accepted it.
    """

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        inbox: MemoryObjectSendStream[_Item],
        tg: anyio.abc.TaskGroup,
        background_auth: httpx2.Auth | None = None,
    ) -> None:
        self._client = client
        # The GET stream, resumptions and the DELETE at close: never a sign-in in the browser.
        self._background_auth: Any = httpx2.USE_CLIENT_DEFAULT if background_auth is None else background_auth
        self._url = url
        self._inbox = inbox
        self._tg = tg
        self._closed = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._get_started = False

    # -- the session's side -------------------------------------------------------------------

    async def send(self, item: SessionMessage, /) -> None:
        """Send one message (a request: start its POST; anything else: POST it and wait)."""
        await self.send_lending(item, None)

    async def send_lending(self, item: SessionMessage, buffers: BufferPool | None, /) -> None:
        """:meth:`send`, a large message encoded in a buffer lent by *buffers* (a continuation)."""
        if self._closed:
            raise anyio.ClosedResourceError
        message = item.message
        extra: dict[str, str] = {}
        metadata = item.metadata
        if isinstance(metadata, ClientMessageMetadata) and metadata.headers:
            extra = {key.lower(): value for key, value in metadata.headers.items()}
        body = encode_outgoing(message, buffers=buffers)
        if isinstance(message, JSONRPCRequest):
            if message.method == "initialize":
                self.protocol_version = None  # negotiated anew
            elif _VERSION_HEADER in extra:
                self.protocol_version = extra[_VERSION_HEADER]
            self._tg.start_soon(self._request, message, body, extra)
            return
        try:
            await self._post_one_way(body, extra)
        finally:
            release(body)
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/initialized":
            self._start_get_stream()

    async def send_bytes(self, data: bytes | memoryview, /) -> None:
        """POST one response or notification already encoded as JSON; return once it is accepted."""
        if self._closed:
            raise anyio.ClosedResourceError
        await self._post_one_way(data, {})

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> HttpWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def terminate(self) -> None:
        """DELETE the session (bounded in time, whatever happens)."""
        if self.session_id is None:
            return
        with anyio.move_on_after(_DELETE_TIMEOUT, shield=True):
            try:
                response = await self._client.delete(
                    self._url, headers=self._headers({}), auth=self._background_auth
                )
                if response.status_code not in (200, 202, 204, 404, 405):
                    log.debug("deleting the HTTP session: status %d", response.status_code)
            except httpx2.HTTPError as exc:
                log.debug("deleting the HTTP session failed: %s", exc)

    # -- POSTs ------------------------------------------------------------------------------------

    def _headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        headers = dict(_BASE_HEADERS)
        if self.session_id is not None:
            headers[_SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[_VERSION_HEADER] = self.protocol_version
        headers.update(extra)
        return headers

    def _body(
        self, body: bytes | memoryview | LentMessage, extra: Mapping[str, str]
    ) -> tuple[bytes | _Slices, dict[str, str]]:
        """The content to give httpx for *body*, and the headers to send with it."""
        headers = self._headers(extra)
        if isinstance(body, bytes):
            return body, headers
        view = body.view if isinstance(body, LentMessage) else body
        headers["content-length"] = str(len(view))  # not chunked: what the server's limit reads
        return _Slices(view), headers

    async def _post_one_way(self, body: bytes | memoryview | LentMessage, extra: Mapping[str, str]) -> None:
        content, headers = self._body(body, extra)
        for attempt in (1, 2):
            try:
                response = await self._client.post(self._url, content=content, headers=headers)
                break
            except _STALE_CONNECTION:
                if attempt == 2:
                    raise
            except httpx2.HTTPError as exc:
                # The server cannot be reached: the connection is over.
                self._fail(exc)
                raise anyio.BrokenResourceError from exc
        if response.status_code >= 400:
            log.warning("the server refused a message (HTTP %d)", response.status_code)

    async def _request(
        self, message: JSONRPCRequest, body: bytes | LentMessage, extra: Mapping[str, str]
    ) -> None:
        try:
            await self._post_request(message, body, extra)
        finally:
            release(body)

    async def _post_request(
        self, message: JSONRPCRequest, body: bytes | LentMessage, extra: Mapping[str, str]
    ) -> None:
        content, headers = self._body(body, extra)
        request = self._client.build_request("POST", self._url, content=content, headers=headers)
        for _ in range(self._client.max_redirects + 1):
            response = await self._client.send(request, stream=True)
            try:
                following = _same_origin_redirect(response, method_kept=True)
                if following is None:
                    await self._answer_of(message, response)
                    return
            finally:
                await response.aclose()
            request = following
        await self._error(message.id, INVALID_REQUEST, "too many redirects")

    async def _answer_of(self, message: JSONRPCRequest, response: httpx2.Response) -> None:
        """Deliver what *response* says about *message*: its answer, or the error it stands for."""
        if message.method == "initialize":
            session = response.headers.get(_SESSION_HEADER)
            if session:
                self.session_id = session
        status = response.status_code
        if status == 202:
            await self._error(message.id, INVALID_REQUEST, "server answered a request with 202 Accepted")
            return
        if 300 <= status < 400:
            location = response.headers.get("location", "?")
            await self._error(message.id, INVALID_REQUEST, f"Redirect to {location} not followed")
            return
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if status >= 400:
            await self._refused(message, response, kind)
            return
        try:
            if kind == "application/json":
                body = await response.aread()
                await self._deliver(parse_message(body), message.id)
            elif kind == "text/event-stream":
                await self._read_events(response, message.id)
            else:
                await self._error(message.id, INVALID_REQUEST, f"Unexpected content type: {kind}")
        except httpx2.HTTPError as exc:
            # The answer's stream broke (the server went away, a proxy cut it).
            log.debug("the answer to %s broke: %s", message.method, exc)
            await self._error(message.id, CONNECTION_CLOSED, "SSE stream ended without a response")

    async def _refused(self, message: JSONRPCRequest, response: httpx2.Response, kind: str) -> None:
        if kind == "application/json":
            with contextlib.suppress(httpx2.HTTPError):
                parsed = parse_message(await response.aread())
                if isinstance(parsed, SessionMessage) and isinstance(parsed.message, JSONRPCError):
                    await self._put(SessionMessage(parsed.message.model_copy(update={"id": message.id})))
                    return
        if response.status_code == 404:
            if self.session_id is None:
                await self._error(message.id, METHOD_NOT_FOUND, "Not Found")
            else:
                await self._error(message.id, INVALID_REQUEST, "Session terminated")
            return
        await self._error(
            message.id, INTERNAL_ERROR, f"Server returned an error response (HTTP {response.status_code})"
        )

    async def _read_events(self, response: httpx2.Response, request_id: RequestId) -> bool:
        """Deliver each event of *response*; return whether the answer to *request_id* came.

        A request's stream that ends or breaks before the answer is resumed when the server
        gave its events ids: after the server's ``retry`` delay (no backoff of our own: the
        spec says the client must respect it), a GET with ``Last-Event-ID`` continues the
        stream.
        """
        events = EventStream()
        failures = 0
        while True:
            try:
                if await self._read_stream(response, request_id, events):
                    return True
            except httpx2.HTTPError as exc:
                log.debug("an event stream broke: %s", exc)
            finally:
                await response.aclose()
            events.reconnected()
            resumed = None
            while resumed is None:
                if events.last_event_id is None or failures >= _RESUME_ATTEMPTS or self._closed:
                    await self._error(request_id, CONNECTION_CLOSED, "SSE stream ended without a response")
                    return False
                await anyio.sleep(_retry_delay(events, _DEFAULT_RETRY_MS / 1000))
                resumed = await self._resume(events.last_event_id)
                failures = 0 if resumed is not None else failures + 1
            response = resumed

    async def _read_stream(
        self, response: httpx2.Response, request_id: RequestId | None, events: EventStream
    ) -> bool:
        """Deliver the events of one response; return whether the answer to *request_id* came."""
        chunks = response.aiter_bytes()
        async for chunk in chunks:
            answered = False
            for data in events.feed(chunk):
                item = parse_message(data) if isinstance(data, bytes) else data
                answered = await self._deliver(item, request_id) or answered
            if answered:
                # Read the (normally empty) rest, so the connection can be reused.
                with anyio.move_on_after(_STREAM_END_WAIT):
                    async for _ in chunks:
                        pass
                return True
        return False

    async def _resume(self, last_event_id: str) -> httpx2.Response | None:
        """GET the endpoint with ``Last-Event-ID``: the stream's continuation, or ``None``."""
        headers = self._headers({})
        headers.update(_SSE_HEADERS)
        headers["last-event-id"] = last_event_id
        request = self._client.build_request("GET", self._url, headers=headers)
        try:
            response = await self._client.send(request, stream=True, auth=self._background_auth)
        except httpx2.HTTPError as exc:
            log.debug("resuming an event stream failed: %s", exc)
            return None
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if response.status_code != 200 or kind != "text/event-stream":
            await response.aclose()
            return None
        return response

    async def _deliver(self, item: _Item, request_id: RequestId | None) -> bool:
        """Hand *item* to the session; return whether it answers *request_id*."""
        if isinstance(item, SessionMessage):
            message = item.message
            if (
                isinstance(message, JSONRPCResponse | JSONRPCError)
                and request_id is not None
                and str(message.id) == str(request_id)  # "7" for 7 happens; another id is not ours
            ):
                if message.id != request_id:
                    item = SessionMessage(message.model_copy(update={"id": request_id}))
                if isinstance(message, JSONRPCResponse):
                    self._learn_version(message.result)
                await self._put(item)
                return True
        await self._put(item)
        return False

    def _learn_version(self, result: dict[str, Any]) -> None:
        version = result.get("protocolVersion")
        if self.protocol_version is None and isinstance(version, str):
            self.protocol_version = version

    async def _error(self, request_id: RequestId, code: int, message: str) -> None:
        error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
        await self._put(SessionMessage(error))

    async def _put(self, item: _Item) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._inbox.send(item)

    def _fail(self, exc: BaseException) -> None:
        async def fail() -> None:
            raise exc

        self._tg.start_soon(fail)

    # -- the GET stream -----------------------------------------------------------------------

    def _start_get_stream(self) -> None:
        if not self._get_started and self.session_id is not None:
            self._get_started = True
            self._tg.start_soon(self._get_stream)

    async def _get_stream(self) -> None:
        """Server→client messages outside any request, resumed after each drop.

        The stream's cursor and the server's ``retry`` outlive its connections: after a drop
        the client waits ``retry`` (a second when the server named none) and reopens with
        ``Last-Event-ID``, so the server replays what it sent meanwhile, as for a request's
        stream. Two failed reopenings in a row give the stream up.
        """
        events = EventStream()
        failures = 0
        while failures < _GET_ATTEMPTS and not self._closed:
            try:
                opened = await self._listen(events)
                if opened is None:
                    return  # the server offers no GET stream
                failures = 0 if opened else failures + 1
            except httpx2.HTTPError as exc:
                log.debug("the GET stream failed: %s", exc)
                failures += 1
            events.reconnected()
            if failures < _GET_ATTEMPTS:
                await anyio.sleep(_retry_delay(events, _GET_RETRY_DELAY))

    async def _listen(self, events: EventStream) -> bool | None:
        """One connection of the GET stream: ``None`` if the server has none, else whether it opened."""
        headers = self._headers({})
        headers.update(_SSE_HEADERS)
        if events.last_event_id is not None:
            headers["last-event-id"] = events.last_event_id
        request = self._client.build_request("GET", self._url, headers=headers)
        for _ in range(self._client.max_redirects + 1):
            response = await self._client.send(request, stream=True, auth=self._background_auth)
            try:
                following = _same_origin_redirect(response, method_kept=False)
                if following is None:
                    if response.status_code == 200:
                        try:
                            await self._read_stream(response, None, events)
                        except httpx2.HTTPError as exc:
                            log.debug("the GET stream broke: %s", exc)
                        return True
                    if events.last_event_id is None:
                        return None
                    # The server cannot resume from there (its events expired): start afresh.
                    events.last_event_id = None
                    return False
            finally:
                await response.aclose()
            request = following
        return None


def _retry_delay(events: EventStream, default: float) -> float:
    """Seconds to wait before reconnecting *events*' stream: the server's ``retry``, else *default*."""
    return default if events.retry_ms is None else events.retry_ms / 1000


class _Slices:
    """A body httpx streams from a buffer, in slices; it can be sent again (a redirect, a sign-in)."""

    def __init__(self, view: memoryview) -> None:
        self._view = view

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._view), _BODY_SLICE):
            yield bytes(self._view[start : start + _BODY_SLICE])


def _same_origin_redirect(response: httpx2.Response, *, method_kept: bool) -> httpx2.Request | None:
    """The next request if *response* is a redirect worth following, else ``None``."""
    following = response.next_request
    if following is None or (method_kept and response.status_code not in (307, 308)):
        return None
    here, there = response.request.url, following.url
    if (here.scheme, here.host, here.port) != (there.scheme, there.host, there.port):
        return None
    return following


@contextlib.asynccontextmanager
async def open_session(
    url: str,
    headers: Mapping[str, str],
    *,
    timeout: httpx2.Timeout,
    auth: httpx2.Auth | None = None,
    background_auth: httpx2.Auth | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[_Item], HttpWriter]]:
    """Open a Streamable HTTP session with the server at *url*; yield ``(read_stream, write_stream)``.

    Parameters
    ----------
    url
        The endpoint.
    headers
        Sent with every request (``Authorization`` ...).
    timeout
        The HTTP client's timeouts.
    auth, background_auth
        The authentication of the requests the session sends (a sign-in provider), and of
        those no person waits for (the GET stream, resumptions, the DELETE at close), which
        must never open a browser; default: *auth*.
    """
    limits = httpx2.Limits(keepalive_expiry=_KEEPALIVE_EXPIRY)
    async with httpx2.AsyncClient(headers=dict(headers), timeout=timeout, limits=limits, auth=auth) as client:
        inbox, read_stream = anyio.create_memory_object_stream[_Item](_INBOX)
        async with inbox, read_stream, anyio.create_task_group() as tg:
            writer = HttpWriter(client, url, inbox, tg, background_auth)
            try:
                yield read_stream, writer
            finally:
                writer.close()
                await writer.terminate()
                tg.cancel_scope.cancel()
