"""The ``filesystemBrokering`` capability on an mcp server: record it per connection, use it in a tool.

:class:`FilesMiddleware` sees every inbound message with its raw params before
any model validation (mcp's typed models drop unknown keys), so it reads the
capability and the client's ``filesystemBrokeringFeatures`` from the raw
``initialize`` params and records them, with the watch routing, in the
connection's :class:`~.peers.ConnectionFiles`; it also
routes ``notifications/files/changed`` (a client→server notification mcp does
not know) to that connection's watches. With ``require=True`` it refuses the
handshake itself with the -32603 error SEP-1708 prescribes.

:func:`files` is a tool's way in: it checks the capability and the transport
and gives the tool a :class:`~.files_client.FilesClient`. Nothing here sends anything
to the client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from ..wire.brokering import MISSING_CAPABILITY_MESSAGE, advertises_brokering, brokering_features
from ..wire.events import ChangeEvent
from ..wire.methods import CHANGED_NOTIFICATION
from ..wire.modern import EXTENSION_ID, lists_extension
from .exceptions import FilesUnavailableError
from .files_client import FilesClient
from .mcp_internals import connection_state
from .peers import ConnectionFiles
from .replay import current_step
from .retry import RetryPolicy, Timeouts

__all__ = [
    "FilesMiddleware",
    "client_brokers_files",
    "enable_files",
    "files",
]

log = logging.getLogger(__name__)

_STATE_KEY = "jupyter_fsbroker.files"


class FilesMiddleware:
    """mcp server middleware that enables :func:`~.files_client.files` on a server.

    Install it with :func:`enable_files` (or ``MCPServer(middleware=[...])``).
    It records whether each client advertised ``filesystemBrokering``, and
    the features it lists (both read from the raw ``initialize`` params),
    and routes
    ``notifications/files/changed`` to the connection's watches.

    Parameters
    ----------
    require
        Refuse the handshake of a client that does not broker files, with
        JSON-RPC error -32603 and the message SEP-1708 prescribes. Without it,
        the error comes from :func:`~.files_client.files` in the first tool that needs files.
    """

    def __init__(self, *, require: bool = False) -> None:
        self.require = require

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize" and ctx.request_id is not None:
            advertised = advertises_brokering(ctx.params)
            if self.require and not advertised:
                raise FilesUnavailableError()
            result = await call_next(ctx)
            state = connection_state(ctx.session)
            if state is None:
                log.warning("cannot reach mcp's connection state; files(ctx) will be unavailable")
            else:
                raw = (ctx.params or {}).get("capabilities")
                caps = cast("Mapping[str, Any]", raw) if isinstance(raw, Mapping) else None
                state[_STATE_KEY] = ConnectionFiles(advertised, caps, brokering_features(ctx.params))
            return result
        if ctx.method == CHANGED_NOTIFICATION and ctx.request_id is None:
            event = ChangeEvent.from_params(ctx.params)
            state = connection_state(ctx.session)
            conn = state.get(_STATE_KEY) if state is not None else None
            if event is not None and isinstance(conn, ConnectionFiles):
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


def _connection_files(
    ctx: Context[Any, Any] | ServerRequestContext[Any, Any],
) -> tuple[ServerRequestContext[Any, Any], ConnectionFiles | None]:
    """The request context of *ctx* and its connection's state (``None`` before ``initialize``).

    Raises
    ------
    RuntimeError
        mcp's connection state cannot be reached, or :func:`enable_files` was
        not called on the server.
    """
    rc = ctx.request_context if isinstance(ctx, Context) else ctx
    state = connection_state(rc.session)
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
    return rc, conn if isinstance(conn, ConnectionFiles) else None


def client_brokers_files(ctx: Context[Any, Any] | ServerRequestContext[Any, Any]) -> bool:
    """Whether the client of this request advertised ``filesystemBrokering``.

    Raises
    ------
    RuntimeError
        :func:`enable_files` was not called on the server.
    """
    _, conn = _connection_files(ctx)
    return conn is not None and conn.brokering


def files(
    ctx: Context[Any, Any] | ServerRequestContext[Any, Any],
    *,
    consent_message: str | None = None,
    consent_operations: Sequence[str] = (),
    consent_paths: Sequence[str] = (),
    consent_access: Mapping[str, Sequence[str]] | None = None,
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
    consent_access
        ``{path: operations}``: what the tool needs on each path, when it
        differs from path to path (say ``{data: ["read"], report: ["write"]}``);
        the consent then asks for exactly that (PROTOCOL.md, "Per-path
        operations"), so the user can grant write on the report only; a
        client that does not list ``perPathConsent`` is asked the same as
        flat requests, one per set of operations. Replaces *consent_paths*
        and *consent_operations*.
    retry, timeouts
        See :class:`RetryPolicy` and :class:`Timeouts`.

    Returns
    -------
    FilesClient
        Valid while the request is being handled.

    Raises
    ------
    FilesUnavailableError
        The client did not advertise ``filesystemBrokering`` (JSON-RPC -32603
        with SEP-1708's message), it speaks a protocol version of the modern
        era (2026-07-28), which has no server-to-client requests (the message
        says so), or this transport cannot carry server-to-client requests
        (stateless or JSON-response HTTP).
    RuntimeError
        :func:`enable_files` was not called, or this is not inside a request.
    """
    rc = ctx.request_context if isinstance(ctx, Context) else ctx
    step = current_step()
    if step is not None:  # the 2026-07-28 wire, through FilesExtension's batches
        conn: ConnectionFiles | None = step.connection
    elif rc.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise FilesUnavailableError(_modern_message(rc), modern_reason="no_extension")
    elif rc.request_id is not None and not rc.session.can_send_request:
        # Before the capability: a stateless server has no record of the client's initialize.
        raise FilesUnavailableError(NO_RETURN_PATH_MESSAGE)
    else:
        rc, conn = _connection_files(ctx)
    if conn is None or not conn.brokering:
        raise FilesUnavailableError(_unavailable_message(rc.session.protocol_version))
    if rc.request_id is None:
        raise RuntimeError("files(ctx) needs the context of a request being handled")
    client = FilesClient(
        rc.session,
        rc.request_id,
        conn,
        consent_message=consent_message,
        consent_operations=tuple(consent_operations),
        consent_paths=tuple(consent_paths),
        consent_access=consent_access,
        retry=retry,
        timeouts=timeouts,
    )
    if step is not None:
        client.started = step.started
    return client


#: Why a tool called on a legacy transport without a return path cannot have files, and the fix.
NO_RETURN_PATH_MESSAGE = (
    f"{MISSING_CAPABILITY_MESSAGE}: this server answers the handshake era statelessly (or in JSON), "
    "so it has no return path for server-to-client requests; connect on MCP 2026-07-28 with the "
    f"{EXTENSION_ID} extension, or serve this server statefully"
)


def _modern_message(rc: ServerRequestContext[Any, Any]) -> str:
    """Why a modern request cannot have files: the client lists no extension, or names no one."""
    meta = (rc.params or {}).get("_meta")
    if isinstance(meta, Mapping) and lists_extension(cast("Mapping[str, Any]", meta)):
        return (
            f"{MISSING_CAPABILITY_MESSAGE}: this request names neither an authenticated subject nor a "
            f"connection id (_meta[{EXTENSION_ID!r}].connection) to bind its continuation to; "
            "send the connection id with every tools/call"
        )
    return (
        f"{MISSING_CAPABILITY_MESSAGE}: this client speaks MCP {rc.protocol_version} and does not list "
        f"the {EXTENSION_ID} extension, without which that era cannot carry files requests; use a "
        "client that lists it, or connect in the handshake era "
        f"({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})"
    )


def _unavailable_message(protocol_version: str | None) -> str:
    """SEP-1708's message, with the real cause when the client's protocol era cannot broker files."""
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return (
            f"{MISSING_CAPABILITY_MESSAGE}: this client speaks MCP {protocol_version}, whose era has no "
            "server-to-client requests, so it cannot broker files whatever it advertises; connect with "
            f"a protocol version of the handshake era ({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})"
        )
    return MISSING_CAPABILITY_MESSAGE
