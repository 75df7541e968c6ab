"""Newline-delimited JSON on this process's stdin and stdout, for test servers that write the wire by hand.

Such a server (``tests/protocol/servers/raw_server.py``, ``tests/security/servers/*``) imports
nothing but the standard library, so that it can send what no typed server would; this module
keeps to that. A server run as a script makes this checkout importable first::

    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any


class LineWire:
    """Lines on file descriptors 0 (read) and 1 (written), with receive timeouts.

    The end of stdin (the client hung up) ends the process: ``SystemExit(0)``.
    """

    def __init__(self) -> None:
        self.buffer = b""

    def send_bytes(self, data: bytes) -> None:
        """Write *data* as it is, all of it."""
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]

    def send(self, message: dict[str, Any]) -> None:
        """Write *message* as one line of compact JSON."""
        self.send_bytes((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        """Answer the request *request_id* with *result*."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def reply_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        """Answer the request *request_id* with a JSON-RPC error (``data`` only when given)."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def recv_line(self, timeout: float | None = None) -> bytes | None:
        """The next line without its newline; ``None`` if none came within *timeout* seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if select.select([0], [], [], left)[0]:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    raise SystemExit(0)  # the client closed stdin
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def text_result(value: Any) -> dict[str, Any]:
    """A successful ``tools/call`` result whose one text content is *value* as JSON."""
    return {"content": [{"type": "text", "text": json.dumps(value)}], "isError": False}
