"""Large answers are read and encoded in buffers the connection lends again, and lets go of afterwards.

A streamed read moves every chunk through a few MiB of buffers in the
brokering process; made new for each chunk, their pages would be faulted in
again every time. The connection's pool lends the same few buffers to every
chunk of a transfer, gives them back to the allocator once the connection is
idle, and keeps nothing once it is closed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from jupyter_fsbroker.protocol import open_connection
from tests.protocol.servers.harness import SERVERS, make_broker, payload
from tests.support.memory import random_file

MiB = 1024 * 1024
STREAM_SERVER = str(SERVERS / "stream_server.py")


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_a_streamed_read_reuses_a_few_buffers_and_keeps_none_once_idle(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    sha256 = random_file(data / "big.bin", 64 * MiB)
    with make_broker(tmp_path) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        async with open_connection(broker, "stream", command=sys.executable, args=[STREAM_SERVER]) as conn:
            buffers = conn.connection.buffers
            args = {"path": "data/big.bin", "concurrency": 4}
            assert payload(await conn.call_tool("digest", args, timeout=300))["sha256"] == sha256
            # 64 chunks, each read into one buffer and answered in another: a few made, lent again.
            assert 0 < buffers.made <= 16, buffers.made
            await _until(lambda: buffers.kept == 0, "the idle connection letting go of its buffers")
            made = buffers.made
            assert payload(await conn.call_tool("digest", args, timeout=300))["sha256"] == sha256
            assert buffers.made - made <= 16 and buffers.kept > 0
        assert buffers.kept == 0  # closed: nothing kept
