"""Server-side helper: use a client's brokered filesystem (SEP-1708) from an ``MCPServer`` tool.

A server author needs a few lines::

    from mcp.server.mcpserver import Context, MCPServer
    from jupyter_fsbroker.protocol.server import enable_files, files, run_stdio

    server = MCPServer("analysis")
    enable_files(server)                      # once, before serving

    @server.tool()
    async def head(path: str, ctx: Context) -> str:
        fs = files(ctx, consent_message=f"Read the start of {path}")
        async with fs.iter_chunks(path, encoding="utf-8") as chunks:
            async for text in chunks:
                return text[:2000]
        return ""

    if __name__ == "__main__":
        run_stdio(server)                     # or server.run("streamable-http", ...)

This module imports only :mod:`mcp` and the standard library, so a server can
copy or vendor it without the rest of :mod:`jupyter_fsbroker`. The wire
contract it speaks is ``PROTOCOL.md``.

How it hooks into mcp 2.3
-------------------------
* :func:`enable_files` appends a :class:`FilesMiddleware` to the server's
  middleware chain. The middleware sees every inbound message with its raw
  params before any model validation, so it reads
  ``capabilities.roots.filesystemBrokering`` from the raw ``initialize`` params
  (mcp's typed models drop unknown keys) and records it in the connection's
  per-connection scratch ``state``; with ``require=True`` it refuses the
  handshake itself with the -32603 error SEP-1708 prescribes. It also routes
  ``notifications/files/changed`` (a client→server notification mcp does not
  know) to the :class:`Watch` iterators of that connection.
* :func:`files` builds a :class:`FilesClient` for the current request. Requests
  such as ``files/read`` go out through the public
  ``ServerSession.send_request`` with a generic request model and
  ``related_request_id`` set to the tool call's id, so over Streamable HTTP they
  ride the tool call's own SSE stream; the raw result dict comes back unchanged,
  and an error response arrives as ``MCPError`` and is turned into the typed
  exceptions below.
* :func:`run_stdio` serves a server on non-blocking pipe streams (asyncio pipe
  transports) instead of mcp's thread-per-line stdio transport.

Concurrency note: ``keepLocked`` locks belong to a *connection*, so two
concurrent tool calls of one client share them. :meth:`FilesClient.lock`
therefore also serializes critical sections of one connection on the same
path inside this process.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import builtins
import codecs
import contextlib
import logging
import os
import random
import stat as stat_module
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast, overload

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import RootModel

__all__ = [
    "CHANGED_NOTIFICATION",
    "MISSING_CAPABILITY_MESSAGE",
    "AlreadyExists",
    "ChangeEvent",
    "ChunkStream",
    "ConnectionClosed",
    "ConsentResult",
    "Created",
    "Deleted",
    "EncodingError",
    "Entry",
    "FileLocked",
    "FileStat",
    "FilesClient",
    "FilesError",
    "FilesMiddleware",
    "FilesUnavailable",
    "InternalError",
    "InvalidParams",
    "MethodNotFound",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "ReadChunk",
    "RequestTimeout",
    "RetryPolicy",
    "Timeouts",
    "TooLarge",
    "Watch",
    "WriteResult",
    "WrongType",
    "advertises_brokering",
    "client_brokers_files",
    "enable_files",
    "error_from_jsonrpc",
    "files",
    "run_stdio",
    "serve_stdio",
    "stdio_streams",
]

log = logging.getLogger(__name__)

MiB = 1024 * 1024
#: The wire's cap on the content of one request (PROTOCOL.md): 2 MiB.
MAX_CHUNK_BYTES = 2 * MiB
#: Default chunk size for reads and staged writes (SEP-1708: 1 MB).
DEFAULT_CHUNK_BYTES = MiB
#: The error message SEP-1708 prescribes when the client does not broker files.
MISSING_CAPABILITY_MESSAGE = (
    "Filesystem access is required but the client is not advertising the filesystemBrokering capability"
)
#: Codecs whose chunks, split at any character boundary, decode independently.
_CHUNK_SAFE_CODECS = frozenset(
    {
        "utf-8",
        "ascii",
        "latin-1",
        "iso8859-1",
        *(f"iso8859-{i}" for i in range(2, 17)),
        *(f"cp125{i}" for i in range(9)),
    }
)
#: The notification a brokering client sends for watch events.
CHANGED_NOTIFICATION = "notifications/files/changed"
#: The four grantable operations.
OPERATIONS = ("read", "write", "delete", "watch")

_STATE_KEY = "jupyter_fsbroker.files"
_INTERNAL_ERROR = -32603
_REQUEST_TIMEOUT = -32001
_CONNECTION_CLOSED = -32000
# Characters of text encoded per step when staging a large text write.
_ENCODE_STEP = 256 * 1024
# Events kept for a watchId whose iterator is not registered yet.
_EARLY_EVENTS = 256


# -- errors ------------------------------------------------------------------------------------


class FilesError(ToolError):
    """An error answer to a ``files/*`` request (or a failure to get one).

    It is a :class:`~mcp.server.mcpserver.exceptions.ToolError`: one that
    escapes a tool becomes that tool's ``isError`` result carrying
    ``"NAME: message"``, logged without a traceback.

    Parameters
    ----------
    message
        The message of the JSON-RPC error.
    code
        The JSON-RPC error code; the class's code if omitted.
    data
        The error's ``data`` object (``error``, ``reason``, ``path``, ...).
    method
        The ``files/*`` method that failed.

    Attributes
    ----------
    code : int
        The JSON-RPC error code.
    name : str or None
        The PROTOCOL.md name (``FILE_LOCKED`` ...), ``None`` for plain JSON-RPC errors.
    reason : str or None
        ``data.reason``, a snake_case detail (``not_granted``, ``outside_roots`` ...).
    path : str or None
        ``data.path``, the path as the request wrote it.
    data : dict
        The whole ``data`` object.
    method : str or None
        The method that failed.
    """

    default_code: ClassVar[int] = _INTERNAL_ERROR
    default_name: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Mapping[str, Any] | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code
        self.data: dict[str, Any] = dict(data or {})
        name = self.data.get("error")
        self.name: str | None = name if isinstance(name, str) else self.default_name
        reason = self.data.get("reason")
        self.reason: str | None = reason if isinstance(reason, str) else None
        path = self.data.get("path")
        self.path: str | None = path if isinstance(path, str) else None
        self.method = method

    @property
    def retry_after(self) -> float | None:
        """``data.retryAfterMs`` in seconds, when the client suggested a delay."""
        value = self.data.get("retryAfterMs")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value) / 1000.0
        return None

    def __str__(self) -> str:
        return f"{self.name or self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code}, reason={self.reason!r})"


class FileLocked(FilesError):
    """FILE_LOCKED (-32100): another connection or process holds the lock."""

    default_code = -32100
    default_name = "FILE_LOCKED"


class PermissionDenied(FilesError):
    """PERMISSION_DENIED (-32101): outside the roots, not granted, read-only, sensitive ..."""

    default_code = -32101
    default_name = "PERMISSION_DENIED"


class NotFound(FilesError):
    """NOT_FOUND (-32102): no such file inside a granted path, or an unknown lockId/watchId."""

    default_code = -32102
    default_name = "NOT_FOUND"


class AlreadyExists(FilesError):
    """ALREADY_EXISTS (-32103): exclusive create or write, rename without overwrite."""

    default_code = -32103
    default_name = "ALREADY_EXISTS"


class PreconditionFailed(FilesError):
    """PRECONDITION_FAILED (-32104): ``ifMatch`` does not match (or the file changed while read)."""

    default_code = -32104
    default_name = "PRECONDITION_FAILED"


class WrongType(FilesError):
    """WRONG_TYPE (-32105): a directory where a file is needed, or the reverse."""

    default_code = -32105
    default_name = "WRONG_TYPE"


class TooLarge(FilesError):
    """TOO_LARGE (-32106): one request over the client's limits (``data.maxBytes``)."""

    default_code = -32106
    default_name = "TOO_LARGE"


class RateLimited(FilesError):
    """RATE_LIMITED (-32107): over the connection's rate (``data.retryAfterMs``)."""

    default_code = -32107
    default_name = "RATE_LIMITED"


class EncodingError(FilesError):
    """ENCODING_ERROR (-32108): content not valid in the asked encoding."""

    default_code = -32108
    default_name = "ENCODING_ERROR"


class InvalidParams(FilesError):
    """JSON-RPC -32602: malformed params (``data.expectedOffset`` for a bad chunk offset)."""

    default_code = -32602


class MethodNotFound(FilesError):
    """JSON-RPC -32601: the client does not know the method."""

    default_code = -32601


class InternalError(FilesError):
    """JSON-RPC -32603: the client failed unexpectedly."""

    default_code = _INTERNAL_ERROR


class RequestTimeout(FilesError):
    """No answer within the request's timeout (mcp's -32001); a cancellation was sent."""

    default_code = _REQUEST_TIMEOUT


class ConnectionClosed(FilesError):
    """The connection closed before the answer arrived (mcp's -32000)."""

    default_code = _CONNECTION_CLOSED


class FilesUnavailable(MCPError):
    """The client does not broker files: -32603 with the message SEP-1708 prescribes.

    An :class:`~mcp.shared.exceptions.MCPError`, so raised from a tool (or from
    the ``initialize`` middleware) it reaches the client as that JSON-RPC error,
    not as a tool result.
    """

    def __init__(self, message: str = MISSING_CAPABILITY_MESSAGE) -> None:
        super().__init__(code=_INTERNAL_ERROR, message=message)


_NAMED: tuple[type[FilesError], ...] = (
    FileLocked,
    PermissionDenied,
    NotFound,
    AlreadyExists,
    PreconditionFailed,
    WrongType,
    TooLarge,
    RateLimited,
    EncodingError,
)
_BY_NAME: dict[str, type[FilesError]] = {cls.default_name: cls for cls in _NAMED if cls.default_name}
_UNNAMED: tuple[type[FilesError], ...] = (
    InvalidParams,
    MethodNotFound,
    InternalError,
    RequestTimeout,
    ConnectionClosed,
)
_BY_CODE: dict[int, type[FilesError]] = {cls.default_code: cls for cls in (*_NAMED, *_UNNAMED)}


def error_from_jsonrpc(code: int, message: str, data: Any = None, *, method: str | None = None) -> FilesError:
    """Return the typed exception for a JSON-RPC error answer.

    ``data.error`` (the PROTOCOL.md name) decides the class; the code decides
    when there is no name. Unknown codes give a plain :class:`FilesError`.
    """
    mapping = cast("Mapping[str, Any]", data) if isinstance(data, Mapping) else {}
    name = mapping.get("error")
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        cls = _BY_CODE.get(code, FilesError)
    return cls(message, code=code, data=mapping, method=method)


# -- policies ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before repeating a refused request.

    FILE_LOCKED and RATE_LIMITED are refused before anything happens, so
    repeating them is always safe.

    Attributes
    ----------
    retries
        Repetitions after the first attempt (SEP-1708: 3).
    backoff
        First delay in seconds when the client suggests none; doubled each time.
    max_delay
        Longest single delay.
    codes
        The JSON-RPC codes worth repeating.
    """

    retries: int = 3
    backoff: float = 0.1
    max_delay: float = 5.0
    codes: frozenset[int] = frozenset({FileLocked.default_code, RateLimited.default_code})

    def delay(self, attempt: int, error: FilesError) -> float:
        """Seconds to wait before repetition *attempt* (0-based) after *error*.

        ``data.retryAfterMs`` is honoured when present; a little jitter keeps
        several waiting tools from retrying in lockstep.
        """
        suggested = error.retry_after
        base = suggested if suggested is not None else self.backoff * (2**attempt)
        return min(self.max_delay, base) * (1.0 + 0.1 * random.random())


@dataclass(frozen=True)
class Timeouts:
    """How long to wait for an answer.

    Attributes
    ----------
    base
        Seconds for any request (SEP-1708: 60 s).
    per_mib
        Extra seconds per MiB the request carries or asks for.
    consent
        Seconds for ``files/consent``: the user is deciding (the broker itself
        denies after its own consent timeout, 120 s by default).
    """

    base: float = 60.0
    per_mib: float = 30.0
    consent: float = 300.0

    def for_bytes(self, nbytes: int) -> float:
        """The timeout of a request that moves *nbytes* bytes."""
        return self.base + self.per_mib * max(0, nbytes) / MiB


# -- results -----------------------------------------------------------------------------------


def _str(result: Mapping[str, Any], key: str, default: str = "") -> str:
    value = result.get(key, default)
    return value if isinstance(value, str) else default


def _opt_str(result: Mapping[str, Any], key: str) -> str | None:
    value = result.get(key)
    return value if isinstance(value, str) else None


def _int(result: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = result.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _strings(result: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = result.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


@dataclass(frozen=True)
class ConsentResult:
    """The user's answer to ``files/consent``.

    Attributes
    ----------
    granted
        Whether anything was approved.
    approved_paths
        The approved paths, root-relative.
    operations
        The approved operations.
    expires_at
        ISO 8601 expiry, or ``None`` for grants that last the connection.
    """

    granted: bool
    approved_paths: tuple[str, ...]
    operations: tuple[str, ...]
    expires_at: str | None = None

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> ConsentResult:
        return cls(
            granted=result.get("granted") is True,
            approved_paths=_strings(result, "approvedPaths"),
            operations=_strings(result, "operations"),
            expires_at=_opt_str(result, "expiresAt"),
        )


@dataclass(frozen=True)
class ReadChunk:
    """One ``files/read`` answer.

    ``content`` is as on the wire: text, or base64 when ``encoding`` is
    ``"base64"`` (see :meth:`data`).
    """

    content: str
    encoding: str
    size: int
    offset: int
    bytes_read: int
    eof: bool
    mime_type: str | None = None
    etag: str | None = None
    lock_id: str | None = None

    @classmethod
    def from_result(cls, result: Mapping[str, Any], encoding: str) -> ReadChunk:
        content = result.get("content")
        if not isinstance(content, str):
            raise InternalError("files/read answered without content", method="files/read")
        return cls(
            content=content,
            encoding=_str(result, "encoding", encoding),
            size=_int(result, "size"),
            offset=_int(result, "offset"),
            bytes_read=_int(result, "bytesRead"),
            eof=result.get("eof") is True,
            mime_type=_opt_str(result, "mimeType"),
            etag=_opt_str(result, "etag"),
            lock_id=_opt_str(result, "lockId"),
        )

    def data(self) -> bytes:
        """The content as bytes (base64-decoded, or encoded in its text encoding)."""
        if self.encoding == "base64":
            return _b64decode(self.content)
        return self.content.encode(self.encoding)


@dataclass(frozen=True)
class WriteResult:
    """The answer to a (possibly staged) write.

    Attributes
    ----------
    bytes_written
        Bytes written in total (all chunks).
    size
        The file's size afterwards.
    etag
        The file's etag afterwards.
    lock_id
        The kept lock, with ``keep_locked=True``.
    chunks
        Requests the write took (1 unless staged).
    """

    bytes_written: int
    size: int
    etag: str
    lock_id: str | None = None
    chunks: int = 1


@dataclass(frozen=True)
class Entry:
    """One entry of ``files/list``."""

    name: str
    path: str
    type: str
    size: int
    mtime: str | None = None

    @classmethod
    def from_result(cls, entry: Mapping[str, Any]) -> Entry:
        return cls(
            name=_str(entry, "name"),
            path=_str(entry, "path"),
            type=_str(entry, "type", "other"),
            size=_int(entry, "size"),
            mtime=_opt_str(entry, "mtime"),
        )


@dataclass(frozen=True)
class FileStat:
    """The answer to ``files/stat``."""

    path: str
    type: str
    size: int
    mtime: str | None = None
    etag: str | None = None
    mime_type: str | None = None
    locked: bool = False

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> FileStat:
        return cls(
            path=_str(result, "path"),
            type=_str(result, "type", "other"),
            size=_int(result, "size"),
            mtime=_opt_str(result, "mtime"),
            etag=_opt_str(result, "etag"),
            mime_type=_opt_str(result, "mimeType"),
            locked=result.get("locked") is True,
        )


@dataclass(frozen=True)
class Created:
    """The answer to ``files/create``."""

    path: str
    type: str
    lock_id: str | None = None


@dataclass(frozen=True)
class Deleted:
    """The answer to ``files/delete``; ``trashed`` says whether it went to the trash."""

    path: str
    trashed: bool


@dataclass(frozen=True)
class ChangeEvent:
    """One ``notifications/files/changed`` event.

    Attributes
    ----------
    watch_id
        The watch that reports it.
    path
        The changed entry, root-relative.
    event
        ``created``, ``modified``, ``deleted`` or ``moved``.
    timestamp
        ISO 8601 UTC time of the change.
    old_path
        For ``moved``: the previous path.
    """

    watch_id: str
    path: str
    event: str
    timestamp: str
    old_path: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ChangeEvent | None:
        """Parse notification params; ``None`` if they are malformed."""
        if params is None:
            return None
        watch_id, path, event = params.get("watchId"), params.get("path"), params.get("event")
        if not (isinstance(watch_id, str) and isinstance(path, str) and isinstance(event, str)):
            return None
        return cls(watch_id, path, event, _str(params, "timestamp"), _opt_str(params, "oldPath"))


def _b64decode(content: str) -> bytes:
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise InternalError("the client sent invalid base64", method="files/read") from None


# -- per-connection state and the middleware ---------------------------------------------------


class _LocalLocks:
    """In-process locks per path, so concurrent tool calls of one connection take turns."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class _ConnectionFiles:
    """What this module keeps per client connection (in the connection's ``state``)."""

    def __init__(self, brokering: bool, capabilities: Mapping[str, Any] | None) -> None:
        self.brokering = brokering
        self.capabilities: dict[str, Any] = dict(capabilities or {})
        self.watches: dict[str, MemoryObjectSendStream[ChangeEvent]] = {}
        self.early: deque[ChangeEvent] = deque(maxlen=_EARLY_EVENTS)
        self.dropped = 0
        self.local_locks = _LocalLocks()

    def deliver(self, event: ChangeEvent) -> None:
        stream = self.watches.get(event.watch_id)
        if stream is None:
            # The notification may overtake the files/watch answer's consumer.
            self.early.append(event)
            return
        try:
            stream.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
            log.warning("watch %s: the consumer is too slow; dropped an event", event.watch_id)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.watches.pop(event.watch_id, None)

    def take_early(self, watch_id: str) -> list[ChangeEvent]:
        mine = [e for e in self.early if e.watch_id == watch_id]
        if mine:
            kept = [e for e in self.early if e.watch_id != watch_id]
            self.early.clear()
            self.early.extend(kept)
        return mine


def _connection_state(session: object) -> dict[str, Any] | None:
    """The per-connection scratch ``state`` dict of mcp's ``Connection``.

    mcp 2.3 keeps the connection on ``ServerSession._connection`` with no public
    accessor from a tool's context (the low-level ``Context.connection`` exists
    but is not what ``MCPServer`` tools receive). A public ``connection``
    attribute is preferred should a later mcp add one.
    """
    connection = getattr(session, "connection", None)
    if connection is None:
        connection = getattr(session, "_connection", None)
    state = getattr(connection, "state", None)
    return cast("dict[str, Any]", state) if isinstance(state, dict) else None


def advertises_brokering(initialize_params: Mapping[str, Any] | None) -> bool:
    """Whether raw ``initialize`` params carry ``capabilities.roots.filesystemBrokering: true``."""
    capabilities = (initialize_params or {}).get("capabilities")
    roots = capabilities.get("roots") if isinstance(capabilities, Mapping) else None
    return isinstance(roots, Mapping) and roots.get("filesystemBrokering") is True


class FilesMiddleware:
    """mcp server middleware that enables :func:`files` on a server.

    Install it with :func:`enable_files` (or ``MCPServer(middleware=[...])``).
    It records whether each client advertised ``filesystemBrokering`` (read
    from the raw ``initialize`` params) and routes
    ``notifications/files/changed`` to the connection's watches.

    Parameters
    ----------
    require
        Refuse the handshake of a client that does not broker files, with
        JSON-RPC error -32603 and the message SEP-1708 prescribes. Without it,
        the error comes from :func:`files` in the first tool that needs files.
    """

    def __init__(self, *, require: bool = False) -> None:
        self.require = require

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize" and ctx.request_id is not None:
            advertised = advertises_brokering(ctx.params)
            if self.require and not advertised:
                raise FilesUnavailable()
            result = await call_next(ctx)
            state = _connection_state(ctx.session)
            if state is None:
                log.warning("cannot reach mcp's connection state; files(ctx) will be unavailable")
            else:
                raw = (ctx.params or {}).get("capabilities")
                caps = cast("Mapping[str, Any]", raw) if isinstance(raw, Mapping) else None
                state[_STATE_KEY] = _ConnectionFiles(advertised, caps)
            return result
        if ctx.method == CHANGED_NOTIFICATION and ctx.request_id is None:
            event = ChangeEvent.from_params(ctx.params)
            state = _connection_state(ctx.session)
            conn = state.get(_STATE_KEY) if state is not None else None
            if event is not None and isinstance(conn, _ConnectionFiles):
                conn.deliver(event)
        return await call_next(ctx)


def enable_files(server: MCPServer[Any] | Server[Any], *, require: bool = False) -> FilesMiddleware:
    """Install :class:`FilesMiddleware` on *server* (idempotent) and return it.

    Parameters
    ----------
    server
        An ``MCPServer`` or a low-level ``Server``. Call before serving.
    require
        Refuse clients that do not broker files already at ``initialize``.
    """
    chain = cast("list[Any]", server.middleware)
    for middleware in chain:
        if isinstance(middleware, FilesMiddleware):
            middleware.require = middleware.require or require
            return middleware
    middleware = FilesMiddleware(require=require)
    chain.append(middleware)
    return middleware


def _request_context(
    ctx: Context[Any, Any] | ServerRequestContext[Any, Any],
) -> ServerRequestContext[Any, Any]:
    if isinstance(ctx, Context):
        return ctx.request_context
    return ctx


def _files_state(
    ctx: Context[Any, Any] | ServerRequestContext[Any, Any],
) -> tuple[ServerRequestContext[Any, Any], _ConnectionFiles | None]:
    rc = _request_context(ctx)
    state = _connection_state(rc.session)
    if state is None:
        raise RuntimeError("this version of mcp does not expose the connection state jupyter_fsbroker needs")
    conn = state.get(_STATE_KEY)
    if conn is None and isinstance(ctx, Context):
        try:
            server: MCPServer[Any] | None = ctx.mcp_server
        except ValueError:
            server = None
        if server is not None and not any(isinstance(m, FilesMiddleware) for m in server.middleware):
            raise RuntimeError("call enable_files(server) before serving to use files(ctx)")
    return rc, conn if isinstance(conn, _ConnectionFiles) else None


def client_brokers_files(ctx: Context[Any, Any] | ServerRequestContext[Any, Any]) -> bool:
    """Whether the client of this request advertised ``filesystemBrokering``.

    Raises
    ------
    RuntimeError
        :func:`enable_files` was not called on the server.
    """
    _, conn = _files_state(ctx)
    return conn is not None and conn.brokering


def files(
    ctx: Context[Any, Any] | ServerRequestContext[Any, Any],
    *,
    consent_message: str | None = None,
    consent_operations: Sequence[str] = (),
    consent_paths: Sequence[str] = (),
    retry: RetryPolicy | None = None,
    timeouts: Timeouts | None = None,
) -> FilesClient:
    """The client's brokered filesystem, for the request being handled.

    Parameters
    ----------
    ctx
        The tool's ``Context`` (or a low-level ``ServerRequestContext``).
    consent_message
        If given, an operation refused with PERMISSION_DENIED ``not_granted``
        asks ``files/consent`` for its path with this message, then is
        repeated once if approved (once per path and operation per client).
    consent_operations
        Further operations to ask for in that consent (say ``("read",
        "write")`` for a read-modify-write), so the user is asked once.
    consent_paths
        Further paths to ask for in that consent (say the input file and the
        report to write), so one prompt covers what the tool will touch.
    retry, timeouts
        See :class:`RetryPolicy` and :class:`Timeouts`.

    Returns
    -------
    FilesClient
        Valid while the request is being handled.

    Raises
    ------
    FilesUnavailable
        The client did not advertise ``filesystemBrokering`` (JSON-RPC -32603
        with SEP-1708's message), or this transport cannot carry
        server-to-client requests (stateless or JSON-response HTTP).
    RuntimeError
        :func:`enable_files` was not called, or this is not inside a request.
    """
    rc, conn = _files_state(ctx)
    if conn is None or not conn.brokering:
        raise FilesUnavailable()
    if rc.request_id is None:
        raise RuntimeError("files(ctx) needs the context of a request being handled")
    if not rc.session.can_send_request:
        raise FilesUnavailable(
            f"{MISSING_CAPABILITY_MESSAGE}: this transport cannot carry server-to-client requests"
        )
    for op in consent_operations:
        if op not in OPERATIONS:
            raise ValueError(f"unknown operation {op!r}; use some of {', '.join(OPERATIONS)}")
    return FilesClient(
        rc.session,
        rc.request_id,
        conn,
        consent_message=consent_message,
        consent_operations=tuple(consent_operations),
        consent_paths=tuple(consent_paths),
        retry=retry,
        timeouts=timeouts,
    )


# -- the client of the brokered filesystem -----------------------------------------------------

_RawRequest = mcp_types.Request[dict[str, Any], str]


class _RawResult(RootModel[dict[str, Any]]):
    """A result taken as it came: a JSON object."""


def _params(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


T = TypeVar("T", bytes, str)


class FilesClient:
    """The brokered filesystem of one client, used from one request (see :func:`files`).

    Paths are as PROTOCOL.md allows: root-relative (``data/sales.csv``),
    absolute inside a root, or ``file://`` URIs. Every method raises the
    :class:`FilesError` subclass matching the client's answer, after
    repeating FILE_LOCKED and RATE_LIMITED refusals per the retry policy.

    Use it as an async context manager (``async with files(ctx) as fs``) to
    close any watch or chunk stream left open when the block ends.
    """

    def __init__(
        self,
        session: ServerSession,
        request_id: mcp_types.RequestId,
        connection: _ConnectionFiles,
        *,
        consent_message: str | None = None,
        consent_operations: tuple[str, ...] = (),
        consent_paths: tuple[str, ...] = (),
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self._session = session
        self._metadata = ServerMessageMetadata(related_request_id=request_id)
        self._conn = connection
        self._consent_message = consent_message
        self._consent_operations = consent_operations
        self._consent_paths = consent_paths
        self.retry = retry or RetryPolicy()
        self.timeouts = timeouts or Timeouts()
        self._asked: dict[tuple[tuple[str, ...], str], bool] = {}
        self._consent_lock = anyio.Lock()
        self._open: set[Watch | ChunkStream[Any]] = set()
        self._max_chunk = MAX_CHUNK_BYTES

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        """The client's raw ``capabilities`` from ``initialize``."""
        return self._conn.capabilities

    async def __aenter__(self) -> FilesClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the watches and chunk streams this client opened and left open."""
        for item in builtins.list(self._open):
            await item.aclose()

    # -- raw requests ------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        nbytes: int = 0,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> dict[str, Any]:
        """Send one ``files/*`` request and return its raw result.

        Parameters
        ----------
        method, params
            The JSON-RPC method and params, sent as given.
        nbytes
            Bytes the request moves, to extend its timeout.
        timeout
            Seconds; default from :attr:`timeouts`.
        retry
            Default :attr:`retry`.

        Raises
        ------
        FilesError
            The typed error of the answer (after retries).
        """
        policy = retry or self.retry
        attempt = 0
        while True:
            try:
                return await self._send(method, params, timeout or self.timeouts.for_bytes(nbytes))
            except FilesError as exc:
                if attempt >= policy.retries or exc.code not in policy.codes:
                    raise
                delay = policy.delay(attempt, exc)
                log.debug("%s refused (%s); retry %d in %.3fs", method, exc.name, attempt + 1, delay)
                attempt += 1
                await anyio.sleep(delay)

    async def _send(self, method: str, params: Mapping[str, Any] | None, timeout: float) -> dict[str, Any]:
        request = _RawRequest(method=method, params=dict(params or {}))
        try:
            result = await self._session.send_request(
                cast("mcp_types.ServerRequest", request),
                _RawResult,
                request_read_timeout_seconds=timeout,
                metadata=self._metadata,
            )
        except MCPError as exc:
            raise error_from_jsonrpc(exc.code, exc.message, exc.data, method=method) from None
        return result.root

    async def _op(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        op: str,
        paths: Sequence[str],
        nbytes: int = 0,
        retry: RetryPolicy | None = None,
    ) -> dict[str, Any]:
        """:meth:`request`, asking consent once on ``not_granted`` when configured."""
        try:
            return await self.request(method, params, nbytes=nbytes, retry=retry)
        except PermissionDenied as exc:
            if exc.reason != "not_granted" or self._consent_message is None:
                raise
            if not await self._auto_consent(tuple(paths), op):
                raise
        return await self.request(method, params, nbytes=nbytes, retry=retry)

    async def _auto_consent(self, paths: tuple[str, ...], op: str) -> bool:
        assert self._consent_message is not None
        key = (paths, op)
        async with self._consent_lock:
            if key not in self._asked:
                wanted = tuple(dict.fromkeys((op, *self._consent_operations)))
                asked = builtins.list(dict.fromkeys((*paths, *self._consent_paths)))
                answer = await self.consent(self._consent_message, asked, wanted)
                self._asked[key] = answer.granted and op in answer.operations
            return self._asked[key]

    # -- consent -------------------------------------------------------------------------------

    async def consent(
        self, message: str, paths: str | Sequence[str], operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """Ask the user for access (``files/consent``).

        Parameters
        ----------
        message
            Why, in words the user understands.
        paths
            Paths to ask for; a directory covers its descendants.
        operations
            Some of ``read``, ``write``, ``delete``, ``watch``; all if ``None``.

        Returns
        -------
        ConsentResult
            A refusal is ``granted=False``, not an error.
        """
        wanted = [paths] if isinstance(paths, str) else builtins.list(paths)
        params = _params(
            message=message,
            requestedPaths=wanted,
            operations=None if operations is None else builtins.list(operations),
        )
        result = await self.request("files/consent", params, timeout=self.timeouts.consent)
        return ConsentResult.from_result(result)

    async def require_consent(
        self, message: str, paths: str | Sequence[str], operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """:meth:`consent`, raising :class:`PermissionDenied` (``consent_refused``) on a refusal."""
        answer = await self.consent(message, paths, operations)
        if not answer.granted:
            raise PermissionDenied(
                "the user did not grant access",
                data={"error": "PERMISSION_DENIED", "reason": "consent_refused"},
                method="files/consent",
            )
        return answer

    # -- reading -------------------------------------------------------------------------------

    async def read(
        self,
        path: str,
        *,
        offset: int = 0,
        length: int | None = None,
        encoding: str = "utf-8",
        keep_locked: bool = False,
        lock_id: str | None = None,
    ) -> ReadChunk:
        """One ``files/read`` request: up to *length* bytes (default 1 MiB, at most 2 MiB) at *offset*."""
        params = _params(
            path=path,
            encoding=encoding,
            offset=offset,
            length=length,
            keepLocked=keep_locked or None,
            lockId=lock_id,
        )
        nbytes = DEFAULT_CHUNK_BYTES if length is None else length
        result = await self._op("files/read", params, op="read", paths=[path], nbytes=nbytes)
        return ReadChunk.from_result(result, encoding)

    @overload
    def iter_chunks(  # type: ignore[overload-overlap]
        self,
        path: str,
        *,
        chunk_size: int = ...,
        concurrency: int = ...,
        encoding: Literal["base64"] = ...,
        lock_id: str | None = ...,
    ) -> ChunkStream[bytes]: ...

    @overload
    def iter_chunks(
        self,
        path: str,
        *,
        chunk_size: int = ...,
        concurrency: int = ...,
        encoding: str,
        lock_id: str | None = ...,
    ) -> ChunkStream[str]: ...

    def iter_chunks(
        self,
        path: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        encoding: str = "base64",
        lock_id: str | None = None,
    ) -> ChunkStream[bytes] | ChunkStream[str]:
        """The file's content as an async iterator of chunks, in order.

        Up to *concurrency* ``files/read`` requests are in flight at once, and
        at most that many chunks are held in memory, whatever the file's size.

        Parameters
        ----------
        path
            The file.
        chunk_size
            Bytes per request (at most 2 MiB).
        concurrency
            Requests in flight at once (1: strictly sequential).
        encoding
            ``"base64"`` yields ``bytes``; a text encoding yields ``str``.
            Text chunks end on character boundaries, so each next chunk starts
            at ``offset + bytesRead``. For UTF-8, ASCII and single-byte codecs
            the text travels as text and reads ahead are sent at planned
            offsets, each used only if the previous chunk ended exactly there
            (always for ASCII); at the first planned offset that falls inside a
            character, the rest of the file travels as bytes decoded here by
            one incremental decoder, which keeps every read useful. Other
            codecs (UTF-16/32 with a BOM, ISO-2022 ...) always travel as bytes:
            decoding chunks apart would garble them.
        lock_id
            A lock this connection holds on the file.

        Raises
        ------
        PreconditionFailed
            ``reason="changed_during_read"``: the file's etag changed between chunks.
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        size = min(chunk_size, self._max_chunk)
        if encoding != "base64":
            # A resync read asks for up to one character more than a chunk: stay under the cap.
            size = min(size, self._max_chunk - 64)
        stream: ChunkStream[Any] = ChunkStream(self, path, size, concurrency, encoding, lock_id)
        self._open.add(stream)
        return stream

    async def read_bytes(
        self,
        path: str,
        *,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        max_size: int | None = None,
    ) -> bytes:
        """The whole file as bytes (see :meth:`iter_chunks`).

        Raises
        ------
        TooLarge
            The file is larger than *max_size* bytes (checked on the first chunk).
        """
        parts: builtins.list[bytes] = []
        async with self.iter_chunks(
            path, chunk_size=chunk_size, concurrency=concurrency, lock_id=lock_id
        ) as chunks:
            chunks.max_size = max_size
            async for part in chunks:
                parts.append(part)
        return b"".join(parts)

    async def read_text(
        self,
        path: str,
        encoding: str = "utf-8",
        *,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        max_size: int | None = None,
    ) -> str:
        """The whole file as text in *encoding* (see :meth:`iter_chunks`).

        Raises
        ------
        EncodingError
            The content is not valid in *encoding*.
        TooLarge
            The file is larger than *max_size* bytes.
        """
        if encoding == "base64":
            raise ValueError("read_text needs a text encoding; use read_bytes for binary content")
        parts: builtins.list[str] = []
        async with self.iter_chunks(
            path, chunk_size=chunk_size, concurrency=concurrency, encoding=encoding, lock_id=lock_id
        ) as chunks:
            chunks.max_size = max_size
            async for part in chunks:
                parts.append(part)
        return "".join(parts)

    # -- writing -------------------------------------------------------------------------------

    async def write_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview | AsyncIterable[bytes],
        *,
        create: bool = True,
        exclusive: bool = False,
        if_match: str | None = None,
        keep_locked: bool = False,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
    ) -> WriteResult:
        """Write *data* as the file's whole content, atomically.

        Content larger than *chunk_size* (or an async iterable of pieces, for
        content made on the fly) is staged in chunks with ``offset`` and
        committed by the ``final`` chunk: until then the file is untouched.

        Parameters
        ----------
        path
            The file.
        data
            The content, or an async iterable of its pieces in order.
        create
            Create the file if missing (else NOT_FOUND).
        exclusive
            Fail with ALREADY_EXISTS if the file exists.
        if_match
            Fail with PRECONDITION_FAILED unless the file's etag is this.
        keep_locked
            Keep an exclusive lock afterwards (``WriteResult.lock_id``).
        lock_id
            A lock this connection holds on the file.
        chunk_size
            Bytes per request (at most 2 MiB).
        """
        options = _WriteOptions(create, exclusive, if_match, keep_locked, lock_id)
        size = max(1, min(chunk_size, self._max_chunk))
        if isinstance(data, bytes | bytearray | memoryview):
            view = memoryview(data).cast("B")
            if len(view) <= size:
                try:
                    return await self._write_single(path, bytes(view), options)
                except TooLarge as exc:
                    if not self._learn_limit(exc):
                        raise
                    size = min(size, self._max_chunk)
            return await self._write_staged(path, _slices(view, size), options, size)
        return await self._write_staged(path, _rechunk(data, size), options, size)

    async def write_text(
        self,
        path: str,
        text: str,
        encoding: str = "utf-8",
        *,
        create: bool = True,
        exclusive: bool = False,
        if_match: str | None = None,
        keep_locked: bool = False,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
    ) -> WriteResult:
        """Write *text* encoded in *encoding* as the file's whole content, atomically.

        Small text travels as text; larger text is encoded here and staged in
        chunks (see :meth:`write_bytes`). Parameters as :meth:`write_bytes`.

        Raises
        ------
        EncodingError
            *text* cannot be encoded in *encoding*.
        """
        options = _WriteOptions(create, exclusive, if_match, keep_locked, lock_id)
        size = max(1, min(chunk_size, self._max_chunk))
        codec = codecs.lookup(encoding)
        # Four bytes per character cover every common codec without encoding first.
        if len(text) * 4 <= size or len(_encode_or_raise(codec, text, path)) <= size:
            try:
                return await self._write_single_text(path, text, encoding, options)
            except TooLarge as exc:
                if not self._learn_limit(exc):
                    raise
                size = min(size, self._max_chunk)
        return await self._write_staged(
            path, _rechunk(_encode_pieces(codec, text, path), size), options, size
        )

    def _learn_limit(self, exc: TooLarge) -> bool:
        """Remember a smaller per-request limit the client announced; whether it announced one."""
        limit = exc.data.get("maxBytes")
        if exc.reason != "request_too_large" or not isinstance(limit, int) or limit < 1:
            return False
        self._max_chunk = min(self._max_chunk, limit)
        return True

    async def _write_single(self, path: str, data: bytes, options: _WriteOptions) -> WriteResult:
        content = base64.b64encode(data).decode("ascii")
        params = options.params(path, content, "base64", first=True, final=True)
        result = await self._op("files/write", params, op="write", paths=[path], nbytes=len(data))
        return _write_result(result, _int(result, "bytesWritten", len(data)), 1)

    async def _write_single_text(
        self, path: str, text: str, encoding: str, options: _WriteOptions
    ) -> WriteResult:
        params = options.params(path, text, encoding, first=True, final=True)
        result = await self._op("files/write", params, op="write", paths=[path], nbytes=len(text))
        return _write_result(result, _int(result, "bytesWritten"), 1)

    async def _write_staged(
        self, path: str, pieces: AsyncIterator[bytes], options: _WriteOptions, size: int
    ) -> WriteResult:
        offset = 0
        chunks = 0
        current = await anext(pieces, None)
        if current is None:
            return await self._write_single(path, b"", options)
        while True:
            following = await anext(pieces, None)
            final = following is None
            result: dict[str, Any] = {}
            # A piece over the client's limit is sent as several chunks.
            parts = builtins.list(_split(current, self._max_chunk))
            for index, part in enumerate(parts):
                last = final and index == len(parts) - 1
                result, sent = await self._write_chunk(path, part, offset, last, options)
                offset += len(part)
                chunks += sent
            if final:
                return _write_result(result, offset, chunks)
            assert following is not None
            current = following

    async def _write_chunk(
        self, path: str, data: bytes, offset: int, final: bool, options: _WriteOptions
    ) -> tuple[dict[str, Any], int]:
        """Send one staged chunk; returns the last answer and the chunks it took."""
        content = base64.b64encode(data).decode("ascii")
        params = options.params(path, content, "base64", first=offset == 0, final=final)
        params["offset"] = offset
        params["final"] = final
        try:
            result = await self._op("files/write", params, op="write", paths=[path], nbytes=len(data))
            return result, 1
        except TooLarge as exc:
            # Refused before anything was staged: resend it in pieces the client takes.
            if not self._learn_limit(exc) or len(data) <= self._max_chunk:
                raise
        sent = 0
        parts = builtins.list(_split(data, self._max_chunk))
        for index, part in enumerate(parts):
            last = final and index == len(parts) - 1
            result, count = await self._write_chunk(path, part, offset, last, options)
            offset += len(part)
            sent += count
        return result, sent

    # -- directories and metadata --------------------------------------------------------------

    async def iter_list(
        self,
        path: str,
        *,
        recursive: bool = False,
        include_hidden: bool = False,
        page_size: int | None = None,
    ) -> AsyncIterator[Entry]:
        """The entries of a directory, page by page (following ``nextCursor``)."""
        cursor: str | None = None
        while True:
            params = _params(
                path=path,
                recursive=recursive,
                includeHidden=include_hidden,
                maxEntries=page_size,
                cursor=cursor,
            )
            result = await self._op("files/list", params, op="read", paths=[path])
            entries = result.get("entries")
            for entry in entries if isinstance(entries, builtins.list) else []:
                if isinstance(entry, Mapping):
                    yield Entry.from_result(cast("Mapping[str, Any]", entry))
            cursor = _opt_str(result, "nextCursor")
            if not cursor:
                return

    async def list(
        self,
        path: str,
        *,
        recursive: bool = False,
        include_hidden: bool = False,
        page_size: int | None = None,
    ) -> builtins.list[Entry]:
        """All entries of a directory (every page).

        Parameters
        ----------
        path
            The directory.
        recursive
            Descend into subdirectories.
        include_hidden
            Include names starting with a dot.
        page_size
            ``maxEntries`` per request (the client's default if ``None``).
        """
        return [
            entry
            async for entry in self.iter_list(
                path, recursive=recursive, include_hidden=include_hidden, page_size=page_size
            )
        ]

    async def stat(self, path: str) -> FileStat:
        """``files/stat``: type, size, mtime, etag, MIME type, and whether it is locked."""
        return FileStat.from_result(await self._op("files/stat", {"path": path}, op="read", paths=[path]))

    async def exists(self, path: str) -> bool:
        """Whether *path* exists (a ``files/stat`` that may answer NOT_FOUND)."""
        try:
            await self.stat(path)
        except NotFound:
            return False
        return True

    async def create(
        self,
        path: str,
        type: Literal["file", "directory"] = "file",
        *,
        content: str | bytes | None = None,
        encoding: str = "utf-8",
        parents: bool = False,
        keep_locked: bool = False,
    ) -> Created:
        """``files/create``: a new file (optionally with small content) or directory.

        Raises
        ------
        AlreadyExists
            Something exists at *path*.
        """
        if isinstance(content, bytes):
            content, encoding = base64.b64encode(content).decode("ascii"), "base64"
        params = _params(
            path=path,
            type=type,
            content=content,
            encoding=encoding if content is not None else None,
            parents=parents or None,
            keepLocked=keep_locked or None,
        )
        result = await self._op("files/create", params, op="write", paths=[path], nbytes=len(content or ""))
        return Created(_str(result, "path", path), _str(result, "type", type), _opt_str(result, "lockId"))

    async def delete(self, path: str, *, recursive: bool = False, if_match: str | None = None) -> Deleted:
        """``files/delete``: moves to the client's trash unless it deletes permanently."""
        params = _params(path=path, recursive=recursive or None, ifMatch=if_match)
        result = await self._op("files/delete", params, op="delete", paths=[path])
        return Deleted(_str(result, "path", path), result.get("trashed") is True)

    async def rename(
        self, path: str, new_path: str, *, overwrite: bool = False, if_match: str | None = None
    ) -> str:
        """``files/rename``; returns the new path (root-relative)."""
        params = _params(path=path, newPath=new_path, overwrite=overwrite or None, ifMatch=if_match)
        result = await self._op("files/rename", params, op="write", paths=[path, new_path])
        return _str(result, "path", new_path)

    # -- locks ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lock(self, path: str, *, create: bool = False, wait: float = 30.0) -> AsyncIterator[str]:
        """Hold an exclusive lock on *path* for the ``async with`` block; yields the ``lockId``.

        The lock is taken with a ``keepLocked`` read of zero bytes (or a
        ``keepLocked`` create of an empty file when *create* is true and the
        file is missing) and always released with ``files/unlock`` when the
        block ends, also on an exception or cancellation. Locks belong to the
        client connection, so concurrent tool calls of one connection on the
        same path (as written) also take turns in this process.

        Parameters
        ----------
        path
            The file.
        create
            Create an empty file if *path* does not exist.
        wait
            Seconds to keep retrying while another connection holds the lock.

        Raises
        ------
        FileLocked
            Still locked by someone else after *wait* seconds.
        """
        async with self._conn.local_locks.hold(path):
            lock_id = await self._acquire(path, create=create, wait=wait)
            try:
                yield lock_id
            except BaseException:
                with contextlib.suppress(FilesError):
                    await self._unlock_shielded(lock_id)
                raise
            await self._unlock_shielded(lock_id)

    async def _acquire(self, path: str, *, create: bool, wait: float) -> str:
        deadline = time.monotonic() + max(0.0, wait)
        no_retry = RetryPolicy(retries=0)
        attempt = 0
        read = {"path": path, "encoding": "base64", "length": 0, "keepLocked": True}
        while True:
            try:
                try:
                    result = await self._op("files/read", read, op="read", paths=[path], retry=no_retry)
                    lock_id = _opt_str(result, "lockId")
                except NotFound:
                    if not create:
                        raise
                    params = {"path": path, "type": "file", "keepLocked": True}
                    result = await self._op("files/create", params, op="write", paths=[path], retry=no_retry)
                    lock_id = _opt_str(result, "lockId")
                if lock_id is None:
                    raise InternalError("the client kept no lock", method="files/read")
                return lock_id
            except (FileLocked, RateLimited, AlreadyExists) as exc:
                # AlreadyExists: someone created the file meanwhile; lock it as it is.
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                delay = 0.0 if isinstance(exc, AlreadyExists) else self.retry.delay(attempt, exc)
                attempt += 1
                await anyio.sleep(min(delay, remaining))

    async def unlock(self, lock_id: str) -> None:
        """``files/unlock``.

        Raises
        ------
        NotFound
            No such lock of this connection (released already, or force-released by the user).
        """
        await self.request("files/unlock", {"lockId": lock_id})

    async def _unlock_shielded(self, lock_id: str) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeouts.base):
            try:
                await self.unlock(lock_id)
            except NotFound:
                log.warning("lock %s was already released (force-released by the user?)", lock_id[:9])
            except ConnectionClosed:
                pass  # the client released every lock of the connection

    # -- watching ------------------------------------------------------------------------------

    def watch(
        self,
        path: str,
        *,
        recursive: bool = False,
        events: Sequence[str] | None = None,
        buffer: int = 1024,
    ) -> Watch:
        """Watch *path*; an async iterator of :class:`ChangeEvent` to use with ``async with``.

        ``files/watch`` is sent when the block is entered (or on first
        iteration) and ``files/unwatch`` when it ends. Iteration ends only when
        the watch is closed: bound it with ``anyio.move_on_after``.

        Parameters
        ----------
        path
            A file or directory.
        recursive
            Also report changes below subdirectories.
        events
            Some of ``created``, ``modified``, ``deleted``, ``moved``; all if ``None``.
        buffer
            Events held for a slow consumer; further ones are dropped (counted
            in :attr:`Watch.dropped`).
        """
        watch = Watch(self, path, recursive, None if events is None else tuple(events), buffer)
        self._open.add(watch)
        return watch

    # -- bookkeeping for streams and watches ---------------------------------------------------

    def _forget(self, item: Watch | ChunkStream[Any]) -> None:
        self._open.discard(item)


def _encode_or_raise(codec: codecs.CodecInfo, text: str, path: str) -> bytes:
    try:
        return codec.encode(text, "strict")[0]
    except UnicodeEncodeError:
        raise EncodingError(
            f"the content cannot be encoded as {codec.name}",
            data={"error": "ENCODING_ERROR", "reason": "invalid_content", "path": path},
            method="files/write",
        ) from None


async def _encode_pieces(codec: codecs.CodecInfo, text: str, path: str) -> AsyncIterator[bytes]:
    encoder = codec.incrementalencoder("strict")
    for start in range(0, len(text), _ENCODE_STEP):
        piece = text[start : start + _ENCODE_STEP]
        final = start + _ENCODE_STEP >= len(text)
        try:
            data = encoder.encode(piece, final)
        except UnicodeEncodeError:
            raise EncodingError(
                f"the content cannot be encoded as {codec.name}",
                data={"error": "ENCODING_ERROR", "reason": "invalid_content", "path": path},
                method="files/write",
            ) from None
        if data:
            yield data
        await anyio.lowlevel.checkpoint()


async def _slices(view: memoryview, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(view), size):
        yield bytes(view[start : start + size])


async def _rechunk(pieces: AsyncIterable[bytes], size: int) -> AsyncIterator[bytes]:
    """Regroup *pieces* into chunks of exactly *size* bytes (the last one shorter)."""
    pending = bytearray()
    async for piece in pieces:
        pending += piece
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)


def _split(data: bytes, size: int) -> builtins.list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [data]


@dataclass(frozen=True)
class _WriteOptions:
    create: bool
    exclusive: bool
    if_match: str | None
    keep_locked: bool
    lock_id: str | None

    def params(self, path: str, content: str, encoding: str, *, first: bool, final: bool) -> dict[str, Any]:
        params: dict[str, Any] = {"path": path, "content": content, "encoding": encoding}
        if first:
            params["create"] = self.create
            if self.exclusive:
                params["exclusive"] = True
            if self.if_match is not None:
                params["ifMatch"] = self.if_match
        if final and self.keep_locked:
            params["keepLocked"] = True
        if self.lock_id is not None:
            params["lockId"] = self.lock_id
        return params


def _write_result(result: Mapping[str, Any], written: int, chunks: int) -> WriteResult:
    return WriteResult(
        bytes_written=written,
        size=_int(result, "size"),
        etag=_str(result, "etag"),
        lock_id=_opt_str(result, "lockId"),
        chunks=chunks,
    )


# -- chunk streams -----------------------------------------------------------------------------


class ChunkStream(Generic[T]):
    """An ordered async iterator of a file's chunks with several reads in flight.

    Made by :meth:`FilesClient.iter_chunks`. Use ``async with`` (or call
    :meth:`aclose`) when you may stop early, so reads in flight are cancelled.

    Attributes
    ----------
    size
        The file's size, once the first chunk arrived.
    etag
        The file's etag, once the first chunk arrived.
    max_size
        If set before iterating: raise :class:`TooLarge` when the file is larger.
    """

    def __init__(
        self,
        client: FilesClient,
        path: str,
        chunk_size: int,
        concurrency: int,
        encoding: str,
        lock_id: str | None,
    ) -> None:
        self._client = client
        self.path = path
        self.chunk_size = chunk_size
        self.concurrency = concurrency
        self.encoding = encoding
        self.lock_id = lock_id
        self.size: int | None = None
        self.etag: str | None = None
        self.max_size: int | None = None
        self.requests = 0
        self._gen: AsyncIterator[Any] | None = None
        self._tasks: set[asyncio.Task[tuple[ReadChunk, bytes | str]]] = set()
        self._closed = False

    async def __aenter__(self) -> ChunkStream[T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> ChunkStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        if self._gen is None:
            self._gen = self._chunks()
        try:
            return cast("T", await anext(self._gen))
        except StopAsyncIteration:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Cancel reads in flight and stop; idempotent."""
        self._closed = True
        self._client._forget(self)
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        gen, self._gen = self._gen, None
        aclose = getattr(gen, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # closed from another task while running
                await aclose()

    def _spawn(self, offset: int, length: int, wire: str) -> asyncio.Task[tuple[ReadChunk, bytes | str]]:
        task = asyncio.get_running_loop().create_task(self._fetch(offset, length, wire))
        self._tasks.add(task)
        task.add_done_callback(_retrieve)
        return task

    def _running(self) -> builtins.list[asyncio.Task[tuple[ReadChunk, bytes | str]]]:
        self._tasks = {task for task in self._tasks if not task.done()}
        return builtins.list(self._tasks)

    async def _free_slot(self) -> None:
        """Wait until fewer than ``concurrency`` reads are unanswered.

        A read no longer needed is not cancelled (the client may go on serving
        it anyway): it keeps its slot until its answer arrives, so the client
        never has more than ``concurrency`` of our reads at once.
        """
        while len(running := self._running()) >= self.concurrency:
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)

    async def _fetch(self, offset: int, length: int, wire: str) -> tuple[ReadChunk, bytes | str]:
        self.requests += 1
        chunk = await self._client.read(
            self.path, offset=offset, length=length, encoding=wire, lock_id=self.lock_id
        )
        payload: bytes | str = _b64decode(chunk.content) if wire == "base64" else chunk.content
        return chunk, payload

    def _check(self, chunk: ReadChunk) -> None:
        if chunk.etag != self.etag or chunk.size != self.size:
            raise PreconditionFailed(
                f"{self.path} changed while it was read",
                data={"error": "PRECONDITION_FAILED", "reason": "changed_during_read", "path": self.path},
                method="files/read",
            )

    def _decode(self, decoder: codecs.IncrementalDecoder, data: bytes, final: bool) -> str:
        try:
            return decoder.decode(data, final)
        except UnicodeDecodeError:
            raise EncodingError(
                f"{self.path} is not valid {self.encoding}; ask for base64",
                data={"error": "ENCODING_ERROR", "reason": "invalid_content", "path": self.path},
                method="files/read",
            ) from None

    async def _chunks(self) -> AsyncIterator[bytes | str]:
        """The reader. Three ways to move a file:

        * binary (``base64``): reads at fixed offsets, all usable;
        * text over the wire, for codecs whose every character boundary can
          start a fresh decoder (UTF-8, ASCII, single-byte codecs): reads
          ahead at planned offsets, each used only if the previous chunk
          ended exactly there (it ends early when a character straddles);
        * bytes decoded here with one incremental decoder: for stateful codecs
          (UTF-16/32 with a BOM, ISO-2022 ...), which chunks decoded apart
          would garble, and as soon as a planned offset falls inside a
          character in the previous mode (no more reads wasted on it).
        """
        text = self.encoding != "base64"
        decoder: codecs.IncrementalDecoder | None = None
        wire = self.encoding
        if text:
            codec = codecs.lookup(self.encoding)
            if codec.name not in _CHUNK_SAFE_CODECS:
                decoder, wire = codec.incrementaldecoder("strict"), "base64"
        step = self.chunk_size
        first, payload = await self._fetch(0, step, wire)
        self.size, self.etag = first.size, first.etag
        if self.max_size is not None and first.size > self.max_size:
            raise TooLarge(
                f"{self.path} has {first.size} bytes, more than {self.max_size}",
                data={"error": "TOO_LARGE", "reason": "file_too_large", "path": self.path},
                method="files/read",
            )
        pos = first.offset + first.bytes_read
        done = first.eof or pos >= first.size
        if decoder is not None:
            assert isinstance(payload, bytes)
            payload = self._decode(decoder, payload, done)
        if payload:
            yield payload
        if done:
            return
        size = first.size
        inflight: dict[int, asyncio.Task[tuple[ReadChunk, bytes | str]]] = {}
        aims: dict[int, int] = {}  # offset -> where that read is meant to end
        next_plan = pos
        try:
            while True:
                if pos not in inflight:
                    # Read from where the last chunk ended up to the next planned
                    # offset still wanted, so the reads ahead stay usable.
                    await self._free_slot()
                    later = [offset for offset in inflight if offset > pos]
                    aim = min(later) if later else pos + step
                    inflight[pos], aims[pos] = self._spawn(pos, aim - pos, wire), aim
                    next_plan = max(next_plan, aim)
                while len(self._running()) < self.concurrency and next_plan < size:
                    if next_plan not in inflight:
                        inflight[next_plan] = self._spawn(next_plan, step, wire)
                        aims[next_plan] = next_plan + step
                    next_plan += step
                task, aim = inflight.pop(pos), aims.pop(pos)
                chunk, payload = await task
                self._check(chunk)
                if chunk.bytes_read <= 0 and not chunk.eof:
                    raise InternalError(f"files/read of {self.path} made no progress", method="files/read")
                pos = chunk.offset + chunk.bytes_read
                done = chunk.eof or pos >= size
                if decoder is not None:
                    assert isinstance(payload, bytes)
                    payload = self._decode(decoder, payload, done)
                if payload:
                    yield payload
                if done:
                    return
                if pos < aim:
                    if wire != "base64":
                        # A character straddles the planned offset: the read ahead
                        # there is unusable, and others may be too. Go on with bytes.
                        inflight.clear()
                        aims.clear()
                        decoder = codecs.getincrementaldecoder(self.encoding)("strict")
                        wire, next_plan = "base64", pos
                    else:
                        # The client reads less per request than asked: plan with its size.
                        step = max(1, min(step, chunk.bytes_read))
                for offset in [offset for offset in inflight if offset < pos]:
                    del inflight[offset]
                    aims.pop(offset, None)
        finally:
            for task in self._tasks:
                task.cancel()


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a read's outcome as seen: reads dropped on purpose may have failed."""
    if not task.cancelled():
        task.exception()


# -- watches -----------------------------------------------------------------------------------


class Watch:
    """A ``files/watch`` subscription as an async iterator of :class:`ChangeEvent`.

    Made by :meth:`FilesClient.watch`; use ``async with``.

    Attributes
    ----------
    watch_id
        The client's ``watchId`` once started.
    """

    def __init__(
        self,
        client: FilesClient,
        path: str,
        recursive: bool,
        events: tuple[str, ...] | None,
        buffer: int,
    ) -> None:
        self._client = client
        self.path = path
        self.recursive = recursive
        self.events = events
        self.watch_id: str | None = None
        send, receive = anyio.create_memory_object_stream[ChangeEvent](max(1, buffer))
        self._send: MemoryObjectSendStream[ChangeEvent] = send
        self._receive: MemoryObjectReceiveStream[ChangeEvent] = receive
        self._closed = False

    @property
    def dropped(self) -> int:
        """Events dropped on this connection because a consumer was too slow."""
        return self._client._conn.dropped

    async def start(self) -> Watch:
        """Send ``files/watch`` (once) and start receiving its events."""
        if self.watch_id is not None or self._closed:
            return self
        params = _params(
            path=self.path,
            recursive=self.recursive,
            events=None if self.events is None else builtins.list(self.events),
        )
        result = await self._client._op("files/watch", params, op="watch", paths=[self.path])
        watch_id = _opt_str(result, "watchId")
        if watch_id is None:
            raise InternalError("files/watch answered without a watchId", method="files/watch")
        self.watch_id = watch_id
        conn = self._client._conn
        conn.watches[watch_id] = self._send
        for event in conn.take_early(watch_id):
            conn.deliver(event)
        return self

    async def __aenter__(self) -> Watch:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> ChangeEvent:
        if self.watch_id is None and not self._closed:
            await self.start()
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop receiving and send ``files/unwatch``; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._client._forget(self)
        watch_id = self.watch_id
        if watch_id is not None:
            self._client._conn.watches.pop(watch_id, None)
        self._send.close()
        self._receive.close()
        if watch_id is None:
            return
        # NotFound / ConnectionClosed: gone already (closed by the client, or the connection ended).
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self._client.timeouts.base),
            contextlib.suppress(NotFound, ConnectionClosed),
        ):
            await self._client.request("files/unwatch", {"watchId": watch_id})


# -- stdio on non-blocking pipes ---------------------------------------------------------------


def _is_pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat_module.S_ISFIFO(mode) or stat_module.S_ISSOCK(mode)


_Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@contextlib.asynccontextmanager
async def stdio_streams(*, max_line: int = 64 * MiB) -> AsyncIterator[_Streams]:
    """Serve the process's stdin and stdout as mcp message streams, on non-blocking pipes.

    Like mcp's ``stdio_server()``, but with asyncio pipe transports instead of
    a worker thread per line, which roughly halves the cost of a round trip.
    While serving, fd 0 reads from the null device and fd 1 writes to stderr,
    so stray ``print()`` output cannot corrupt the wire; both are restored on
    exit. Requires the asyncio backend and pipes or sockets as stdin and
    stdout; otherwise it falls back to mcp's ``stdio_server()``.

    Parameters
    ----------
    max_line
        Largest message accepted, in bytes.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or not (_is_pipe_like(0) and _is_pipe_like(1)):
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            yield cast("_Streams", (read_stream, write_stream))
        return

    import fcntl

    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    transports: builtins.list[asyncio.BaseTransport] = []
    try:
        wire_in = os.fdopen(fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), "rb", buffering=0)
        wire_out = os.fdopen(fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3), "wb", buffering=0)
        # The wire now lives on private descriptors: stray reads of fd 0 see EOF,
        # stray writes to fd 1 go to stderr.
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        reader = asyncio.StreamReader(limit=max_line)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), wire_in
        )
        transports.append(read_transport)
        write_transport, write_protocol = await loop.connect_write_pipe(
            lambda: _WriteProtocol(loop), wire_out
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        async with _pipe_streams(reader, writer, max_line) as streams:
            yield streams
    finally:
        for transport in reversed(transports):
            transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        for fd in (0, 1):
            # The pipe transports made the (shared) pipes non-blocking.
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)


@contextlib.asynccontextmanager
async def _pipe_streams(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_line: int
) -> AsyncIterator[_Streams]:
    """mcp message streams over newline-delimited JSON on *reader* and *writer*."""
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](32)
    written = anyio.Event()

    async def read_lines() -> None:
        async with inbound_send:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    line = exc.partial
                    if not line.strip():
                        return
                except asyncio.LimitOverrunError as exc:
                    await _skip_line(reader, exc.consumed)
                    await inbound_send.send(ValueError(f"a message longer than {max_line} bytes was dropped"))
                    continue
                except (ConnectionError, OSError):
                    return
                if not line.strip():
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await inbound_send.send(exc)
                    continue
                await inbound_send.send(SessionMessage(message))

    async def write_lines() -> None:
        try:
            async with outbound_receive:
                async for item in outbound_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.writelines((data.encode("utf-8"), b"\n"))
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            written.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines)
        tg.start_soon(write_lines)
        try:
            yield inbound, outbound
        finally:
            # Let the answers already queued reach the wire, then stop.
            outbound.close()
            with anyio.move_on_after(5, shield=True):
                await written.wait()
            tg.cancel_scope.cancel()


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for the write pipe (what ``StreamWriter.drain`` waits on)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._closed_future: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed_future.done():
            self._closed_future.set_result(None)

    def _get_close_waiter(self, stream: object) -> asyncio.Future[None]:
        return self._closed_future


async def _skip_line(reader: asyncio.StreamReader, consumed: int) -> None:
    await reader.readexactly(consumed)
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)


def _lowlevel(server: MCPServer[Any] | Server[Any]) -> Server[Any]:
    if isinstance(server, Server):
        return server
    # mcp's own in-memory client reaches the low-level server the same way.
    return server._lowlevel_server


async def serve_stdio(server: MCPServer[Any] | Server[Any]) -> None:
    """Serve *server* over stdio on :func:`stdio_streams` until stdin closes."""
    lowlevel = _lowlevel(server)
    async with stdio_streams() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def run_stdio(server: MCPServer[Any] | Server[Any]) -> None:
    """Run *server* over stdio on non-blocking pipes (a faster ``server.run("stdio")``)."""
    anyio.run(serve_stdio, server, backend="asyncio")
