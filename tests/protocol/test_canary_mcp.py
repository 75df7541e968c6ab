"""CANARY: the mcp 2.3 internals and particulars the protocol layer relies on.

``pyproject.toml`` pins ``mcp`` (and ``mcp-types``) to the 2.3 series because the
protocol layer reaches past mcp's public API in a few places. These tests name
each of them and fail loudly when a newer mcp moves one. They check mcp itself,
not our code, so they say what changed upstream whatever our modules look like.

When one fails after upgrading mcp: read the message, find the place it names in
``jupyter_fsbroker/protocol/`` (``grep -rn`` the attribute), adapt it to the new
mcp, then update this canary and the pin in ``pyproject.toml`` together.
"""

from __future__ import annotations

import dataclasses
import inspect

import mcp_types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

#: PROTOCOL.md: SEP-1708 needs the handshake era, and the client speaks every version of it.
HANDSHAKE_ERA = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def test_canary_the_server_sessions_connection_state_is_reachable() -> None:
    """The server helper keeps its per-connection state in mcp's ``Connection.state``."""
    connection = Connection.for_loop(None)  # type: ignore[arg-type]
    session = ServerSession(None, connection)  # type: ignore[arg-type]
    public = getattr(session, "connection", None)
    reached = public if public is not None else getattr(session, "_connection", None)
    assert reached is connection and isinstance(connection.state, dict), (
        "CANARY: mcp no longer keeps the connection on ServerSession._connection (or a public "
        "ServerSession.connection) with a dict `state`. The server helper's per-connection state "
        "(which client brokers files, its watches) lives there: adapt its connection-state lookup "
        "in jupyter_fsbroker/protocol/ (grep `_connection`)."
    )


def test_canary_mcpserver_shares_its_middleware_with_the_lowlevel_server() -> None:
    """``enable_files`` appends to ``MCPServer.middleware``; stdio serving runs ``_lowlevel_server``."""
    server = MCPServer("canary")
    lowlevel = getattr(server, "_lowlevel_server", None)
    assert isinstance(lowlevel, Server), (
        "CANARY: MCPServer._lowlevel_server is gone. The server helper's fast stdio transport runs "
        "the low-level server directly: adapt it in jupyter_fsbroker/protocol/ (grep `_lowlevel_server`)."
    )
    assert isinstance(server.middleware, list) and lowlevel.middleware is server.middleware, (
        "CANARY: MCPServer.middleware is no longer the low-level server's own middleware list. "
        "enable_files() appends FilesMiddleware to it and relies on the low-level server running it."
    )
    assert callable(getattr(lowlevel, "create_initialization_options", None))
    assert inspect.iscoroutinefunction(lowlevel.run)


def test_canary_a_request_context_carries_what_the_files_middleware_reads() -> None:
    fields = {f.name for f in dataclasses.fields(ServerRequestContext)}
    needed = {"session", "method", "params", "request_id"}
    assert needed <= fields, (
        f"CANARY: mcp's ServerRequestContext lost {sorted(needed - fields)}. FilesMiddleware reads the "
        "raw initialize params and routes notifications/files/changed with them."
    )
    assert isinstance(inspect.getattr_static(Context, "request_context", None), property), (
        "CANARY: an MCPServer tool's Context no longer has `request_context`: files(ctx) reaches the "
        "session and request id through it."
    )
    assert isinstance(inspect.getattr_static(ServerSession, "can_send_request", None), property), (
        "CANARY: ServerSession.can_send_request is gone: files(ctx) checks it before sending files/*."
    )


def test_canary_the_http_client_takes_its_client_and_an_unbounded_sse_event_size() -> None:
    parameters = inspect.signature(streamable_http_client).parameters
    assert {"http_client", "max_sse_event_size"} <= set(parameters), (
        "CANARY: mcp's streamable_http_client no longer takes `http_client` and `max_sse_event_size`. "
        "The client passes max_sse_event_size=None so that 2 MiB chunks (base64: ~2.7 MB events) fit "
        "(PROTOCOL.md, Eras and transports): adapt jupyter_fsbroker/protocol/ (grep max_sse_event_size)."
    )


def test_canary_the_client_session_takes_a_message_handler_and_client_info() -> None:
    parameters = inspect.signature(ClientSession.__init__).parameters
    assert {"read_stream", "write_stream", "client_info", "message_handler"} <= set(parameters), (
        "CANARY: mcp's ClientSession constructor changed: the broker's middleware hands it a "
        "(read, write) stream pair of SessionMessage and listens for tool-list changes."
    )


def test_canary_session_messages_wrap_raw_jsonrpc() -> None:
    """The client middleware and the server's stdio streams work on ``SessionMessage`` + raw JSON-RPC."""
    line = '{"jsonrpc": "2.0", "id": 7, "method": "files/read", "params": {"path": "data/x"}}'
    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(message, mcp_types.JSONRPCRequest), (
        "CANARY: mcp_types.jsonrpc_message_adapter no longer parses a vendor request (files/*) "
        "into a JSONRPCRequest: the stdio streams and the middleware depend on it."
    )
    assert message.method == "files/read" and message.params == {"path": "data/x"}
    assert SessionMessage(message).message is message


def test_canary_every_handshake_era_version_is_known() -> None:
    missing = [v for v in HANDSHAKE_ERA if v not in HANDSHAKE_PROTOCOL_VERSIONS]
    assert missing == [], (
        f"CANARY: mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS lacks {missing}. The client refuses "
        "servers outside the handshake era by this list (PROTOCOL.md, Eras and transports)."
    )
