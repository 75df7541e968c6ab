"""A raw-wire MCP server for the tests: plain JSON-RPC over stdio, no ``mcp`` import.

It checks the exact capability the client puts in ``initialize``, answers the
handshake, then on ``tools/call run`` issues hand-built ``files/*`` and
``roots/list`` requests (the script below) and records every raw response line
it gets back; ``tools/call wait {method, timeout}`` waits for a notification
from the client. Everything recorded is also written, as JSON, to the file
named on the command line. The tests compare the records with PROTOCOL.md.

Usage: ``raw_server.py OUT_JSON [--modern-error | --modern-result | --modern-only]``. With
``--modern-error`` it answers ``initialize`` like a server that only speaks the
2026-07-28 era (error -32022); with ``--modern-result`` it answers with protocol
version 2026-07-28; with ``--modern-only`` it answers ``initialize`` with that error, then
``server/discover`` (the 2026-07-28 era, tools only) and serves on.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from tests.support.linewire import LineWire, text_result

EXPECTED_ROOTS_CAPABILITY = {
    "listChanged": True,
    "filesystemBrokering": True,
    "filesystemBrokeringFeatures": ["perPathConsent"],
}
MODERN = "2026-07-28"


class Wire(LineWire):
    """Newline-delimited JSON-RPC on fds 0 and 1, with receive timeouts."""

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 1000
        self.notifications: list[dict[str, Any]] = []

    def recv(self, timeout: float) -> tuple[bytes, dict[str, Any]] | None:
        line = self.recv_line(timeout)
        if line is None:
            return None
        return line, json.loads(line)

    def request(self, method: str, params: Any, timeout: float = 30.0) -> tuple[str, dict[str, Any]]:
        """Send a request; return its raw response line and the parsed response."""
        self.next_id += 1
        request_id = self.next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        deadline = time.monotonic() + timeout
        while True:
            got = self.recv(max(0.0, deadline - time.monotonic()))
            if got is None:
                return "", {"timeout": True}
            line, parsed = got
            if parsed.get("id") == request_id and "method" not in parsed:
                return line.decode(), parsed
            self.other(parsed)

    def other(self, message: dict[str, Any]) -> None:
        """A message that is not the awaited response: record notifications, answer requests."""
        if "method" in message and "id" not in message:
            self.notifications.append(message)
        elif "method" in message:
            if message["method"] == "ping":
                self.reply(message["id"], {})
            else:
                self.reply_error(message["id"], -32601, "not available during the script")

    def wait_notification(self, method: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            for index, note in enumerate(self.notifications):
                if note.get("method") == method:
                    return self.notifications.pop(index)
            got = self.recv(max(0.0, deadline - time.monotonic()))
            if got is None:
                return None
            self.other(got[1])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


Step = tuple[str, str, Callable[[dict[str, Any]], Any]]

# (name, method, params built from the results so far)
SCRIPT: list[Step] = [
    ("roots", "roots/list", lambda r: None),
    (
        "consent",
        "files/consent",
        lambda r: {
            "message": "raw wire test",
            "requestedPaths": ["data", "/etc"],
            "operations": ["read", "write", "delete", "watch"],
        },
    ),
    ("consent_outside", "files/consent", lambda r: {"message": "no", "requestedPaths": ["/etc/passwd"]}),
    ("read_text", "files/read", lambda r: {"path": "data/hello.txt"}),
    ("read_chunk", "files/read", lambda r: {"path": "data/hello.txt", "offset": 0, "length": 2}),
    ("read_b64", "files/read", lambda r: {"path": "data/bin.dat", "encoding": "base64"}),
    ("read_keep", "files/read", lambda r: {"path": "data/hello.txt", "keepLocked": True}),
    ("unlock", "files/unlock", lambda r: {"lockId": r["read_keep"]["result"]["lockId"]}),
    ("unlock_unknown", "files/unlock", lambda r: {"lockId": "lock_" + "0" * 32}),
    ("stat", "files/stat", lambda r: {"path": "data/hello.txt"}),
    ("list", "files/list", lambda r: {"path": "data"}),
    (
        "create_file",
        "files/create",
        lambda r: {"path": "data/new/made.txt", "type": "file", "content": "made", "parents": True},
    ),
    ("create_dir", "files/create", lambda r: {"path": "data/newdir", "type": "directory"}),
    ("create_exists", "files/create", lambda r: {"path": "data/hello.txt", "type": "file"}),
    ("write", "files/write", lambda r: {"path": "data/out.txt", "content": "abc"}),
    ("write_exclusive", "files/write", lambda r: {"path": "data/out.txt", "content": "x", "exclusive": True}),
    ("write_if_match", "files/write", lambda r: {"path": "data/out.txt", "content": "x", "ifMatch": "nope"}),
    (
        "upload_start",
        "files/write",
        lambda r: {"path": "data/up.bin", "content": b64(b"A" * 10), "encoding": "base64", "offset": 0},
    ),
    (
        "upload_bad_offset",
        "files/write",
        lambda r: {"path": "data/up.bin", "content": b64(b"Z"), "encoding": "base64", "offset": 3},
    ),
    (
        "upload_final",
        "files/write",
        lambda r: {
            "path": "data/up.bin",
            "content": b64(b"B" * 5),
            "encoding": "base64",
            "offset": 10,
            "final": True,
        },
    ),
    (
        "write_too_large",
        "files/write",
        lambda r: {
            "path": "data/big.bin",
            "content": b64(b"\0" * (2 * 1024 * 1024 + 1)),
            "encoding": "base64",
        },
    ),
    ("read_directory", "files/read", lambda r: {"path": "data/sub"}),
    ("read_bad_encoding", "files/read", lambda r: {"path": "data/bad.txt"}),
    ("read_outside", "files/read", lambda r: {"path": "/etc/passwd"}),
    ("read_missing", "files/read", lambda r: {"path": "data/missing.txt"}),
    ("read_no_path", "files/read", lambda r: {}),
    ("read_wrong_type", "files/read", lambda r: {"path": "data/hello.txt", "offset": "0"}),
    ("unknown_method", "files/frobnicate", lambda r: {"path": "data/hello.txt"}),
    ("write_locked", "files/write", lambda r: {"path": "data/locked.txt", "content": "x"}),
    ("rename", "files/rename", lambda r: {"path": "data/out.txt", "newPath": "data/renamed.txt"}),
    ("rename_exists", "files/rename", lambda r: {"path": "data/renamed.txt", "newPath": "data/hello.txt"}),
    ("delete", "files/delete", lambda r: {"path": "data/renamed.txt"}),
    ("delete_directory", "files/delete", lambda r: {"path": "data/sub"}),
    ("watch", "files/watch", lambda r: {"path": "data", "recursive": True}),
    ("write_watched", "files/write", lambda r: {"path": "data/watched.txt", "content": "w"}),
    ("watch_second", "files/watch", lambda r: {"path": "data/sub"}),
    ("watch_too_many", "files/watch", lambda r: {"path": "data/new"}),
    ("unwatch", "files/unwatch", lambda r: {"watchId": r["watch"]["result"]["watchId"]}),
    ("unwatch_unknown", "files/unwatch", lambda r: {"watchId": "w_unknown"}),
]


def run_script(wire: Wire) -> dict[str, Any]:
    records: dict[str, Any] = {}
    raw_lines: dict[str, str] = {}
    for name, method, build in SCRIPT:
        line, response = wire.request(method, build(records))
        records[name] = response
        raw_lines[name] = line
        if name == "write_watched":
            note = wire.wait_notification("notifications/files/changed", 10.0)
            records["change"] = note if note is not None else {"timeout": True}
    return {"responses": records, "raw": raw_lines}


def main() -> int:
    out_path = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    wire = Wire()
    report: dict[str, Any] = {}

    def save() -> None:
        with open(out_path, "w") as f:
            json.dump(report, f)

    got = wire.recv(30.0)
    if got is None:
        return 2
    line, init = got
    report["initialize_line"] = line.decode()
    report["initialize"] = init
    if mode in ("--modern-error", "--modern-only"):
        supported = {"supported": [MODERN], "requested": init["params"]["protocolVersion"]}
        wire.reply_error(init["id"], -32022, "Unsupported protocol version", supported)
        save()
        got = wire.recv(30.0)  # the client hangs up, or asks for the 2026-07-28 era
        if mode == "--modern-error" or got is None:
            return 0
        _, discover = got
        report["then"] = discover.get("method")
        save()
        wire.reply(
            discover["id"],
            {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-wire", "version": "0.0.1"},
            },
        )
        return serve(wire, report, save, modern=True)
    roots = init.get("params", {}).get("capabilities", {}).get("roots")
    report["capability_ok"] = roots == EXPECTED_ROOTS_CAPABILITY
    if not report["capability_ok"]:
        wire.reply_error(init["id"], -32602, "no brokering")
        save()
        return 3
    version = MODERN if mode == "--modern-result" else init["params"]["protocolVersion"]
    wire.reply(
        init["id"],
        {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-wire", "version": "0.0.1"},
        },
    )
    save()
    return serve(wire, report, save)


def serve(wire: Wire, report: dict[str, Any], save: Callable[[], None], *, modern: bool = False) -> int:
    """Answer the requests after the handshake until the client hangs up (*modern*: with the
    fields the 2026-07-28 era's results carry)."""
    era = {"resultType": "complete", "cacheScope": "private", "ttlMs": 0} if modern else {}
    while True:
        got = wire.recv(3600.0)
        if got is None:
            return 0
        _, message = got
        method = message.get("method")
        if "id" not in message:
            if method is not None:
                wire.notifications.append(message)
            continue
        if method == "tools/list":
            tools = [
                {"name": "run", "inputSchema": {"type": "object"}},
                {"name": "wait", "inputSchema": {"type": "object"}},
            ]
            wire.reply(message["id"], {"tools": tools, **era})
        elif method == "tools/call" and message["params"]["name"] == "run":
            report["script"] = run_script(wire)
            save()
            wire.reply(message["id"], text_result(report["script"]))
        elif method == "tools/call" and message["params"]["name"] == "wait":
            args = message["params"].get("arguments") or {}
            note = wire.wait_notification(args["method"], float(args.get("timeout", 10.0)))
            wire.reply(message["id"], text_result({"notification": note}))
        elif method == "ping":
            wire.reply(message["id"], {})
        else:
            wire.reply_error(message["id"], -32601, "Method not found")


if __name__ == "__main__":
    sys.exit(main())
