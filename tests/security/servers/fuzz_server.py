"""A hostile MCP server for the tests: plain JSON lines over stdio, no ``mcp`` import.

It answers the handshake and ``tools/list``, then on ``tools/call send`` writes
the requests it is given, byte for byte as JSON text (so it can send what no
typed server would: huge numbers, lone surrogate escapes, any shape of
``params``), all at once, and waits for their answers. It returns, for every
request, each answer that came back for its id, summarised: the result's keys,
or the error's code, name and reason. An answer that is not JSON is recorded
as ``garbage``. After the batch it sends one ordinary ``files/stat`` of
``check_path`` and reports its answer too, to show that the connection still
works.

Usage: ``fuzz_server.py`` (stdio). Tool arguments of ``send``:
``{"requests": [[method, params_json_or_null], ...], "check_path": str, "timeout": s,
"linger": s}``: after the last answer it listens ``linger`` seconds more (default 0.2) for a
second answer to any id; an answer that comes for an id of an earlier batch is reported as a
stray of the batch it came in, so a connection that goes on catches late ones anyway.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from tests.support.linewire import LineWire, text_result


def summary(line: bytes) -> dict[str, Any]:
    """What an answer says, in a few members."""
    try:
        message = json.loads(line)
    except ValueError:
        return {"garbage": line[:200].decode("utf-8", "replace")}
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        return {
            "code": error.get("code"),
            "name": data.get("error"),
            "reason": data.get("reason"),
            "message": str(error.get("message"))[:300],
        }
    result = message.get("result")
    return {"result": sorted(result) if isinstance(result, dict) else repr(result)[:100]}


def send_batch(wire: LineWire, args: dict[str, Any], first_id: int) -> dict[str, Any]:
    requests: list[list[Any]] = args["requests"]
    timeout = float(args.get("timeout", 60.0))
    linger = float(args.get("linger", 0.2))
    ids = list(range(first_id, first_id + len(requests)))
    out = bytearray()
    for request_id, (method, params) in zip(ids, requests, strict=True):
        line = f'{{"jsonrpc":"2.0","id":{request_id},"method":{json.dumps(method)}'
        if params is not None:
            line += f',"params":{params}'
        out += (line + "}\n").encode("utf-8", "surrogatepass")
    check_id = first_id + len(requests)
    wire.send_bytes(bytes(out))
    answers: dict[int, list[dict[str, Any]]] = {i: [] for i in [*ids, check_id]}
    sent_check = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sent_check and all(answers[i] for i in ids):
            wire.send(
                {
                    "jsonrpc": "2.0",
                    "id": check_id,
                    "method": "files/stat",
                    "params": {"path": args["check_path"]},
                }
            )
            sent_check = True
        if sent_check and answers[check_id]:
            # Linger a little: a second answer to any id would show up now.
            deadline = min(deadline, time.monotonic() + linger)
        line = wire.recv_line(max(0.0, deadline - time.monotonic()))
        if line is None:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            answers.setdefault(-1, []).append(summary(line))
            continue
        if "method" in message:
            if "id" in message:  # a request of the client (ping ...): not ours to serve
                wire.reply_error(message["id"], -32601, "no")
            continue
        key = message.get("id")
        if isinstance(key, int) and key in answers:
            answers[key].append(summary(line))
        else:
            answers.setdefault(-1, []).append(summary(line))
    return {
        "answers": [answers[i] for i in ids],
        "check": answers[check_id],
        "stray": answers.get(-1, []),
    }


def main() -> int:
    wire = LineWire()
    next_id = 1000
    while True:
        line = wire.recv_line(3600.0)
        if line is None:
            return 0
        message = json.loads(line)
        method = message.get("method")
        if "id" not in message:
            continue
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fuzz", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "send", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call" and message["params"]["name"] == "send":
            args = message["params"].get("arguments") or {}
            report = send_batch(wire, args, next_id)
            next_id += len(args["requests"]) + 1
            result = text_result(report)
        elif method == "ping":
            result = {}
        else:
            wire.reply_error(message["id"], -32601, "not here")
            continue
        wire.reply(message["id"], result)


if __name__ == "__main__":
    sys.exit(main())
