"""Server-side helper: use a client's brokered filesystem (SEP-1708) from an ``MCPServer`` tool.

A server author needs a few lines::

    from mcp.server.mcpserver import Context, MCPServer
    from jupyter_fsbroker.serverkit import enable_files, files, run_stdio

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

This package imports only :mod:`mcp`, the standard library and, of
:mod:`jupyter_fsbroker`, nothing but :mod:`jupyter_fsbroker.wire` (``pybase64``
where it is installed, for base64 many times faster), so a server needs neither
the broker nor Jupyter. The wire contract it speaks is ``PROTOCOL.md``; its facts
(names, sizes, the capability, the change event, the error catalogue) are
:mod:`jupyter_fsbroker.wire`'s, the same objects the client's core uses.

How it hooks into mcp 2.3, module by module
-------------------------------------------
* :func:`enable_files` appends a :class:`FilesMiddleware` to the server's
  middleware chain (:mod:`.capability`): it reads
  ``capabilities.roots.filesystemBrokering`` and the client's
  ``filesystemBrokeringFeatures`` from the raw ``initialize`` params, keeps
  per-connection state (:mod:`.peers`) and routes
  ``notifications/files/changed`` to the :class:`Watch` iterators (:mod:`.subscription`).
* :func:`files` gives a tool a :class:`FilesClient` (:mod:`.files_client`). Its
  requests go out through one :class:`~.requester.Requester` per tool call
  (timeouts, retries, consent); large reads stream through a
  :class:`ChunkStream` (:mod:`.chunks`), large writes are staged
  (:mod:`.writing`), locks are held for a block (:mod:`.locking`). Error answers
  become the exceptions of :mod:`.exceptions`, answers the values of
  :mod:`.answers`; :mod:`.retry` holds the retry and timeout policies.
* :class:`FilesExtension` (:mod:`.files_extension`), passed to ``MCPServer(extensions=[...])``,
  serves the same tools on the 2026-07-28 wire: each request re-runs the tool over the answers
  recorded so far (:mod:`.replay`) and ends with a batch and a continuation sealed under a key
  ring replicas share (:mod:`.sealing`), so no session and no affinity are needed.
* :func:`run_stdio` serves a server on non-blocking pipe streams (:mod:`.stdio_server`)
  instead of mcp's thread-per-line stdio transport.
* What mcp 2.3 offers no public API for is reached in :mod:`.mcp_internals`
  only, with a canary test.
"""

from __future__ import annotations

import warnings

from ..wire.brokering import MISSING_CAPABILITY_MESSAGE, advertises_brokering, brokering_features
from ..wire.caps import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES
from ..wire.methods import CHANGED_NOTIFICATION, OPERATIONS, WATCH_EVENTS
from .answers import (
    ChangeEvent,
    ConsentResult,
    Created,
    Deleted,
    Entry,
    FileStat,
    PathConsentResult,
    ReadChunk,
    RootEntry,
    WriteResult,
)
from .capability import FilesMiddleware, client_brokers_files, enable_files, files
from .chunks import ChunkStream
from .exceptions import (
    AlreadyExistsError,
    ClientDisconnectedError,
    ClientInternalError,
    ContentEncodingError,
    ContinuationRefusedError,
    FileLockedError,
    FilesRequestError,
    FilesUnavailableError,
    IntegrityError,
    InvalidParamsError,
    MethodNotFoundError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    RateLimitedError,
    ReplayDivergedError,
    RequestTimeoutError,
    TooLargeError,
    WrongTypeError,
    error_from_jsonrpc,
)
from .files_client import FilesClient
from .files_extension import FilesExtension
from .retry import RetryPolicy, Timeouts
from .sealing import load_state_keys
from .stdio_server import run_stdio, serve_stdio, stdio_streams
from .subscription import Watch

__all__ = [
    "CHANGED_NOTIFICATION",
    "DEFAULT_CHUNK_BYTES",
    "MAX_CHUNK_BYTES",
    "MISSING_CAPABILITY_MESSAGE",
    "OPERATIONS",
    "WATCH_EVENTS",
    "AlreadyExistsError",
    "ChangeEvent",
    "ChunkStream",
    "ClientDisconnectedError",
    "ClientInternalError",
    "ConsentResult",
    "ContentEncodingError",
    "ContinuationRefusedError",
    "Created",
    "Deleted",
    "Entry",
    "FileLockedError",
    "FileStat",
    "FilesClient",
    "FilesExtension",
    "FilesMiddleware",
    "FilesRequestError",
    "FilesUnavailableError",
    "IntegrityError",
    "InvalidParamsError",
    "MethodNotFoundError",
    "NotFoundError",
    "PathConsentResult",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "RateLimitedError",
    "ReadChunk",
    "ReplayDivergedError",
    "RequestTimeoutError",
    "RetryPolicy",
    "RootEntry",
    "Timeouts",
    "TooLargeError",
    "Watch",
    "WriteResult",
    "WrongTypeError",
    "advertises_brokering",
    "brokering_features",
    "client_brokers_files",
    "enable_files",
    "error_from_jsonrpc",
    "files",
    "load_state_keys",
    "run_stdio",
    "serve_stdio",
    "stdio_streams",
]


def __getattr__(name: str) -> object:
    """``Root``, the old name of :class:`RootEntry` (it goes in the next release)."""
    if name == "Root":
        warnings.warn(
            "jupyter_fsbroker.serverkit.Root is now RootEntry; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return RootEntry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
