"""A server that floods its client with requests, writing the JSON-RPC lines itself (stdio).

Tool ``flood {big, small, big_path, small_path, length}``: a thread writes *big*
``files/read`` requests of *big_path* asking for *length* bytes, interleaved
with *small* ``files/stat`` requests of *small_path* — as fast as the pipe
takes them, never waiting for an answer — while the main thread reads the
answers. Once every request has its answer (or 120 s passed) it returns
``{"requests", "answered", "twice", "outcomes": {"result" | code: count}, "retry_after_ms": [...]}``.

Tool ``sequence {count, method, params}``: the opposite, a well-behaved server at full speed:
*count* requests one at a time, each sent as soon as the previous one is answered; it returns
``{"requests", "seconds", "outcomes", "retry_after_ms"}``.

It imports nothing but the standard library and the tests' own wire helpers, which keep to it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from tests.support.linewire import LineWire, text_result

PATIENCE = 120.0


def receive(wire: LineWire, timeout: float | None = None) -> dict[str, Any] | None:
    """The next message (``{}`` for a blank line); ``None`` if none came within *timeout* seconds."""
    line = wire.recv_line(timeout)
    if line is None:
        return None
    return json.loads(line) if line.strip() else {}


def flood(wire: LineWire, args: dict[str, Any]) -> dict[str, Any]:
    big, small = args["big"], args["small"]
    total = big + small
    reads_at = {int(i * total / big) for i in range(big)} if big else set()
    requests: list[dict[str, Any]] = []
    for index in range(total):
        if index in reads_at:
            method = "files/read"
            params: dict[str, Any] = {
                "path": args["big_path"],
                "length": args["length"],
                "encoding": "base64",
            }
        else:
            method, params = "files/stat", {"path": args["small_path"]}
        requests.append({"jsonrpc": "2.0", "id": index + 1, "method": method, "params": params})

    def write_all() -> None:
        for request in requests:
            wire.send(request)

    writer = threading.Thread(target=write_all)
    writer.start()
    answered: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    retry_after: list[int] = []
    deadline = time.monotonic() + PATIENCE
    while len(answered) < len(requests):
        message = receive(wire, max(0.0, deadline - time.monotonic()))
        if message is None:
            break
        if "method" in message or "id" not in message:
            continue
        answered[message["id"]] += 1
        if "error" in message:
            outcomes[str(message["error"]["code"])] += 1
            retry = message["error"].get("data", {}).get("retryAfterMs")
            if retry is not None:
                retry_after.append(retry)
        else:
            outcomes["result"] += 1
    writer.join()
    return {
        "requests": len(requests),
        "answered": len(answered),
        "twice": sum(1 for count in answered.values() if count > 1),
        "outcomes": dict(outcomes),
        "retry_after_ms": sorted(set(retry_after)),
    }


def sequence(wire: LineWire, args: dict[str, Any]) -> dict[str, Any]:
    outcomes: Counter[str] = Counter()
    retry_after: list[int] = []
    start = time.perf_counter()
    for index in range(args["count"]):
        request_id = f"seq-{index}"
        wire.send({"jsonrpc": "2.0", "id": request_id, "method": args["method"], "params": args["params"]})
        while True:
            message = receive(wire, PATIENCE)
            if message is None:
                raise RuntimeError(f"no answer to request {index} within {PATIENCE:g} s")
            if message.get("id") == request_id and "method" not in message:
                break
        if "error" in message:
            outcomes[str(message["error"]["code"])] += 1
            retry = message["error"].get("data", {}).get("retryAfterMs")
            if retry is not None:
                retry_after.append(retry)
        else:
            outcomes["result"] += 1
    return {
        "requests": args["count"],
        "seconds": time.perf_counter() - start,
        "outcomes": dict(outcomes),
        "retry_after_ms": sorted(set(retry_after)),
    }


TOOLS = {"flood": flood, "sequence": sequence}


def main() -> None:
    wire = LineWire()
    while True:
        message = receive(wire)
        assert message is not None
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            wire.reply(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "flood", "version": "0"},
                },
            )
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
            wire.reply(request_id, {"tools": tools})
        elif method == "tools/call":
            tool = TOOLS[message["params"]["name"]]
            wire.reply(request_id, text_result(tool(wire, message["params"]["arguments"])))
        else:
            wire.reply_error(request_id, -32601, "no")


if __name__ == "__main__":
    sys.exit(main())
