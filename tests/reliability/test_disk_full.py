"""A full disk during a write: a clear error, the old content intact, no temporary file, space given back.

Two ways to run out of room, each under a real server over stdio:

* a 1 MiB tmpfs mounted for the test (where this process may mount one): the
  file system says ENOSPC;
* a brokering process whose file size limit (``RLIMIT_FSIZE``) is 1 MiB: the
  kernel says EFBIG (this works on any machine).

Both are TOO_LARGE (-32106), PROTOCOL.md's error for a request that does not fit,
with ``reason`` ``no_space`` or ``file_too_large`` (and ``maxBytes`` when the
limit is known): a server does not repeat it blindly, and writes being atomic,
nothing was changed. A staged upload whose chunk does not fit is discarded at
once, so that a half upload does not keep the disk full.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import open_connection
from jupyter_fsbroker.protocol.server_connection import ServerConnection
from tests.reliability.brokerproc import BrokerProcess
from tests.reliability.harness import UNLIMITED, stdio_app, structured, temp_files
from tests.support.brokers import ALL_OPS, make_broker

MiB = 1024 * 1024
OLD = "the old content\n" * 4096  # 64 KiB
BIG = "x" * (3 * MiB // 2)  # one request (under 2 MiB), larger than the disk


# -- a small tmpfs ---------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(
            f"cannot mount a 1 MiB tmpfs here ({made.stderr.strip() or made.returncode}); "
            "test_a_file_size_limit_during_writes covers a full disk with RLIMIT_FSIZE instead"
        )
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@pytest.fixture
def broker(tmp_path: Path, small_disk: Path) -> Iterator[Broker]:
    (small_disk / "target.txt").write_text(OLD)
    with make_broker(tmp_path, limits=Limits(**UNLIMITED)) as b:
        b.add_root(small_disk, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


@pytest.fixture
async def server(broker: Broker) -> AsyncIterator[ServerConnection]:
    async with open_connection(broker, "writer", **stdio_app()) as conn:
        yield conn


async def request(conn: ServerConnection, method: str, **params: Any) -> dict[str, Any]:
    return structured(await conn.call_tool("request", {"method": method, "params": params}))  # type: ignore[no-any-return]


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


@pytest.mark.anyio
async def test_a_full_disk_during_writes(broker: Broker, server: ServerConnection, small_disk: Path) -> None:
    free = free_bytes(small_disk)
    assert free < len(BIG)

    whole = await request(server, "files/write", path="data/target.txt", content=BIG)
    assert whole["error"]["name"] == "TOO_LARGE" and whole["error"]["code"] == -32106
    assert whole["error"]["reason"] == "no_space"
    assert "full" in whole["error"]["message"]
    created = await request(server, "files/create", path="data/new.txt", type="file", content=BIG)
    assert created["error"]["reason"] == "no_space"

    staged = structured(
        await server.call_tool(
            "upload", {"path": "data/target.txt", "size": 3 * MiB, "chunk_size": 256 * 1024}
        )
    )
    assert staged["error"]["name"] == "TOO_LARGE" and staged["error"]["reason"] == "no_space"
    # The upload was discarded: its next chunk is told to start over.
    chunk = await request(server, "files/write", path="data/target.txt", content="more", offset=MiB)
    assert chunk["error"]["data"]["expectedOffset"] == 0

    assert (small_disk / "target.txt").read_text() == OLD
    assert not (small_disk / "new.txt").exists()
    assert temp_files(small_disk) == []
    assert broker.locks.held() == ()
    assert free_bytes(small_disk) == free  # every byte of the failed writes was given back
    # There is room for what fits, and the server is served as before.
    fits = await request(server, "files/write", path="data/target.txt", content="new and small")
    assert fits["result"]["size"] == len("new and small")
    assert (small_disk / "target.txt").read_text() == "new and small"


# -- a file size limit -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_file_size_limit_during_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "target.txt").write_text(OLD)
    limited = BrokerProcess(
        tmp_path, {"data": data}, allow=["data:read,write"], label="limited", file_size_limit=MiB
    )
    try:
        limited.connect("writer")
        whole = limited.call(
            "writer", "request", method="files/write", params={"path": "data/target.txt", "content": BIG}
        )
        assert whole["error"]["name"] == "TOO_LARGE"
        assert whole["error"]["reason"] == "file_too_large"
        assert whole["error"]["data"]["maxBytes"] == MiB
        staged = limited.call("writer", "upload", path="data/target.txt", size=3 * MiB, chunk_size=256 * 1024)
        assert staged["error"]["reason"] == "file_too_large"
        assert (data / "target.txt").read_text() == OLD
        assert temp_files(data) == []
        assert limited.stats()["locks"] == []
        fits = limited.call(
            "writer", "request", method="files/write", params={"path": "data/target.txt", "content": "small"}
        )
        assert fits["result"]["size"] == len("small")
    finally:
        limited.exit()
    assert (data / "target.txt").read_text() == "small"
