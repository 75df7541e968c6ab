"""Faults on the wire, mid-transfer: a clear error, files intact, no temp files, others unaffected.

* a stdio server SIGKILLed while it reads a file in chunks, and while it
  uploads one in staged chunks;
* an HTTP server SIGKILLed while it uploads;
* an HTTP connection dropped (by a proxy between client and server) while a
  tool uploads through it: the call fails with a clear error, the server and
  every other connection go on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.core.progress import Transfer
from jupyter_fsbroker.protocol import ConnectionClosedError, ServerError, connect, open_connection
from jupyter_fsbroker.protocol.client import ServerConnection
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.env import server_env
from tests.support.ports import listening_socket, port_of
from tests.support.proxy import proxy_to

TRANSFER = str(Path(__file__).resolve().parent / "servers" / "transfer.py")
MiB = 1024 * 1024
OLD = b"old content\n"
UNLIMITED = {"ops_per_second": 1e6, "ops_burst": 10**6, "bytes_per_second": 1e12, "bytes_burst": 2**50}
TIMEOUT = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    with open(folder / "big.bin", "wb") as out:
        for _ in range(16):
            out.write(os.urandom(4 * MiB))
    (folder / "target.bin").write_bytes(OLD)
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(**UNLIMITED)) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


def stdio() -> dict[str, Any]:
    return {"command": sys.executable, "args": [TRANSFER], "env": server_env()}


class HttpServer:
    """The transfer server under uvicorn, on a socket bound here and handed over."""

    def __init__(self) -> None:
        self.listener = listening_socket()
        fd = self.listener.fileno()
        self.process = subprocess.Popen(
            [sys.executable, TRANSFER, "--http", "--fd", str(fd)],
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(fd,),
            env={**os.environ, **server_env()},
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().startswith("PORT ")
        self.url = f"http://127.0.0.1:{port_of(self.listener)}/mcp"

    def kill(self) -> None:
        """Gone at once, without a goodbye; its port refuses connections."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.listener.close()


@contextlib.contextmanager
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.kill()
        assert server.process.stdout is not None
        server.process.stdout.close()


class Progress:
    """Set once a connection has moved *bytes* of a file in chunks (the broker's transfer events)."""

    def __init__(self, broker: Broker, conn: ServerConnection, nbytes: int) -> None:
        self.reached = threading.Event()
        self._id = conn.connection.id
        self._bytes = nbytes
        self._unsubscribe = broker.on_transfer(self._on_transfer)

    def _on_transfer(self, transfer: Transfer) -> None:
        if transfer.connection_id == self._id and transfer.done >= self._bytes:
            self.reached.set()

    async def wait(self) -> None:
        assert await anyio.to_thread.run_sync(self.reached.wait, TIMEOUT), "the transfer did not start"
        self._unsubscribe()


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".fsbroker-"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def call_failing(conn: ServerConnection, tool: str, arguments: dict[str, Any]) -> BaseException:
    with pytest.raises((ConnectionClosedError, ServerError, TimeoutError)) as info:
        await conn.call_tool(tool, arguments, timeout=TIMEOUT)
    return info.value


async def survivor_works(broker: Broker, data: Path, **target: Any) -> None:
    async with open_connection(broker, "survivor", **target) as survivor:
        result = await survivor.call_tool(
            "read_all", {"path": "data/big.bin", "chunk_size": MiB, "concurrency": 4}
        )
        assert result["structuredContent"]["sha256"] == sha256(data / "big.bin")


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["read_all", "upload"])
async def test_a_stdio_server_killed_mid_transfer(broker: Broker, data: Path, tool: str) -> None:
    conn = await connect(broker, "victim", **stdio())
    pid = (await conn.call_tool("info"))["structuredContent"]["pid"]
    progress = Progress(broker, conn, 8 * MiB)
    arguments = (
        {"path": "data/big.bin", "chunk_size": MiB, "concurrency": 4}
        if tool == "read_all"
        else {"path": "data/target.bin", "size": 64 * MiB, "chunk_size": MiB}
    )
    async with anyio.create_task_group() as tg:
        failures: list[BaseException] = []

        async def transfer() -> None:
            failures.append(await call_failing(conn, tool, arguments))

        tg.start_soon(transfer)
        await progress.wait()
        os.kill(pid, signal.SIGKILL)
    [failure] = failures
    assert isinstance(failure, ConnectionClosedError) and "exited" in str(failure), failure
    with anyio.fail_after(TIMEOUT):
        await conn.wait_closed()
    assert conn.close_reason == "the server process exited"
    assert (data / "target.bin").read_bytes() == OLD
    assert temp_files(data) == []
    assert [lock for lock in broker.locks.held() if lock.owner == conn.connection.id] == []
    await survivor_works(broker, data, **stdio())


@pytest.mark.anyio
async def test_an_http_server_killed_mid_upload(broker: Broker, data: Path) -> None:
    with http_server() as server:
        conn = await connect(broker, "victim", url=server.url, keepalive=None)
        progress = Progress(broker, conn, 8 * MiB)
        arguments = {"path": "data/target.bin", "size": 64 * MiB, "chunk_size": MiB}
        async with anyio.create_task_group() as tg:
            failures: list[BaseException] = []

            async def transfer() -> None:
                failures.append(await call_failing(conn, "upload", arguments))

            tg.start_soon(transfer)
            await progress.wait()
            server.kill()
        [failure] = failures
        assert isinstance(failure, ConnectionClosedError) and "victim" in str(failure), failure
        with anyio.fail_after(TIMEOUT):
            await conn.wait_closed()
    assert (data / "target.bin").read_bytes() == OLD
    assert temp_files(data) == []
    await survivor_works(broker, data, **stdio())


@pytest.mark.anyio
async def test_an_http_connection_dropped_mid_call(broker: Broker, data: Path) -> None:
    with http_server() as server:
        url = server.url
        async with proxy_to(url) as (proxy, proxied), open_connection(broker, "direct", url=url) as direct:
            conn = await connect(broker, "proxied", url=proxied, keepalive=None)
            progress = Progress(broker, conn, 8 * MiB)
            arguments = {"path": "data/target.bin", "size": 64 * MiB, "chunk_size": MiB}
            async with anyio.create_task_group() as tg:
                failures: list[BaseException] = []

                async def transfer() -> None:
                    failures.append(await call_failing(conn, "upload", arguments))

                tg.start_soon(transfer)
                await progress.wait()
                proxy.drop()
            [failure] = failures
            # A clear error that names the call; the target is as it was.
            assert "upload" in str(failure) or "proxied" in str(failure), failure
            assert (data / "target.bin").read_bytes() == OLD
            # The server and the other connection go on.
            result = await direct.call_tool(
                "read_all", {"path": "data/big.bin", "chunk_size": MiB, "concurrency": 4}
            )
            assert result["structuredContent"]["sha256"] == sha256(data / "big.bin")
            await conn.aclose()
        # The staged upload went with its connection.
        assert temp_files(data) == []
        assert (data / "target.bin").read_bytes() == OLD
