"""Helpers for the protocol client tests: brokers, test servers, consenters."""

from __future__ import annotations

import concurrent.futures
import os
import queue
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.tempfiles import is_temp_name
from jupyter_fsbroker.protocol.server_connection import ServerConnection
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.handover import HandedOverServer
from tests.support.processes import pid_alive

__all__ = [
    "ALL_OPS",
    "EARLY_REQUEST_SERVER",
    "FS_SERVER",
    "RAW_SERVER",
    "Consents",
    "HeldConsenter",
    "HttpServer",
    "approve_all",
    "http_server",
    "make_broker",
    "make_tree",
    "node_folder",
    "ok",
    "payload",
    "pid_alive",
    "send",
    "stdio_options",
    "temp_files",
]

SERVERS = Path(__file__).resolve().parent
FS_SERVER = str(SERVERS / "fs_server.py")
RAW_SERVER = str(SERVERS / "raw_server.py")
EARLY_REQUEST_SERVER = str(SERVERS / "early_request_server.py")


def approve_all() -> CallbackConsenter:
    """A consenter that approves everything approvable."""
    return CallbackConsenter(lambda request: ConsentDecision.approve_all(request))


def make_tree(folder: Path) -> Path:
    """The files the tests read: text with multi-byte characters, binary, invalid UTF-8, a folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hello.txt").write_text("héllo wörld\n", encoding="utf-8")
    (folder / "bin.dat").write_bytes(bytes(range(256)))
    (folder / "bad.txt").write_bytes(b"ok \xff\xfe not utf-8")
    (folder / "locked.txt").write_text("locked by someone else")
    (folder / "sub").mkdir(exist_ok=True)
    (folder / "sub" / "inner.txt").write_text("inner")
    return folder


def stdio_options(**extra: Any) -> dict[str, Any]:
    """:func:`connect` options that start the mcp-based test server over stdio."""
    return {"command": sys.executable, "args": [FS_SERVER], **extra}


class HttpServer(HandedOverServer):
    """The mcp-based test server under uvicorn on 127.0.0.1, in a subprocess.

    It serves on a socket this process bound and made listen before starting it
    (inherited as a descriptor), so no other process can take the port. Pass the
    ``listener`` of a server killed with ``kill(keep_port=True)`` to start its
    successor on the same port.
    """

    def __init__(self, *args: str, listener: socket.socket | None = None) -> None:
        super().__init__([sys.executable, FS_SERVER], *args, listener=listener)


def http_server(*args: str, listener: socket.socket | None = None) -> HttpServer:
    """:class:`HttpServer`, for a ``with`` block (it stops when the block ends)."""
    return HttpServer(*args, listener=listener)


class Consents:
    """A :class:`CallbackConsenter` policy: approve everything, except paths in ``deny``; record requests."""

    def __init__(self) -> None:
        self.requests: list[ConsentRequest] = []
        self.deny: set[str] = set()

    def decide(self, request: ConsentRequest) -> ConsentDecision:
        self.requests.append(request)
        if any(item.path in self.deny for item in request.items):
            return ConsentDecision.deny()
        return ConsentDecision.approve_all(request)


def node_folder(request: pytest.FixtureRequest) -> str:
    """The running test's name, spelled as a folder name (no brackets, no dashes)."""
    return request.node.name.replace("[", "_").replace("]", "").replace("-", "_")  # type: ignore[no-any-return]


class HeldConsenter:
    """A consenter that keeps each request pending until the test answers it.

    ``await held.next()`` returns ``(request, future)`` for the next prompt;
    resolve the future with a :class:`ConsentDecision` to answer.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[ConsentRequest, concurrent.futures.Future[ConsentDecision]]] = (
            queue.Queue()
        )
        self.asked = threading.Event()

    def request_consent(self, request: ConsentRequest) -> concurrent.futures.Future[ConsentDecision]:
        future: concurrent.futures.Future[ConsentDecision] = concurrent.futures.Future()
        self._queue.put((request, future))
        self.asked.set()
        return future

    async def next(
        self, timeout: float = 10.0
    ) -> tuple[ConsentRequest, concurrent.futures.Future[ConsentDecision]]:
        return await anyio.to_thread.run_sync(lambda: self._queue.get(timeout=timeout))


def payload(result: dict[str, Any]) -> Any:
    """The JSON a test server's tool returned."""
    assert result["isError"] is False, result
    return result["structuredContent"]


def temp_files(folder: Path) -> list[str]:
    """The broker's temporary files (staged uploads, atomic writes) below *folder*."""
    return sorted(
        os.path.join(dirpath, name)
        for dirpath, _, names in os.walk(folder)
        for name in names
        if is_temp_name(name)
    )


async def send(conn: ServerConnection, method: str, params: Any = None) -> dict[str, Any]:
    """Have the test server send one raw request; return ``{"result": ...}`` or ``{"error": ...}``."""
    arguments: dict[str, Any] = {"method": method}
    if params is not None:
        arguments["params"] = params
    return payload(await conn.call_tool("request", arguments, timeout=30))  # type: ignore[no-any-return]


async def ok(conn: ServerConnection, method: str, params: Any = None) -> dict[str, Any]:
    """:func:`send`, asserting that the request succeeded; its result."""
    outcome = await send(conn, method, params)
    assert "result" in outcome, outcome
    return outcome["result"]  # type: ignore[no-any-return]
