"""A hostile MCP server for the tests: it writes the JSON-RPC bytes itself, malformed on purpose.

Usage: ``hostile.py`` (stdio) or ``hostile.py --http --fd N`` (Streamable HTTP, by hand, under
uvicorn on the listening socket inherited as descriptor *N*; prints ``PORT <n>`` when ready).

It answers the handshake and ``tools/list`` like any server, then offers:

``attack {lines: [base64 of the raw bytes of each message], expect: n, huge?: n}``
    With *huge*, first sends one ``files/write`` request (id 301) of more than
    *huge* bytes. Sends every message as is — over stdio as one line each, over
    HTTP as one server-sent event each on this call's stream — and collects
    what the client sends back until *expect* answers came (or 60 s passed);
    then sends a valid ``roots/list`` with the id ``"sentinel"`` and keeps
    collecting until its answer, so that an answer sent twice would show.
    Returns ``{"answers": [...]}``: the client's messages in arrival order
    (without the sentinel's answer), each as ``{"raw": text}`` when it is not
    valid JSON, else the parsed message.

It imports nothing but the standard library and the tests' own wire helpers, which keep to it (and
starlette and uvicorn for HTTP).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from tests.support.handover import run_server, serve_on_inherited
from tests.support.linewire import LineWire, text_result

#: Seconds the server waits for the answers it expects.
PATIENCE = 60.0

SENTINEL = {"jsonrpc": "2.0", "id": "sentinel", "method": "roots/list"}
TOOLS = [{"name": "attack", "inputSchema": {"type": "object"}}]
SERVER_INFO = {"name": "hostile", "version": "0"}


def decoded(message: bytes) -> dict[str, Any]:
    try:
        value = json.loads(message)
    except ValueError:
        return {"raw": message.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"raw": message.decode("utf-8", "replace")}


def messages(arguments: dict[str, Any]) -> list[bytes]:
    found = [base64.b64decode(item) for item in arguments["lines"]]
    if arguments.get("huge"):
        head = b'{"jsonrpc":"2.0","id":301,"method":"files/write","params":{"path":"data/big","content":"'
        found.insert(0, head + b"A" * (arguments["huge"] + 10) + b'"}}')
    return found


def tool_result(answers: list[dict[str, Any]]) -> dict[str, Any]:
    return text_result({"answers": answers})


def handshake_result(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": SERVER_INFO,
    }


# -- stdio ---------------------------------------------------------------------------------------


def serve_stdio() -> None:
    pipe = LineWire()
    while True:
        line = pipe.recv_line()
        assert line is not None
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            pipe.reply(request_id, handshake_result(message))
        elif method == "tools/list":
            pipe.reply(request_id, {"tools": TOOLS})
        elif method == "tools/call":
            arguments = message["params"]["arguments"]
            for raw in messages(arguments):
                pipe.send_bytes(raw + b"\n")
            answers: list[dict[str, Any]] = []
            deadline = time.monotonic() + PATIENCE
            sentinel_sent = False
            while True:
                if len(answers) >= arguments["expect"] and not sentinel_sent:
                    pipe.send(SENTINEL)
                    sentinel_sent = True
                got = pipe.recv_line(max(0.0, deadline - time.monotonic()))
                if got is None:  # out of patience: report what came
                    if sentinel_sent:
                        break
                    pipe.send(SENTINEL)
                    sentinel_sent = True
                    deadline = time.monotonic() + PATIENCE
                    continue
                answer = decoded(got)
                if answer.get("id") == "sentinel" and "method" not in answer:
                    break
                if answer.get("method", "").startswith("notifications/"):
                    continue
                answers.append(answer)
            pipe.reply(request_id, tool_result(answers))
        else:
            pipe.reply_error(request_id, -32601, "Method not found")


# -- Streamable HTTP, by hand ------------------------------------------------------------------


def serve_http(fd: int) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    session = "hostile-session"
    received: list[dict[str, Any]] = []
    sentinel_answered = asyncio.Event()
    arrived = asyncio.Event()

    async def mcp(request: Request) -> Response:
        if request.method == "DELETE":
            return Response(status_code=200)
        if request.method == "GET":
            return Response(status_code=405)
        body = await request.body()
        message = decoded(body)
        method, request_id = message.get("method"), message.get("id")
        if method is None or "id" not in message:
            # An answer or a notification from the client.
            if request_id == "sentinel" and method is None:
                sentinel_answered.set()
            elif not str(method).startswith("notifications/"):
                received.append(message)
                arrived.set()
            return Response(status_code=202)
        if method == "initialize":
            result = handshake_result(message)
            return JSONResponse(
                {"jsonrpc": "2.0", "id": request_id, "result": result}, headers={"mcp-session-id": session}
            )
        if method == "tools/list":
            return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        if method == "tools/call":
            arguments = message["params"]["arguments"]
            lines = messages(arguments)
            received.clear()
            sentinel_answered.clear()

            async def events() -> Any:
                for raw in lines:
                    yield b"event: message\r\ndata: " + raw + b"\r\n\r\n"
                deadline = time.monotonic() + PATIENCE
                while len(received) < arguments["expect"] and time.monotonic() < deadline:
                    arrived.clear()
                    try:
                        await asyncio.wait_for(arrived.wait(), deadline - time.monotonic())
                    except TimeoutError:
                        break
                yield b"data: " + json.dumps(SENTINEL).encode() + b"\n\n"
                await sentinel_answered.wait()
                answer = {"jsonrpc": "2.0", "id": request_id, "result": tool_result(list(received))}
                yield b"data: " + json.dumps(answer).encode() + b"\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        error = {"code": -32601, "message": "Method not found"}
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})

    app = Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])])
    serve_on_inherited(app, fd, lifespan="off")


def main() -> None:
    run_server(serve_stdio, serve_http)


if __name__ == "__main__":
    sys.exit(main())
