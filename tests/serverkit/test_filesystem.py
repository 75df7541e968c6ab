"""The kit's fsspec filesystem (``files(ctx).fsspec()``) over real stdio and HTTP servers and a real broker.

The server (tests/serverkit/filesystem_server.py) uses the filesystem from worker threads as
pandas, pyarrow or DuckDB would; every answer is compared with the local file the broker serves,
and what crossed the wire with the ``files/read`` requests the client answered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import queue
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision
from jupyter_fsbroker.wire.caps import MAX_CHUNK_BYTES
from tests.protocol.rawclient import RawClient
from tests.protocol.servers.harness import Consents, HeldConsenter, temp_files
from tests.support.kit_clients import TRANSPORTS, data_broker, kit_client, transport_fixtures

pytest.importorskip("fsspec")

pytestmark = pytest.mark.anyio

SERVER = "tests.serverkit.filesystem_server"
WHY = "The filesystem tests read and write these files."
MiB = 1024 * 1024
#: Larger than the wire's 2 MiB chunk and the largest window read ahead (8 MiB).
SIZE = 11 * MiB + 123
#: A second root, which no test grants as a whole (a grant of ``data`` covers all inside it).
OTHER = "other"
#: Where the broker's consenter says no (``Consents.deny``).
DENIED = f"{OTHER}/denied"

stdio, http, client = transport_fixtures(SERVER)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("filesystem") / "data"
    (folder / "sub").mkdir(parents=True)
    denied = folder.parent / OTHER / "denied"
    denied.mkdir(parents=True)
    (denied / "secret.txt").write_text("secret\n", encoding="utf-8")
    (folder / "big.bin").write_bytes(random.Random(22).randbytes(SIZE))
    (folder / "sub" / "a.txt").write_text("alpha\n", encoding="utf-8")
    (folder / "keep.txt").write_text("old\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def broker(data: Path, consents: Consents) -> Iterator[Broker]:
    consents.deny.update([DENIED, *(f"{DENIED}/{name}" for name in ("secret.txt", "new.txt", "keep.txt"))])
    with data_broker(data) as b:
        b.add_root(data.parent / OTHER, name=OTHER)
        yield b


def _local(data: Path) -> bytes:
    return (data / "big.bin").read_bytes()


def _reads(client: RawClient) -> list[dict[str, Any]]:
    return [r.params for r in client.requests("files/read")]


class Gate:
    """Holds each ``files/read`` it is given until *want* of them are in flight at once.

    A client answering them one at a time never has *want* in flight: the gate then opens when
    its wait ends, so that the test fails on its count rather than hanging.
    """

    def __init__(self, client: RawClient, want: int, *, length: int | None = None) -> None:
        self.client, self.want, self.length = client, want, length
        self.full = asyncio.Event()

    async def __call__(self, method: str, params: dict[str, Any]) -> None:
        if method != "files/read" or (self.length is not None and params.get("length") != self.length):
            return
        if self.client.in_flight["files/read"] >= self.want:
            self.full.set()
        try:
            await asyncio.wait_for(self.full.wait(), 20)
        except TimeoutError:
            self.full.set()


async def attempt(client: RawClient, op: str, path: str, target: str | None = None) -> Any:
    """What the server saw doing *op*: base64 bytes, a value, or the error (class, builtins, reason)."""
    answer = await client.tool_json("attempt", {"op": op, "path": path, "target": target})
    return answer["outcome"]


@contextlib.contextmanager
def gated(client: RawClient, want: int, *, length: int | None = None) -> Iterator[None]:
    client.intercept = Gate(client, want, length=length)
    try:
        yield
    finally:
        client.intercept = None


async def test_seek_and_read_give_the_local_bytes(client: RawClient, data: Path) -> None:
    local = _local(data)
    rng = random.Random(7)
    spans = [[0, 10], [SIZE - 5, 100], [3 * MiB - 1, 5 * MiB], [SIZE + 10, 4]]
    spans += [[rng.randrange(SIZE), rng.randrange(1, 3 * MiB)] for _ in range(6)]
    answers = await client.tool_json("reads", {"path": "data/big.bin", "spans": spans}, timeout=120)
    assert [base64.b64decode(a) for a in answers] == [local[o : o + n] for o, n in spans]


@pytest.mark.parametrize(("start", "end"), [(None, None), (5, 4 * MiB + 7), (-100, None), (10, -10)])
async def test_cat_file_with_ranges(
    client: RawClient, data: Path, start: int | None, end: int | None
) -> None:
    answer = await client.tool_json("cat", {"path": "data/big.bin", "start": start, "end": end}, timeout=120)
    assert base64.b64decode(answer) == _local(data)[start:end]


async def test_cat_ranges_reads_every_range_at_once(client: RawClient, data: Path) -> None:
    local = _local(data)
    spans: list[list[Any]] = [["data/big.bin", i * MiB + 17, i * MiB + 17 + 1000 * (i + 1)] for i in range(6)]
    spans += [["data/big.bin", -50, None], ["data/sub/a.txt", 1, None]]
    with gated(client, 6):
        answers = await client.tool_json("ranges", {"spans": spans}, timeout=120)
    assert [base64.b64decode(a) for a in answers[:7]] == [local[s:e] for _, s, e in spans[:7]]
    assert base64.b64decode(answers[7]) == b"lpha\n"
    # Held until six were in flight: a one-at-a-time cat_ranges never gets there.
    assert client.max_in_flight["files/read"] >= 6
    # Exactly the ranges asked for crossed the wire, nothing between them.
    assert sum(r["length"] for r in _reads(client)) == sum(len(base64.b64decode(a)) for a in answers)


async def test_cat_ranges_returns_a_failed_range_as_its_error(client: RawClient) -> None:
    spans = [["data/keep.txt", 0, 3], ["data/gone.txt", 0, 3]]
    kept, gone = await client.tool_json("ranges", {"spans": spans})
    assert base64.b64decode(kept) == b"old"
    assert gone["builtins"] == ["FileNotFoundError"] and gone["error"] == "NotFoundError"


async def test_a_sequential_reader_is_read_ahead(client: RawClient, data: Path) -> None:
    piece = 256 * 1024
    # The windows read ahead are as large as the wire's largest chunk, two of them at once: held
    # until two such are in flight, which a reader fetching each piece when asked never reaches.
    with gated(client, 2, length=MAX_CHUNK_BYTES):
        got = await client.tool_json("sequential", {"path": "data/big.bin", "piece": piece}, timeout=120)
    assert got == {"sha256": hashlib.sha256(_local(data)).hexdigest(), "bytes": SIZE}
    reads = _reads(client)
    assert client.max_in_flight["files/read"] >= 2
    # Far fewer requests than pieces, and each byte of the file asked for once.
    assert len(reads) < SIZE // piece // 3, len(reads)
    assert sum(r["length"] for r in reads) < SIZE + 4 * piece


async def test_threads_sharing_a_handle_and_the_filesystem_read_the_right_bytes(
    client: RawClient, data: Path
) -> None:
    local = _local(data)
    rng = random.Random(11)
    spans = [[rng.randrange(SIZE), rng.randrange(1, 300_000)] for _ in range(48)]
    answers = await client.tool_json(
        "threads", {"path": "data/big.bin", "spans": spans, "workers": 8}, timeout=120
    )
    assert [base64.b64decode(a) for a in answers] == [local[o : o + n] for o, n in spans]


async def test_threads_opening_a_file_at_once_read_its_tail_once(client: RawClient, data: Path) -> None:
    answers = await client.tool_json("tails", {"path": "data/big.bin", "length": 5000, "workers": 6})
    assert {base64.b64decode(a) for a in answers} == {_local(data)[-5000:]}
    assert len(_reads(client)) == 1


async def test_ls_and_info(client: RawClient) -> None:
    answer = await client.tool_json("listing", {"path": "data"})
    entries = {e["name"]: e for e in answer["entries"]}
    assert entries["data/big.bin"] == {"name": "data/big.bin", "size": SIZE, "type": "file"}
    assert entries["data/keep.txt"]["size"] == 4
    assert entries["data/sub"]["type"] == "directory"
    assert answer["info"] == {"name": "data", "size": answer["info"]["size"], "type": "directory"}
    answer = await client.tool_json("listing", {"path": "data/sub/a.txt"})
    assert answer["entries"] == [{"name": "data/sub/a.txt", "size": 6, "type": "file"}]


async def test_a_write_is_committed_on_close(client: RawClient, data: Path) -> None:
    name = f"new_{type(client).__name__}.txt"
    assert await client.tool_json("write", {"path": f"data/{name}", "text": "fresh"}) == "written"
    assert (data / name).read_text(encoding="utf-8") == "fresh"


async def test_an_exception_inside_the_write_leaves_the_file_as_it_was(client: RawClient, data: Path) -> None:
    before = sorted(p.name for p in data.iterdir())
    answer = await client.tool_json("write", {"path": "data/keep.txt", "text": "half", "fail": True})
    assert answer == "failed: failed half way"
    answer = await client.tool_json("write", {"path": "data/never.txt", "text": "half", "fail": True})
    assert answer == "failed: failed half way"
    assert (data / "keep.txt").read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in data.iterdir()) == before
    assert temp_files(data) == []


@pytest.mark.parametrize(
    ("op", "path", "target"),
    [
        ("read", f"{DENIED}/secret.txt", None),
        ("open", f"{DENIED}/secret.txt", None),
        ("write", f"{DENIED}/new.txt", None),
        ("write", f"{DENIED}/secret.txt", None),
        ("ls", DENIED, None),
        ("rm", f"{DENIED}/secret.txt", None),
        ("mv", f"{DENIED}/secret.txt", "data/sub/taken.txt"),
        ("mv", "data/keep.txt", f"{DENIED}/keep.txt"),
    ],
)
async def test_a_refusal_is_a_permission_error_with_the_brokers_reason(
    client: RawClient, consents: Consents, data: Path, op: str, path: str, target: str | None
) -> None:
    answer = await attempt(client, op, path, target)
    assert answer["builtins"] == ["PermissionError"], answer
    assert answer["error"] == "PermissionDeniedError"
    assert answer["reason"] == "not_granted"
    assert "denied" in answer["message"]
    # The user was asked (and said no), and nothing changed: no file, no staged leftovers.
    assert any(item.path.startswith(DENIED) for r in consents.requests for item in r.items)
    denied = data.parent / DENIED
    assert sorted(p.name for p in denied.iterdir()) == ["secret.txt"]
    assert (denied / "secret.txt").read_text(encoding="utf-8") == "secret\n"
    assert (data / "keep.txt").read_text(encoding="utf-8") == "old\n"
    assert temp_files(data.parent) == []


@pytest.mark.parametrize(
    ("op", "path", "target"),
    [
        ("read", "data/missing.txt", None),
        ("open", "data/missing.txt", None),
        ("write", "data/no/such/folder.txt", None),
        ("ls", "data/missing", None),
        ("rm", "data/missing.txt", None),
        ("mv", "data/missing.txt", "data/elsewhere.txt"),
    ],
)
async def test_a_missing_path_is_a_file_not_found_error(
    client: RawClient, data: Path, op: str, path: str, target: str | None
) -> None:
    answer = await attempt(client, op, path, target)
    assert answer["builtins"] == ["FileNotFoundError"], answer
    assert answer["error"] == "NotFoundError"
    assert "missing" in answer["message"] or "no/such" in answer["message"]
    assert not (data / "elsewhere.txt").exists() and not (data / "no").exists()
    assert temp_files(data) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_first_access_asks_the_user_once(transport: str, broker: Broker, data: Path) -> None:
    folder = data.parent / OTHER / f"asked_{transport}"
    folder.mkdir()
    (folder / "first.txt").write_text("first\n", encoding="utf-8")
    path = f"{OTHER}/{folder.name}/first.txt"
    held = HeldConsenter()
    async with kit_client(transport, SERVER, broker, held) as c:
        call = asyncio.ensure_future(attempt(c, "open", path))
        request, answer = await held.next(timeout=30)
        assert request.message == WHY
        assert [item.path for item in request.items] == [path]
        assert not call.done()  # the read waits for the user
        answer.set_result(ConsentDecision.approve_all(request))
        assert base64.b64decode(await call) == b"first\n"
        # Granted once, read again (by another tool call) without a second prompt.
        assert base64.b64decode(await attempt(c, "read", path)) == b"first\n"
        with pytest.raises(queue.Empty):
            await held.next(timeout=0)


async def test_a_blocking_call_on_the_loop_fails_at_once_naming_run_sync(client: RawClient) -> None:
    answer = await client.tool_json("on_the_loop", {"path": "data/keep.txt"})
    assert answer.startswith("LoopThreadError: ")
    assert "await fs.run_sync(" in answer
