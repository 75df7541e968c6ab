"""Helpers for the protocol client tests: brokers, test servers, consenters."""

from __future__ import annotations

import concurrent.futures
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.ops import is_temp_name
from jupyter_fsbroker.protocol.client import ServerConnection

SERVERS = Path(__file__).resolve().parent
FS_SERVER = str(SERVERS / "fs_server.py")
RAW_SERVER = str(SERVERS / "raw_server.py")
ALL_OPS = ("read", "write", "delete", "watch")


def make_broker(tmp_path: Path, **config: Any) -> Broker:
    """A broker whose lock files and trash live in *tmp_path*, never in the user's folders."""
    return Broker(
        BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"), **config)
    )


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


class HttpServer:
    """The mcp-based test server under uvicorn on 127.0.0.1, in a subprocess."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, FS_SERVER, "--http", *args], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the HTTP test server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        """Make the server go away at once, without any goodbye."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextmanager
def http_server(*args: str) -> Iterator[HttpServer]:
    server = HttpServer(*args)
    try:
        yield server
    finally:
        server.stop()


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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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
