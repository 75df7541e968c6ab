"""Faults on the wire, mid-transfer: a clear error, files intact, no temp files, others unaffected.

* a stdio server SIGKILLed while it reads a file in chunks, and while it
  uploads one in staged chunks;
* an HTTP server SIGKILLed while it uploads;
* an HTTP connection dropped (by a proxy between client and server) while a
  tool uploads through it: the call fails with a clear error, the server and
  every other connection go on.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import ConnectionClosedError, ServerError, connect, open_connection
from jupyter_fsbroker.protocol.server_connection import ServerConnection
from tests.reliability.harness import (
    TIMEOUT,
    UNLIMITED,
    Progress,
    app_http_server,
    sigkill,
    stdio_app,
    temp_files,
)
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.proxy import proxy_to

TRANSFER = str(Path(__file__).resolve().parent / "servers" / "transfer.py")
MiB = 1024 * 1024
OLD = b"old content\n"
#: ``read_all`` of the big file, and ``upload`` over the small one.
READ_ALL = {"path": "data/big.bin", "chunk_size": MiB, "concurrency": 4}
UPLOAD = {"path": "data/target.bin", "size": 64 * MiB, "chunk_size": MiB}


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


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def call_failing(conn: ServerConnection, tool: str, arguments: dict[str, Any]) -> BaseException:
    with pytest.raises((ConnectionClosedError, ServerError, TimeoutError)) as info:
        await conn.call_tool(tool, arguments, timeout=TIMEOUT)
    return info.value


async def fail_mid_transfer(
    broker: Broker, conn: ServerConnection, tool: str, fault: Callable[[], None]
) -> BaseException:
    """Have *conn* call *tool* (:data:`READ_ALL` or :data:`UPLOAD`), and bring *fault* once 8 MiB moved.

    Returns how the call failed.
    """
    progress = Progress(broker, conn, 8 * MiB)
    failures: list[BaseException] = []

    async def transfer() -> None:
        failures.append(await call_failing(conn, tool, READ_ALL if tool == "read_all" else UPLOAD))

    async with anyio.create_task_group() as tg:
        tg.start_soon(transfer)
        await progress.wait()
        fault()
    [failure] = failures
    return failure


async def reads_the_big_file(conn: ServerConnection, data: Path) -> None:
    result = await conn.call_tool("read_all", READ_ALL)
    assert result["structuredContent"]["sha256"] == sha256(data / "big.bin")


async def survivor_works(broker: Broker, data: Path, **target: Any) -> None:
    async with open_connection(broker, "survivor", **target) as survivor:
        await reads_the_big_file(survivor, data)


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["read_all", "upload"])
async def test_a_stdio_server_killed_mid_transfer(broker: Broker, data: Path, tool: str) -> None:
    conn = await connect(broker, "victim", **stdio_app(TRANSFER))
    pid = (await conn.call_tool("info"))["structuredContent"]["pid"]
    failure = await fail_mid_transfer(broker, conn, tool, lambda: sigkill(pid))
    assert isinstance(failure, ConnectionClosedError) and "exited" in str(failure), failure
    with anyio.fail_after(TIMEOUT):
        await conn.wait_closed()
    assert conn.close_reason == "the server process exited"
    assert (data / "target.bin").read_bytes() == OLD
    assert temp_files(data) == []
    assert [lock for lock in broker.locks.held() if lock.owner == conn.connection.id] == []
    await survivor_works(broker, data, **stdio_app(TRANSFER))


@pytest.mark.anyio
async def test_an_http_server_killed_mid_upload(broker: Broker, data: Path) -> None:
    with app_http_server(TRANSFER) as server:
        conn = await connect(broker, "victim", url=server.url, keepalive=None)
        failure = await fail_mid_transfer(broker, conn, "upload", server.kill)
        assert isinstance(failure, ConnectionClosedError) and "victim" in str(failure), failure
        with anyio.fail_after(TIMEOUT):
            await conn.wait_closed()
    assert (data / "target.bin").read_bytes() == OLD
    assert temp_files(data) == []
    await survivor_works(broker, data, **stdio_app(TRANSFER))


@pytest.mark.anyio
async def test_an_http_connection_dropped_mid_call(broker: Broker, data: Path) -> None:
    with app_http_server(TRANSFER) as server:
        url = server.url
        async with proxy_to(url) as (proxy, proxied), open_connection(broker, "direct", url=url) as direct:
            conn = await connect(broker, "proxied", url=proxied, keepalive=None)
            failure = await fail_mid_transfer(broker, conn, "upload", proxy.drop)
            # A clear error that names the call; the target is as it was.
            assert "upload" in str(failure) or "proxied" in str(failure), failure
            assert (data / "target.bin").read_bytes() == OLD
            # The server and the other connection go on.
            await reads_the_big_file(direct, data)
            await conn.aclose()
        # The staged upload went with its connection.
        assert temp_files(data) == []
        assert (data / "target.bin").read_bytes() == OLD
