"""A test MCP server built on mcp 2.3's low-level ``Server``: it drives the client's ``files/*`` side.

Run it as ``python fs_server.py`` (stdio) or ``python fs_server.py --http [--token T] [--port P | --fd N]``
(Streamable HTTP under uvicorn on 127.0.0.1, by default on a free port, or on the
listening socket inherited as descriptor *N*; the first line on stdout is ``PORT <n>``).

Its tools send raw server→client requests and return what came back, as JSON
in ``structuredContent`` (and as text):

* ``request {method, params, timeout?}`` → ``{"result": ...}`` or ``{"error": {code, message, data}}``;
* ``requests {requests: [{method, params}], timeout?}`` → all at once:
  ``{"outcomes": [...], "order": [indices in completion order]}``;
* ``initialize_params`` → the raw ``initialize`` params the client sent;
* ``next_notification {method, timeout?}`` → ``{"params": ...}`` of the next
  notification of that method received on this connection, or ``{"timeout": true}``;
* ``info`` → ``{"pid", "session" (the HTTP session id, or null), "cwd", "env" ($FSBROKER_TEST_ENV)}``;
* ``http_log`` → ``{"requests": [[method, mcp-session-id], ...]}``: every HTTP
  request this server received (HTTP mode only).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections import defaultdict, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ConfigDict

from tests.support.handover import serve_on

HTTP_LOG: list[tuple[str, str | None]] = []
RECORDED_NOTIFICATIONS = ("notifications/files/changed", "notifications/roots/list_changed")
DEFAULT_TIMEOUT = 30.0


class RawRequest(types.Request[dict[str, Any] | None, str]):
    """Any server→client request, sent through the typed ``ServerSession.send_request``."""

    method: str
    params: dict[str, Any] | None = None


class RawResult(BaseModel):
    """Any result: every member kept as sent."""

    model_config = ConfigDict(extra="allow")


class Inbox:
    """The notifications one connection received, by method, for tools to wait on."""

    def __init__(self) -> None:
        self.items: dict[str, deque[Any]] = defaultdict(deque)
        self.changed = anyio.Event()

    def put(self, method: str, params: Any) -> None:
        self.items[method].append(params)
        self.changed.set()
        self.changed = anyio.Event()

    async def get(self, method: str, timeout: float) -> dict[str, Any]:
        with anyio.move_on_after(timeout):
            while not self.items[method]:
                await self.changed.wait()
            return {"params": self.items[method].popleft()}
        return {"timeout": True}


def connection_state(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """Per-connection scratch state (mcp's ``Connection.state``; the session proxy holds the connection)."""
    return ctx.session._connection.state  # type: ignore[no-any-return]


def inbox(ctx: ServerRequestContext[Any, Any]) -> Inbox:
    return connection_state(ctx).setdefault("inbox", Inbox())  # type: ignore[no-any-return]


async def record(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: keep the raw ``initialize`` params and the client's notifications."""
    if ctx.method == "initialize":
        connection_state(ctx)["initialize"] = json.loads(json.dumps(dict(ctx.params or {})))
    elif ctx.request_id is None and ctx.method in RECORDED_NOTIFICATIONS:
        inbox(ctx).put(ctx.method, dict(ctx.params) if isinstance(ctx.params, Mapping) else ctx.params)
    return await call_next(ctx)


async def send_raw(
    ctx: ServerRequestContext[Any, Any], method: str, params: Any, timeout: float
) -> dict[str, Any]:
    """Send one raw request on this tool call's channel; return the result or the error."""
    try:
        result = await ctx.session.send_request(
            RawRequest(method=method, params=params),  # type: ignore[arg-type]
            RawResult,
            request_read_timeout_seconds=timeout,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except MCPError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return {"error": error}
    return {"result": result.model_dump()}


TOOLS = [
    types.Tool(
        name="request",
        description="Send one raw server-to-client request.",
        input_schema={
            "type": "object",
            "properties": {"method": {"type": "string"}, "params": {}, "timeout": {"type": "number"}},
            "required": ["method"],
        },
    ),
    types.Tool(
        name="requests",
        description="Send several raw requests at once.",
        input_schema={
            "type": "object",
            "properties": {"requests": {"type": "array"}, "timeout": {"type": "number"}},
            "required": ["requests"],
        },
    ),
    types.Tool(
        name="initialize_params", description="The raw initialize params.", input_schema={"type": "object"}
    ),
    types.Tool(
        name="next_notification",
        description="Wait for a notification from the client.",
        input_schema={
            "type": "object",
            "properties": {"method": {"type": "string"}, "timeout": {"type": "number"}},
            "required": ["method"],
        },
    ),
    types.Tool(name="info", description="The server process.", input_schema={"type": "object"}),
    types.Tool(name="http_log", description="The HTTP requests received.", input_schema={"type": "object"}),
]


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    timeout = float(args.get("timeout", DEFAULT_TIMEOUT))
    payload: dict[str, Any]
    if params.name == "request":
        payload = await send_raw(ctx, args["method"], args.get("params"), timeout)
    elif params.name == "requests":
        requests = args["requests"]
        outcomes: list[Any] = [None] * len(requests)
        order: list[int] = []

        async def one(index: int, request: dict[str, Any]) -> None:
            outcomes[index] = await send_raw(ctx, request["method"], request.get("params"), timeout)
            order.append(index)

        async with anyio.create_task_group() as tg:
            for index, request in enumerate(requests):
                tg.start_soon(one, index, request)
        payload = {"outcomes": outcomes, "order": order}
    elif params.name == "initialize_params":
        payload = {"params": connection_state(ctx).get("initialize")}
    elif params.name == "next_notification":
        payload = await inbox(ctx).get(args["method"], timeout)
    elif params.name == "info":
        request = ctx.request
        session = None if request is None else request.headers.get("mcp-session-id")
        payload = {
            "pid": os.getpid(),
            "session": session,
            "cwd": os.getcwd(),
            "env": os.environ.get("FSBROKER_TEST_ENV"),
        }
    elif params.name == "http_log":
        payload = {"requests": list(HTTP_LOG)}
    else:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="no such tool")], is_error=True
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload))], structured_content=payload
    )


def make_server() -> Server[Any]:
    server: Server[Any] = Server(
        "fs-test-server", version="1.2.3", on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.middleware.append(record)
    return server


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = make_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class Gate:
    """ASGI wrapper: log each HTTP request; refuse those without ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.expected = None if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        HTTP_LOG.append((scope["method"], None if session is None else session.decode()))
        if self.expected is not None and headers.get(b"authorization") != self.expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def run_http(token: str | None, port: int, fd: int | None) -> None:
    app = Gate(make_server().streamable_http_app(host="127.0.0.1"), token)
    if fd is not None:
        sock = socket.socket(fileno=fd)  # already listening: the parent bound it before starting us
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    serve_on(app, sock)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fd", type=int, help="serve on this inherited, listening socket")
    options = parser.parse_args()
    if options.http:
        run_http(options.token, options.port, options.fd)
    else:
        anyio.run(run_stdio)


if __name__ == "__main__":
    sys.exit(main())
