"""A server built with the helper that streamed a file leaves its memory as its author's code expects.

The helper moves chunks of a few MiB through the server's process, which may
be its author's application; nothing it does may change how that process's
allocator treats the author's own memory afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jupyter_fsbroker.protocol import open_connection
from tests.protocol.servers.harness import SERVERS, make_broker, payload
from tests.support.memory import KEPT_AT_MOST_KIB, random_file

MiB = 1024 * 1024
STREAM_SERVER = str(SERVERS / "stream_server.py")


@pytest.mark.anyio
async def test_memory_a_server_frees_after_streaming_a_file_goes_back_to_the_system(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    sha256 = random_file(data / "big.bin", 256 * MiB)
    with make_broker(tmp_path) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        async with open_connection(broker, "stream", command=sys.executable, args=[STREAM_SERVER]) as conn:
            read = payload(await conn.call_tool("digest", {"path": "data/big.bin"}, timeout=300))
            assert read == {"sha256": sha256, "bytes": 256 * MiB}
            # The server author's own code, after the transfer.
            rss = payload(await conn.call_tool("churn", {}))
    assert rss["full"] - rss["before"] > 700 * 1024, rss  # the buffers were really resident
    kept = rss["after"] - rss["before"]
    assert kept <= KEPT_AT_MOST_KIB, f"the server's RSS stayed {kept // 1024} MiB above where it was: {rss}"
