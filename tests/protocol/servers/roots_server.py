"""A server that fetches the roots late, as real servers do, and talks on stderr and in log messages.

Plain JSON-RPC over stdio, no ``mcp`` import (it starts fast). After
``notifications/initialized`` (and after each ``notifications/roots/list_changed``)
it waits ``--ask-after`` ms, sends ``roots/list``, and applies the answer
``--apply-after`` ms after receiving it, like a server that validates the
roots asynchronously (the official filesystem server does). Without
``--ask-after`` it never asks.

Tools:

``roots``
    ``{"applied": [uri, ...] | null, "raw": [...] | null, "meta": {...} | null, "asked": n}``:
    the roots in force when the call is handled (``null`` before any were
    applied), the items and the ``_meta`` of that ``roots/list`` answer as
    they came, and how many times it asked. With ``{"wait": true}`` it first
    waits (up to 10 s) until it has applied an answer.
``log {level, data, logger?}``
    Sends ``notifications/message`` with those params, then answers ``"sent"``.
``stderr {text}``
    Writes ``text`` and a newline on stderr, then answers ``"written"``.

It writes ``roots server ready`` on stderr when it starts, and ``roots applied``
each time it applied roots. ``--name`` sets its ``serverInfo.name``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

TOOLS = [
    {"name": name, "description": description, "inputSchema": {"type": "object"}}
    for name, description in (
        ("roots", "The roots in force."),
        ("log", "Send a log message.\n\n        Arguments: level, data, logger.\n        "),
        ("stderr", "Write a line on stderr."),
    )
]


class Server:
    def __init__(self, ask_after: float | None, apply_after: float, name: str) -> None:
        self.ask_after = ask_after
        self.apply_after = apply_after
        self.name = name
        self.applied: list[str] | None = None
        self.raw: list[Any] | None = None
        self.meta: dict[str, Any] | None = None
        self.asked = 0
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.applied_once = asyncio.Event()

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def fetch_roots(self) -> None:
        assert self.ask_after is not None
        await asyncio.sleep(self.ask_after)
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self.asked += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "roots/list"})
        answer = await future
        await asyncio.sleep(self.apply_after)
        self.raw = answer.get("result", {}).get("roots", [])
        self.meta = answer.get("result", {}).get("_meta")
        self.applied = [root["uri"] for root in self.raw]
        self.applied_once.set()
        print("roots applied", file=sys.stderr, flush=True)

    def handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            future = self.pending.pop(message.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(message)
            return
        if method in ("notifications/initialized", "notifications/roots/list_changed"):
            if self.ask_after is not None:
                self.spawn(self.fetch_roots())
            return
        if "id" not in message:
            return
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        params = message.get("params") or {}
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": self.name, "version": "1"},
            }
        elif method == "tools/list":
            reply["result"] = {"tools": TOOLS}
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            if params.get("name") == "roots" and arguments.get("wait"):
                self.spawn(self.call_when_applied(reply))
                return
            reply["result"] = self.call(params.get("name"), arguments)
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"no method {method}"}
        self.send(reply)

    async def call_when_applied(self, reply: dict[str, Any]) -> None:
        await asyncio.wait_for(self.applied_once.wait(), 10)
        self.send({**reply, "result": self.call("roots", {})})

    def call(self, name: str | None, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == "roots":
            value: Any = {"applied": self.applied, "raw": self.raw, "meta": self.meta, "asked": self.asked}
        elif name == "log":
            self.send({"jsonrpc": "2.0", "method": "notifications/message", "params": arguments})
            value = "sent"
        elif name == "stderr":
            print(arguments.get("text", ""), file=sys.stderr, flush=True)
            value = "written"
        else:
            return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}
        return {"content": [{"type": "text", "text": json.dumps(value)}], "isError": False}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ask-after", type=float, help="ms after initialized before asking roots/list")
    parser.add_argument("--apply-after", type=float, default=0.0, help="ms from the answer to applying it")
    parser.add_argument("--name", default="roots-test-server", help="serverInfo.name")
    args = parser.parse_args()
    ask_after = None if args.ask_after is None else args.ask_after / 1000.0
    server = Server(ask_after, args.apply_after / 1000.0, args.name)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("roots server ready", file=sys.stderr, flush=True)
    while line := await reader.readline():
        if line.strip():
            server.handle(json.loads(line))


if __name__ == "__main__":
    asyncio.run(main())
