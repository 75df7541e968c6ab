"""The server-side helper (``jupyter_fsbroker.serverkit``) end to end against the real core.

A server built with the helper (``test_server_helper_app.py``) runs as a stdio
subprocess; ``rawclient`` plays the notebook: a hand-written JSON-RPC client
whose ``files/*`` answers come from the core broker. One server process serves
most tests (each in its own folder); the capability checks start their own.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import hashlib
import os
import random
import time
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker import serverkit as helper
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter
from jupyter_fsbroker.core.errors import FileLocked as CoreFileLocked
from jupyter_fsbroker.core.errors import RateLimited as CoreRateLimited
from jupyter_fsbroker.core.errors import TooLarge as CoreTooLarge
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.serverkit.answers import roots_from_result
from jupyter_fsbroker.serverkit.mcp_internals import connection_state, lowlevel_server
from jupyter_fsbroker.serverkit.peers import ConnectionFiles
from tests.protocol.rawclient import Answered, RpcError, StdioClient, python_argv
from tests.protocol.servers.harness import Consents, node_folder
from tests.support.brokers import make_broker
from tests.support.env import server_env
from tests.support.servers import SEP_MESSAGE

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
APP = str(HERE / "test_server_helper_app.py")
MiB = 1024 * 1024
ALL_OPS = ("read", "write", "delete", "watch")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("helper")
    (base / "data").mkdir()
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("not shared\n")
    return base


@pytest.fixture(scope="module")
def broker(workdir: Path) -> Iterator[Broker]:
    with make_broker(workdir, limits=Limits(lock_wait=0.3)) as b:
        b.add_root(workdir / "data", name="data")
        yield b


@pytest.fixture(scope="module")
async def client(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    argv = python_argv(APP, "--require")
    consenter = CallbackConsenter(consents.decide)
    async with await StdioClient.start(argv, broker, env=server_env(), consenter=consenter) as c:
        yield c


@pytest.fixture
def folder(request: pytest.FixtureRequest, workdir: Path, broker: Broker, client: StdioClient) -> Path:
    """A fresh folder ``data/<test>`` with every operation pre-approved."""
    name = node_folder(request)
    path = workdir / "data" / name
    path.mkdir()
    broker.allow(f"data/{name}", ops=ALL_OPS)
    client.reset()
    return path


def rel(path: Path, workdir: Path) -> str:
    return path.relative_to(workdir).as_posix()


async def call(client: StdioClient, op: str, timeout: float = 60, **kwargs: Any) -> dict[str, Any]:
    """Run ``OPS[op]`` in the server; return ``{"ok": ...}`` or ``{"error": ...}``."""
    args: dict[str, Any] = {"op": op, "args": kwargs.pop("args", {})}
    args.update(kwargs)
    result: dict[str, Any] = await client.tool_json("call", args, timeout=timeout)
    return result


async def ok(client: StdioClient, op: str, **kwargs: Any) -> Any:
    result = await call(client, op, **kwargs)
    assert "ok" in result, result
    return result["ok"]


async def err(client: StdioClient, op: str, **kwargs: Any) -> dict[str, Any]:
    result = await call(client, op, **kwargs)
    assert "error" in result, result
    error: dict[str, Any] = result["error"]
    return error


# -- capability ----------------------------------------------------------------------------------


async def test_initialize_is_refused_without_the_flag_when_required(broker: Broker) -> None:
    c = await StdioClient.start(
        python_argv(APP, "--require"), broker, env=server_env(), brokering=False, initialize=False
    )
    try:
        with pytest.raises(RpcError) as info:
            await c.initialize()
        assert info.value.code == -32603
        assert info.value.message == SEP_MESSAGE
    finally:
        await c.close()


async def test_tool_fails_early_without_the_flag(broker: Broker) -> None:
    c = await StdioClient.start(python_argv(APP), broker, env=server_env(), brokering=False)
    try:
        assert await c.tool_json("brokers") is False
        with pytest.raises(RpcError) as info:
            await c.call_tool("need_files")
        assert (info.value.code, info.value.message) == (-32603, SEP_MESSAGE)
        assert c.answered == []  # nothing was asked of the client
    finally:
        await c.close()


async def test_the_flag_is_read_from_the_raw_initialize_params(client: StdioClient) -> None:
    assert await client.tool_json("brokers") is True
    assert await client.tool_json("need_files") == "ok"


# -- reading -------------------------------------------------------------------------------------


async def test_read_text_and_bytes(client: StdioClient, folder: Path, workdir: Path) -> None:
    text = "zürich,münchen\n" * 1000 + "ünïcödé 🎉\n"
    (folder / "a.csv").write_text(text, encoding="utf-8")
    path = rel(folder / "a.csv", workdir)
    assert await ok(client, "read_text", args={"path": path}) == text
    latin = "café\n" * 10
    (folder / "l.txt").write_bytes(latin.encode("latin-1"))
    assert await ok(
        client, "read_text", args={"path": rel(folder / "l.txt", workdir), "encoding": "latin-1"}
    ) == (latin)
    blob = os.urandom(100_000)
    (folder / "b.bin").write_bytes(blob)
    got = await ok(client, "read_bytes", args={"path": rel(folder / "b.bin", workdir)})
    assert got == {"size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
    (folder / "empty").write_bytes(b"")
    assert await ok(client, "read_text", args={"path": rel(folder / "empty", workdir)}) == ""


async def _slow_reads(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "files/read":
        await asyncio.sleep(0.01)  # latency, so requests overlap
    return None


async def test_iter_chunks_binary_in_order_with_bounded_concurrency(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    blob = os.urandom(3 * MiB + 5)
    (folder / "big.bin").write_bytes(blob)
    client.intercept = _slow_reads
    got = await ok(
        client,
        "iter_chunks",
        args={"path": rel(folder / "big.bin", workdir), "chunk_size": 256 * 1024, "concurrency": 3},
    )
    assert got["sha256"] == hashlib.sha256(blob).hexdigest()
    assert got["sizes"] == [256 * 1024] * 12 + [5]
    assert got["requests"] == 13  # no read wasted
    assert 2 <= client.max_in_flight["files/read"] <= 3
    offsets = sorted(a.params["offset"] for a in client.requests("files/read"))
    assert offsets == [i * 256 * 1024 for i in range(13)]


async def test_iter_chunks_sequential_when_concurrency_is_one(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    blob = os.urandom(MiB)
    (folder / "s.bin").write_bytes(blob)
    client.intercept = _slow_reads
    got = await ok(
        client,
        "iter_chunks",
        args={"path": rel(folder / "s.bin", workdir), "chunk_size": 100_000, "concurrency": 1},
    )
    assert got["sha256"] == hashlib.sha256(blob).hexdigest()
    assert client.max_in_flight["files/read"] == 1


def _mixed_text(chars: int, seed: int) -> str:
    """Text of 1-, 2-, 3- and 4-byte UTF-8 characters, so chunk ends fall inside characters."""
    rng = random.Random(seed)
    alphabet = "abc,\n" + "éüß" + "€中文" + "🎉😀"
    return "".join(rng.choice(alphabet) for _ in range(chars))


async def test_iter_chunks_text_follows_character_boundaries(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    text = _mixed_text(120_000, seed=1)
    (folder / "t.txt").write_text(text, encoding="utf-8")
    client.intercept = _slow_reads
    got = await ok(
        client,
        "iter_chunks",
        args={
            "path": rel(folder / "t.txt", workdir),
            "chunk_size": 16 * 1024,
            "concurrency": 4,
            "encoding": "utf-8",
        },
    )
    assert got["text"] == text
    reads = client.requests("files/read")
    assert client.max_in_flight["files/read"] <= 4
    # Reads ahead that start inside a character are refused by the client; once
    # one boundary falls inside a character the rest travels as bytes, so at
    # most one round of reads ahead is wasted.
    assert sum(1 for r in reads if r.error is not None) <= 4
    assert {r.error["data"]["error"] for r in reads if r.error is not None} <= {"ENCODING_ERROR"}
    assert any(r.params["encoding"] == "base64" for r in reads)
    assert len(got["sizes"]) > 1


async def test_stateful_codecs_are_decoded_across_chunks(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    text = _mixed_text(50_000, seed=2)
    (folder / "be.txt").write_bytes(codecs.BOM_UTF16_BE + text.encode("utf-16-be"))
    got = await ok(
        client,
        "read_text",
        args={"path": rel(folder / "be.txt", workdir), "encoding": "utf-16", "chunk_size": 10_001},
    )
    assert got == text
    assert {r.params["encoding"] for r in client.requests("files/read")} == {"base64"}
    (folder / "bad.txt").write_bytes(b"ok" * 40_000 + b"\xff")
    error = await err(
        client, "read_text", args={"path": rel(folder / "bad.txt", workdir), "chunk_size": 8192}
    )
    assert (error["class"], error["reason"]) == ("ContentEncodingError", "invalid_content")


async def test_iter_chunks_ascii_text_wastes_no_read(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    text = "id,value\n" + "".join(f"{i},{i * 3}\n" for i in range(60_000))
    (folder / "a.csv").write_text(text)
    got = await ok(
        client,
        "iter_chunks",
        args={"path": rel(folder / "a.csv", workdir), "chunk_size": 64 * 1024, "encoding": "utf-8"},
    )
    assert got["text"] == text
    assert got["requests"] == -(-len(text) // (64 * 1024))


async def test_iter_chunks_stops_early_and_cancels_reads(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    (folder / "big.bin").write_bytes(os.urandom(2 * MiB))
    got = await ok(
        client,
        "iter_chunks",
        args={"path": rel(folder / "big.bin", workdir), "chunk_size": 128 * 1024, "stop_after": 1},
    )
    assert got["sizes"] == [128 * 1024]
    assert got["requests"] <= 1 + 4


async def test_iter_chunks_detects_a_file_changing_during_the_read(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    target = folder / "moving.bin"
    target.write_bytes(os.urandom(MiB))

    async def grow(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "files/read" and params.get("offset", 0) > 0:
            with target.open("ab") as f:
                f.write(b"more")
        return None

    client.intercept = grow
    error = await err(client, "iter_chunks", args={"path": rel(target, workdir), "chunk_size": 256 * 1024})
    assert (error["class"], error["reason"]) == ("PreconditionFailedError", "changed_during_read")


async def test_read_with_max_size(client: StdioClient, folder: Path, workdir: Path) -> None:
    (folder / "m.bin").write_bytes(bytes(5000))
    error = await err(client, "read_bytes", args={"path": rel(folder / "m.bin", workdir), "max_size": 4000})
    assert error["class"] == "TooLargeError"


# -- writing -------------------------------------------------------------------------------------


def _writes(client: StdioClient) -> list[Answered]:
    return client.requests("files/write")


async def test_small_write_is_one_request(client: StdioClient, folder: Path, workdir: Path) -> None:
    path = rel(folder / "note.md", workdir)
    result = await ok(client, "write_text", args={"path": path, "text": "# Hello\n"})
    assert result["bytes_written"] == 8 and result["chunks"] == 1
    assert (folder / "note.md").read_text() == "# Hello\n"
    [write] = _writes(client)
    assert write.params["content"] == "# Hello\n" and "offset" not in write.params
    blob = os.urandom(1000)
    await ok(
        client,
        "write_bytes",
        args={"path": rel(folder / "b.bin", workdir), "b64": base64.b64encode(blob).decode()},
    )
    assert (folder / "b.bin").read_bytes() == blob


@pytest.mark.parametrize("stream", [False, True])
async def test_chunked_write_of_5_mib_commits_exactly(
    client: StdioClient, folder: Path, workdir: Path, stream: bool
) -> None:
    target = folder / "big.bin"
    target.write_bytes(b"old content")
    size = 5 * MiB + 123
    seen_before_commit: list[bytes] = []

    async def watch_commit(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "files/write" and params.get("final"):
            seen_before_commit.append(target.read_bytes())
        return None

    client.intercept = watch_commit
    result = await ok(
        client,
        "write_pattern",
        args={"path": rel(target, workdir), "size": size, "seed": 7, "stream": stream},
    )
    data = random.Random(7).randbytes(size)
    assert target.read_bytes() == data
    assert result["bytes_written"] == size and result["size"] == size and result["chunks"] == 6
    assert seen_before_commit == [b"old content"]  # untouched until the final chunk
    writes = _writes(client)
    assert [w.params["offset"] for w in writes] == [i * MiB for i in range(6)]
    assert [w.params["final"] for w in writes] == [False] * 5 + [True]
    assert all(len(base64.b64decode(w.params["content"])) <= MiB for w in writes)
    assert not [name for name in os.listdir(folder) if name != "big.bin"]  # no temporary file left


async def test_large_text_write_is_staged(client: StdioClient, folder: Path, workdir: Path) -> None:
    unit = "ünïcödé, 中文 🎉\n"
    result = await ok(
        client,
        "write_text_repeat",
        args={
            "path": rel(folder / "t.txt", workdir),
            "unit": unit,
            "times": 60_000,
            "chunk_size": 256 * 1024,
        },
    )
    assert (folder / "t.txt").read_text(encoding="utf-8") == unit * 60_000
    assert result["chunks"] == len(_writes(client)) > 1


async def test_writes_adapt_to_a_smaller_client_limit(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    limit = 256 * 1024

    async def small_limit(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "files/write" and len(base64.b64decode(params["content"])) > limit:
            raise CoreTooLarge("too large", reason="request_too_large", maxBytes=limit)
        return None

    client.intercept = small_limit
    size = MiB - 10
    await ok(client, "write_pattern", args={"path": rel(folder / "w.bin", workdir), "size": size, "seed": 3})
    assert (folder / "w.bin").read_bytes() == random.Random(3).randbytes(size)
    accepted = [w for w in _writes(client) if w.error is None]
    assert len(accepted) == 4 and all("offset" in w.params for w in accepted)


# -- directories and metadata ----------------------------------------------------------------------


async def test_list_follows_the_cursor(client: StdioClient, folder: Path, workdir: Path) -> None:
    for i in range(25):
        (folder / f"f{i:02}.txt").write_text(str(i))
    (folder / ".hidden").write_text("h")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.txt").write_text("d")
    path = rel(folder, workdir)
    entries = await ok(client, "list_dir", args={"path": path, "page_size": 10})
    assert [e["name"] for e in entries] == [f"f{i:02}.txt" for i in range(25)] + ["sub"]
    assert len(client.requests("files/list")) == 3
    assert entries[0]["path"] == f"{path}/f00.txt" and entries[0]["type"] == "file"
    every = await ok(client, "list_dir", args={"path": path, "recursive": True, "include_hidden": True})
    assert {e["name"] for e in every} >= {".hidden", "deep.txt", "sub"}


async def test_stat_create_rename_delete(client: StdioClient, folder: Path, workdir: Path) -> None:
    base = rel(folder, workdir)
    made = await ok(client, "create", args={"path": f"{base}/x/y", "type": "directory", "parents": True})
    assert made == {"path": f"{base}/x/y", "type": "directory", "lock_id": None}
    await ok(client, "create", args={"path": f"{base}/x/y/f.txt", "content": "hi"})
    stat = await ok(client, "stat", args={"path": f"{base}/x/y/f.txt"})
    assert (stat["type"], stat["size"], stat["locked"]) == ("file", 2, False)
    assert stat["etag"] and stat["mime_type"] == "text/plain"
    assert await ok(client, "exists", args={"path": f"{base}/x/y/f.txt"}) is True
    assert await ok(client, "exists", args={"path": f"{base}/nope"}) is False
    moved = await ok(client, "rename", args={"path": f"{base}/x/y/f.txt", "new_path": f"{base}/g.txt"})
    assert moved == f"{base}/g.txt" and (folder / "g.txt").read_text() == "hi"
    gone = await ok(client, "delete", args={"path": f"{base}/g.txt"})
    assert gone == {"path": f"{base}/g.txt", "trashed": True} and not (folder / "g.txt").exists()
    await ok(client, "delete", args={"path": f"{base}/x", "recursive": True})
    assert not (folder / "x").exists()


# -- errors and retries ----------------------------------------------------------------------------


async def test_typed_exceptions(client: StdioClient, folder: Path, workdir: Path) -> None:
    base = rel(folder, workdir)
    (folder / "f.txt").write_text("x")
    (folder / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    cases: list[tuple[str, dict[str, Any], str, int, str | None]] = [
        ("read_text", {"path": f"{base}/missing.txt"}, "NotFoundError", -32102, "NOT_FOUND"),
        (
            "read_text",
            {"path": str(workdir / "outside" / "secret.txt")},
            "PermissionDeniedError",
            -32101,
            None,
        ),
        ("read_text", {"path": f"{base}/../../outside/secret.txt"}, "PermissionDeniedError", -32101, None),
        ("read_text", {"path": base}, "WrongTypeError", -32105, "WRONG_TYPE"),
        ("create", {"path": f"{base}/f.txt"}, "AlreadyExistsError", -32103, "ALREADY_EXISTS"),
        (
            "write_text",
            {"path": f"{base}/f.txt", "text": "y", "if_match": "nope"},
            "PreconditionFailedError",
            -32104,
            None,
        ),
        ("read_text", {"path": f"{base}/bad.txt"}, "ContentEncodingError", -32108, "ENCODING_ERROR"),
        ("write_too_big", {"path": f"{base}/big"}, "TooLargeError", -32106, "TOO_LARGE"),
        (
            "raw",
            {"method": "files/read", "params": {"path": f"{base}/f.txt", "offset": -1}},
            "InvalidParamsError",
            -32602,
            None,
        ),
        ("raw", {"method": "files/frobnicate", "params": {}}, "MethodNotFoundError", -32601, None),
        (
            "raw",
            {"method": "files/unlock", "params": {"lockId": "lock_" + "0" * 32}},
            "NotFoundError",
            -32102,
            None,
        ),
    ]
    for op, args, cls, code, name in cases:
        error = await err(client, op, args=args)
        assert (error["class"], error["code"]) == (cls, code), (op, args, error)
        if name is not None:
            assert error["name"] == name
    outside = await err(client, "read_text", args={"path": str(workdir / "outside" / "secret.txt")})
    assert outside["reason"] == "outside_roots" and outside["name"] == "PERMISSION_DENIED"
    assert str(workdir) not in outside["text"]  # messages never carry absolute paths outside the roots


async def test_an_uncaught_files_error_is_the_tools_error_result(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    result = await client.call_tool("uncaught", {"path": rel(folder / "nope.txt", workdir)})
    assert result["isError"] is True
    # mcp reports an anticipated ToolError as "Error executing tool <name>: <str(exc)>".
    assert result["content"][0]["text"].endswith(
        f"NOT_FOUND: {rel(folder / 'nope.txt', workdir)} does not exist"
    )


async def test_file_locked_is_retried_then_succeeds(client: StdioClient, folder: Path, workdir: Path) -> None:
    (folder / "f.txt").write_text("content")
    refusals = 0

    async def locked_twice(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal refusals
        if method == "files/read" and refusals < 2:
            refusals += 1
            raise CoreFileLocked("locked", path=params["path"], lockedBy="other-server", retryAfterMs=20)
        return None

    client.intercept = locked_twice
    started = time.monotonic()
    assert await ok(client, "read_text", args={"path": rel(folder / "f.txt", workdir)}) == "content"
    elapsed = time.monotonic() - started
    reads = client.requests("files/read")
    assert [r.error["code"] if r.error else None for r in reads] == [-32100, -32100, None]
    assert elapsed >= 0.04  # retryAfterMs honoured: 2 x 20 ms


async def test_rate_limited_gives_up_after_three_retries(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    (folder / "f.txt").write_text("content")

    async def always_limited(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "files/stat":
            raise CoreRateLimited("slow down", reason="ops_rate", retryAfterMs=5)
        return None

    client.intercept = always_limited
    error = await err(client, "stat", args={"path": rel(folder / "f.txt", workdir)})
    assert (error["class"], error["code"], error["reason"]) == ("RateLimitedError", -32107, "ops_rate")
    assert error["data"]["retryAfterMs"] == 5
    assert len(client.requests("files/stat")) == 4


# -- consent ---------------------------------------------------------------------------------------


async def test_consent_result(client: StdioClient, workdir: Path, consents: Consents) -> None:
    (workdir / "data" / "consent_me").mkdir()
    answer = await ok(
        client,
        "consent",
        args={
            "message": "Profile the sales data",
            "paths": ["data/consent_me", str(workdir / "outside")],
            "operations": ["read"],
        },
    )
    assert answer == {
        "granted": True,
        "approved_paths": ["data/consent_me"],
        "operations": ["read"],
        "expires_at": None,
    }
    assert consents.requests[-1].message == "Profile the sales data"
    consents.deny.add("data/consent_me/no")
    refused = await ok(
        client, "consent", args={"message": "m", "paths": ["data/consent_me/no"], "operations": None}
    )
    assert refused == {"granted": False, "approved_paths": [], "operations": [], "expires_at": None}


async def test_not_granted_asks_consent_once_then_retries(
    client: StdioClient, workdir: Path, consents: Consents
) -> None:
    folder = workdir / "data" / "ungranted"
    folder.mkdir()
    (folder / "f.txt").write_text("hello")
    client.reset()
    before = len(consents.requests)
    text = await ok(
        client,
        "read_text",
        args={"path": "data/ungranted/f.txt"},
        consent_message="Read f.txt",
        consent_operations=["read", "write"],
    )
    assert text == "hello"
    [asked] = consents.requests[before:]
    assert asked.message == "Read f.txt" and asked.operations == ("read", "write")
    assert [a.method for a in client.answered] == ["files/read", "files/consent", "files/read"]
    # The grant covers writes too: no second prompt.
    await ok(client, "write_text", args={"path": "data/ungranted/f.txt", "text": "bye"}, consent_message="x")
    assert len(consents.requests) == before + 1

    consents.deny.add("data/ungranted/denied.txt")
    (folder / "denied.txt").write_text("no")
    error = await err(
        client, "read_text", args={"path": "data/ungranted/denied.txt"}, consent_message="Read it"
    )
    assert (error["class"], error["reason"]) == ("PermissionDeniedError", "not_granted")


# -- locks -----------------------------------------------------------------------------------------


async def test_lock_is_released_when_the_block_raises(
    client: StdioClient, folder: Path, workdir: Path, broker: Broker
) -> None:
    (folder / "c.txt").write_text("1")
    seen = await ok(client, "lock_and_fail", args={"path": rel(folder / "c.txt", workdir)})
    assert seen["raised"] and seen["locked"] and seen["lock_id"].startswith("lock_")
    [unlock] = client.requests("files/unlock")
    assert unlock.params == {"lockId": seen["lock_id"]} and unlock.result == {"unlocked": True}
    assert [info for info in broker.locks.held() if info.owner == client.conn.id] == []
    [acquire] = [r for r in client.requests("files/read") if r.params.get("keepLocked")]
    assert acquire.params["length"] == 0


async def test_lock_waits_for_another_connection(
    client: StdioClient, folder: Path, workdir: Path, broker: Broker
) -> None:
    (folder / "c.txt").write_text("1")
    path = rel(folder / "c.txt", workdir)
    other = broker.connect("other-server")
    try:
        held = other.handle("files/read", {"path": path, "keepLocked": True, "length": 0})
        task = asyncio.ensure_future(ok(client, "lock_hold", args={"path": path, "wait": 20}))
        await client.wait_answered("files/read", lambda a: a.error is not None)
        other.handle("files/unlock", {"lockId": held["lockId"]})
        result = await asyncio.wait_for(task, 30)
        assert result["locked"] is True
        assert client.requests("files/read")[0].error["data"]["lockedBy"] == "other-server"
    finally:
        other.close()


async def test_locked_increments_of_one_connection_take_turns(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    path = rel(folder / "counter.txt", workdir)
    values = await asyncio.gather(*(ok(client, "increment", args={"path": path}) for _ in range(5)))
    assert sorted(values) == [1, 2, 3, 4, 5]
    assert (folder / "counter.txt").read_text() == "5\n"


# -- watching --------------------------------------------------------------------------------------


async def test_watch_yields_change_events_and_unwatches(
    client: StdioClient, folder: Path, workdir: Path, broker: Broker
) -> None:
    path = rel(folder, workdir)
    task = asyncio.ensure_future(
        ok(client, "watch", args={"path": path, "count": 1, "timeout": 20, "recursive": True})
    )
    await client.wait_answered("files/watch")
    (folder / "new.csv").write_text("a,b\n")
    result = await asyncio.wait_for(task, 30)
    [event] = result["events"]
    assert event["watch_id"] == result["watch_id"]
    assert event["path"] == f"{path}/new.csv" and event["event"] in ("created", "modified")
    assert event["timestamp"].endswith("Z")
    unwatch = await client.wait_answered("files/unwatch")
    assert unwatch.params == {"watchId": result["watch_id"]} and unwatch.error is None
    assert [w for w in broker.watches.watches() if w.owner == client.conn.id] == []


# -- transports -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stock", [False, True], ids=["run_stdio", "mcp-stdio"])
async def test_stray_output_never_reaches_the_wire(
    broker: Broker, workdir: Path, consents: Consents, stock: bool
) -> None:
    (workdir / "data" / f"noisy_{stock}.txt").write_text("content")
    broker.allow(f"data/noisy_{stock}.txt", ops=("read",))
    argv = python_argv(APP, "--stock") if stock else python_argv(APP)
    c = await StdioClient.start(argv, broker, env=server_env(), consenter=CallbackConsenter(consents.decide))
    try:
        for _ in range(2):
            result = await c.call_tool("noisy", {"path": f"data/noisy_{stock}.txt"})
            assert result["content"][0]["text"] == "'' content"
        assert "this is not JSON-RPC" in "\n".join(c.stderr_lines)
    finally:
        await c.close()


# -- mcp internals the helper relies on ------------------------------------------------------------


def test_mcp_internals_the_helper_relies_on_are_there() -> None:
    """A canary: fails loudly when a newer mcp moves what the helper reaches."""
    from mcp.server.connection import Connection
    from mcp.server.mcpserver import MCPServer
    from mcp.server.session import ServerSession

    connection = Connection.for_loop(None)  # type: ignore[arg-type]
    session = ServerSession(None, connection)  # type: ignore[arg-type]
    assert connection_state(session) is connection.state
    server = MCPServer("canary")
    assert lowlevel_server(server).middleware is server.middleware


def test_the_helper_exports_exactly_its_public_api() -> None:
    public = {
        name
        for name, value in vars(helper).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public == set(helper.__all__)
    assert not [name for name in helper.__all__ if name.startswith("_")]


async def test_unknown_operations_and_events_are_refused_before_anything_is_sent() -> None:
    from mcp.server.connection import Connection
    from mcp.server.session import ServerSession

    session = ServerSession(None, Connection.for_loop(None))  # type: ignore[arg-type]
    state = ConnectionFiles(brokering=True, capabilities={})
    with pytest.raises(ValueError, match="unknown operation 'erase'"):
        helper.FilesClient(session, 1, state, consent_operations=("read", "erase"))
    fs = helper.FilesClient(session, 1, state)
    with pytest.raises(ValueError, match="unknown event 'renamed'"):
        fs.watch("data", events=["modified", "renamed"])
    async with fs:
        assert fs.watch("data", events=helper.WATCH_EVENTS).events == helper.WATCH_EVENTS


def test_error_mapping_and_policies() -> None:
    data = {"error": "FILE_LOCKED", "reason": "locked", "path": "data/x", "retryAfterMs": 250}
    exc = helper.error_from_jsonrpc(-32100, "locked", data, method="files/read")
    assert isinstance(exc, helper.FileLockedError) and isinstance(exc, helper.FilesRequestError)
    assert (exc.code, exc.name, exc.reason, exc.path, exc.retry_after) == (
        -32100,
        "FILE_LOCKED",
        "locked",
        "data/x",
        0.25,
    )
    assert str(exc) == "FILE_LOCKED: locked"
    assert type(helper.error_from_jsonrpc(-32001, "timed out")) is helper.RequestTimeoutError
    assert type(helper.error_from_jsonrpc(-32099, "odd")) is helper.FilesRequestError
    assert 0.25 <= helper.RetryPolicy().delay(0, exc) <= 0.275
    plain = helper.error_from_jsonrpc(-32107, "slow")
    assert 0.4 <= helper.RetryPolicy(backoff=0.1).delay(2, plain) <= 0.44
    assert helper.Timeouts().for_bytes(2 * MiB) == 120.0
    assert helper.advertises_brokering({"capabilities": {"roots": {"filesystemBrokering": True}}})
    assert not helper.advertises_brokering({"capabilities": {"roots": {"listChanged": True}}})
    assert not helper.advertises_brokering(None)
    # Roots: the items and the names of _meta merged by name, in the names' order; the malformed skipped.
    located = [{"uri": "file:///srv/b", "name": "b"}, {"uri": "file:///srv/x"}, {"name": "no-uri"}, 3]
    named = [{"name": "a", "readOnly": True}, {"name": "b", "readOnly": True}, {"readOnly": True}, "c"]
    assert roots_from_result({"roots": located, "_meta": {"filesystemBrokering": {"roots": named}}}) == (
        helper.RootEntry(None, "a", None, True),
        helper.RootEntry("file:///srv/b", "b", "/srv/b", True),
        helper.RootEntry("file:///srv/x", None, "/srv/x", False),
    )
    assert roots_from_result({"roots": "nonsense", "_meta": {"filesystemBrokering": []}}) == ()
    unavailable = helper.FilesUnavailableError()
    assert (unavailable.code, unavailable.message) == (-32603, SEP_MESSAGE)


def test_the_old_name_of_a_root_entry_still_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="RootEntry"):
        old = helper.Root
    assert old is helper.RootEntry
