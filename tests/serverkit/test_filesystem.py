"""The kit's fsspec filesystem (``files(ctx).fsspec()``) over a real stdio server and a real broker.

The server (tests/serverkit/filesystem_server.py) uses the filesystem from worker threads as
pandas or pyarrow would; every answer is compared with the local file the broker serves.
"""

from __future__ import annotations

import base64
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter
from tests.protocol.rawclient import StdioClient, python_argv
from tests.protocol.servers.harness import Consents
from tests.support.brokers import make_broker
from tests.support.env import server_env

pytest.importorskip("fsspec")

pytestmark = pytest.mark.anyio

SERVER = "tests.serverkit.filesystem_server"
MiB = 1024 * 1024
#: Larger than the wire's 2 MiB chunk and the file's 8 MiB read-ahead block.
SIZE = 11 * MiB + 123


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("filesystem") / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "big.bin").write_bytes(random.Random(22).randbytes(SIZE))
    (folder / "sub" / "a.txt").write_text("alpha\n", encoding="utf-8")
    (folder / "keep.txt").write_text("old\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def broker(data: Path) -> Iterator[Broker]:
    with make_broker(data.parent) as b:
        b.add_root(data, name="data")
        yield b


@pytest.fixture(scope="module")
async def client(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    consenter = CallbackConsenter(consents.decide)
    argv = python_argv("-m", SERVER)
    async with await StdioClient.start(argv, broker, env=server_env(), consenter=consenter) as c:
        yield c


async def test_seek_and_read_give_the_local_bytes(client: StdioClient, data: Path) -> None:
    local = (data / "big.bin").read_bytes()
    rng = random.Random(7)
    spans = [[0, 10], [SIZE - 5, 100], [3 * MiB - 1, 5 * MiB], [SIZE + 10, 4]]
    spans += [[rng.randrange(SIZE), rng.randrange(1, 3 * MiB)] for _ in range(6)]
    answers = await client.tool_json("reads", {"path": "data/big.bin", "spans": spans}, timeout=120)
    assert [base64.b64decode(a) for a in answers] == [local[o : o + n] for o, n in spans]


@pytest.mark.parametrize(("start", "end"), [(None, None), (5, 4 * MiB + 7), (-100, None), (10, -10)])
async def test_cat_file_with_ranges(
    client: StdioClient, data: Path, start: int | None, end: int | None
) -> None:
    local = (data / "big.bin").read_bytes()
    answer = await client.tool_json("cat", {"path": "data/big.bin", "start": start, "end": end}, timeout=120)
    assert base64.b64decode(answer) == local[start:end]


async def test_ls_and_info(client: StdioClient) -> None:
    answer = await client.tool_json("listing", {"path": "data"})
    assert sorted(answer["entries"], key=lambda e: e["name"]) == [
        {"name": "data/big.bin", "size": SIZE, "type": "file"},
        {"name": "data/keep.txt", "size": 4, "type": "file"},
        {"name": "data/sub", "size": answer["entries"][2]["size"], "type": "directory"},
    ]
    assert answer["info"] == {"name": "data", "size": answer["info"]["size"], "type": "directory"}
    answer = await client.tool_json("listing", {"path": "data/sub/a.txt"})
    assert answer["entries"] == [{"name": "data/sub/a.txt", "size": 6, "type": "file"}]


async def test_a_write_is_committed_on_close(client: StdioClient, data: Path) -> None:
    assert await client.tool_json("write", {"path": "data/new.txt", "text": "fresh"}) == "written"
    assert (data / "new.txt").read_text(encoding="utf-8") == "fresh"


async def test_an_exception_inside_the_write_leaves_the_file_as_it_was(
    client: StdioClient, data: Path
) -> None:
    before = sorted(p.name for p in data.iterdir())
    answer = await client.tool_json("write", {"path": "data/keep.txt", "text": "half", "fail": True})
    assert answer == "failed: failed half way"
    answer = await client.tool_json("write", {"path": "data/never.txt", "text": "half", "fail": True})
    assert answer == "failed: failed half way"
    assert (data / "keep.txt").read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in data.iterdir()) == before


async def test_a_blocking_call_on_the_loop_fails_at_once_naming_run_sync(client: StdioClient) -> None:
    answer = await client.tool_json("on_the_loop", {"path": "data/keep.txt"})
    assert answer.startswith("LoopThreadError: ")
    assert "await fs.run_sync(" in answer
