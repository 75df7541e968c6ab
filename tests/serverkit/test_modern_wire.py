"""The kit on the 2026-07-28 wire: tools written for ``files(ctx)`` served by batches and sealed
continuations, by the example server over stateless Streamable HTTP, and continued by another
replica given the same key file.

The client is :mod:`tests.support.modern_files`, written from PROTOCOL.md, answering with a real
core. Tampered, replayed, expired and other-connection continuations are refused before the tool
runs, so nothing is touched.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.protocol import ServerConnection, open_connection
from jupyter_fsbroker.serverkit import FilesExtension, enable_files, files
from jupyter_fsbroker.wire import catalogue
from jupyter_fsbroker.wire.modern import EXTENSION_ID, continuation_meta
from tests.protocol.servers.harness import approve_all
from tests.support.modern_files import BatchAnswerer, call
from tests.support.servers import AnalysisServer, analysis_server_http

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ROWS = 100_000  # about 1.2 MB: two reads in flight, one batch


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "state.keys"
    path.write_text(secrets.token_hex(32) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def replicas(key_file: Path) -> Iterator[tuple[AnalysisServer, AnalysisServer]]:
    args = ("--stateless", "--state-key-file", str(key_file))
    with analysis_server_http(*args) as first, analysis_server_http(*args) as second:
        yield first, second


@pytest.fixture
def core(tmp_path: Path) -> Iterator[tuple[Path, Any, Broker]]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("n,double\n" + "".join(f"{i},{2 * i}\n" for i in range(ROWS)))
    (data / "counter.txt").write_text("41")
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read", "write"))
        yield data, broker.connect("modern"), broker


@pytest.fixture
async def modern(
    replicas: tuple[AnalysisServer, AnalysisServer], core: tuple[Path, Any, Broker]
) -> AsyncIterator[tuple[Client, BatchAnswerer, Path]]:
    data, connection, _ = core
    answerer = BatchAnswerer(connection)
    async with Client(replicas[0].url, mode=MODERN, extensions=[answerer]) as client:
        yield client, answerer, data


async def test_profile_csv_runs_over_batches_on_a_stateless_server(
    modern: tuple[Client, BatchAnswerer, Path],
) -> None:
    client, answerer, _ = modern
    result = await call(client, answerer, "profile_csv", {"path": "data/sales.csv"})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["rows"] == ROWS
    reads = [op for r in answerer.rounds for op in r.operations if op["method"] == "files/read"]
    # Text chunks split on characters, so each read starts where the last one ended: one a batch.
    assert len(reads) == len(answerer.rounds) == 2


async def test_write_report_and_atomic_increment_write_once_each(
    modern: tuple[Client, BatchAnswerer, Path], core: tuple[Path, Any, Broker]
) -> None:
    client, answerer, data = modern
    for expected in (42, 43):
        result = await call(client, answerer, "atomic_increment", {"path": "data/counter.txt"})
        assert not result.is_error, result.content
        assert result.structured_content == {"path": "data/counter.txt", "value": expected}
    assert (data / "counter.txt").read_text().strip() == "43"
    result = await call(client, answerer, "write_report", {"path": "data/sales.csv"})
    assert not result.is_error, result.content
    assert f"- Rows: {ROWS:,}" in (data / "sales.report.md").read_text()
    # Re-runs replay recorded answers: each write reached the client exactly once.
    assert answerer.methods.count("files/write") == 3
    records = [r for r in core[2].audit.records() if r.method == "files/write"]
    assert len(records) == 3


async def test_another_replica_with_the_same_key_continues_the_call(
    replicas: tuple[AnalysisServer, AnalysisServer], core: tuple[Path, Any, Broker]
) -> None:
    _, connection, _ = core
    answerer = BatchAnswerer(connection)
    async with (
        Client(replicas[0].url, mode=MODERN, extensions=[answerer]) as client,
        Client(replicas[1].url, mode=MODERN, extensions=[answerer]) as other,
    ):
        answerer.sessions = [other.session, client.session]
        result = await call(client, answerer, "profile_csv", {"path": "data/sales.csv"})
    assert not result.is_error, result.content
    assert result.structured_content is not None and result.structured_content["rows"] == ROWS
    assert len(answerer.rounds) >= 2, "both replicas should have served a step"


async def _first_round(client: Client, answerer: BatchAnswerer) -> dict[str, Any]:
    """The continuation meta of the first batch of an atomic_increment (answered, not yet sent)."""
    raw = await client.session.call_tool(
        "atomic_increment", {"path": "data/counter.txt"}, meta=answerer.first_meta(), allow_claimed=True
    )
    batch = raw.model_dump(by_alias=True, mode="json")
    answers = answerer.answer(batch["operations"])
    return continuation_meta(answerer.connection_id, batch["continuation"], answers)


async def _refused(client: Client, meta: dict[str, Any]) -> MCPError:
    with pytest.raises(MCPError) as info:
        await client.session.call_tool(
            "atomic_increment", {"path": "data/counter.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    return info.value


async def test_a_tampered_continuation_is_refused_and_nothing_is_touched(
    modern: tuple[Client, BatchAnswerer, Path],
) -> None:
    client, answerer, data = modern
    meta = await _first_round(client, answerer)
    token = meta["continuation"]
    middle = len(token) // 2
    meta["continuation"] = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    before = list(answerer.methods)
    error = await _refused(client, meta)
    assert error.error.code == catalogue.CONTINUATION_REFUSED.code
    assert error.error.data == {"error": "CONTINUATION_REFUSED", "reason": "invalid"}
    assert answerer.methods == before and (data / "counter.txt").read_text() == "41"


async def test_a_replayed_continuation_is_refused_by_the_replica_that_opened_it(
    modern: tuple[Client, BatchAnswerer, Path],
) -> None:
    client, answerer, data = modern
    meta = await _first_round(client, answerer)
    await client.session.call_tool(
        "atomic_increment", {"path": "data/counter.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
    )
    error = await _refused(client, meta)
    assert error.error.code == catalogue.CONTINUATION_REFUSED.code
    assert (data / "counter.txt").read_text() == "41"


async def test_a_continuation_from_another_connection_or_call_is_refused(
    modern: tuple[Client, BatchAnswerer, Path],
) -> None:
    client, answerer, data = modern
    meta = await _first_round(client, answerer)
    stolen = {**meta, "connection": "c_" + secrets.token_urlsafe(16)}
    assert (await _refused(client, stolen)).error.code == catalogue.CONTINUATION_REFUSED.code
    with pytest.raises(MCPError) as info:
        await client.session.call_tool(
            "atomic_increment", {"path": "data/other.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    assert info.value.error.code == catalogue.CONTINUATION_REFUSED.code
    missing_answer = {**meta, "answers": meta["answers"][1:]}
    assert (await _refused(client, missing_answer)).error.code == catalogue.CONTINUATION_REFUSED.code
    assert (data / "counter.txt").read_text() == "41"


def _small_server(**extension: Any) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("modern-test", extensions=[FilesExtension(**extension)])
    enable_files(server)
    picks = iter(range(1000))

    @server.tool()
    async def read_twice(path: str, ctx: Context) -> str:
        fs = files(ctx)
        first = await fs.read_text(path)
        return first + await fs.read_text(path)

    @server.tool()
    async def size_of(path: str, ctx: Context) -> int:
        return len(await files(ctx).read_bytes(path))

    @server.tool()
    async def first_changes(path: str, ctx: Context, count: int = 2) -> list[str]:
        seen: list[str] = []
        async with files(ctx).watch(path) as watch:
            async for event in watch:
                seen.append(f"{event.event} {event.path}")
                if len(seen) == count:
                    break
        return seen

    @server.tool()
    async def wanders(ctx: Context) -> str:
        fs = files(ctx)
        # Outside state decides the path: a re-run asks another file than the first run did.
        return await fs.read_text(f"data/n{next(picks) % 2}.txt")

    return server


@pytest.fixture
def small_core(tmp_path: Path) -> Iterator[Any]:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("a.txt", "n0.txt", "n1.txt"):
        (data / name).write_text(name)
    (data / "zeros.bin").write_bytes(bytes(3 * 1024 * 1024 + 5))
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        yield broker.connect("small")


async def test_binary_reads_in_flight_share_a_batch(small_core: Any) -> None:
    answerer = BatchAnswerer(small_core)
    async with Client(_small_server(), mode=MODERN, extensions=[answerer]) as client:
        result = await call(client, answerer, "size_of", {"path": "data/zeros.bin"})
    assert not result.is_error, result.content
    assert result.content[0].text == str(3 * 1024 * 1024 + 5)  # type: ignore[union-attr]
    sizes = [len(r.operations) for r in answerer.rounds]
    assert max(sizes) > 1, f"reads at fixed offsets should be asked together, got batches of {sizes}"
    assert answerer.methods.count("files/read") == sum(sizes)


async def test_a_watch_asks_files_changes_with_its_cursor_until_events_come(small_core: Any) -> None:
    answerer = BatchAnswerer(small_core)
    asked: list[dict[str, Any]] = []
    events = iter(
        [[], [{"path": "data/a.txt", "event": "modified"}], [{"path": "data/b.txt", "event": "created"}]]
    )

    def changes(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        found = [
            {"watchId": params["watchId"], "timestamp": "2026-12-02T12:00:00.000Z", **e} for e in next(events)
        ]
        return {"events": found, "cursor": str(len(asked)), "dropped": False}

    answerer.overrides = {
        "files/watch": lambda params: {"watchId": "w_1"},
        "files/changes": changes,
        "files/unwatch": lambda params: {},
    }
    async with Client(_small_server(), mode=MODERN, extensions=[answerer]) as client:
        result = await call(client, answerer, "first_changes", {"path": "data"})
    assert not result.is_error, result.content
    assert result.structured_content == {"result": ["modified data/a.txt", "created data/b.txt"]}
    assert [p.get("cursor") for p in asked] == [None, "1", "2"]
    assert all(p["watchId"] == "w_1" and p["waitMs"] > 0 for p in asked)
    assert answerer.methods.count("files/unwatch") == 1


async def test_an_expired_continuation_is_refused(small_core: Any) -> None:
    answerer = BatchAnswerer(small_core)
    async with Client(_small_server(ttl=1e-9), mode=MODERN, extensions=[answerer]) as client:
        with pytest.raises(MCPError) as info:
            await call(client, answerer, "read_twice", {"path": "data/a.txt"})
    assert info.value.error.code == catalogue.CONTINUATION_REFUSED.code
    assert info.value.error.data == {"error": "CONTINUATION_REFUSED", "reason": "expired"}


async def test_a_tool_that_asks_otherwise_when_run_again_fails_with_replay_diverged(small_core: Any) -> None:
    answerer = BatchAnswerer(small_core)
    # No call kept live: each round re-runs the tool, as a replica that did not run the last one does.
    async with Client(_small_server(live_calls=0), mode=MODERN, extensions=[answerer]) as client:
        assert (await call(client, answerer, "read_twice", {"path": "data/a.txt"})).content[
            0
        ].text == "a.txt" * 2  # type: ignore[union-attr]
        with pytest.raises(MCPError) as info:
            await call(client, answerer, "wanders", {})
    assert info.value.error.code == catalogue.REPLAY_DIVERGED.code
    assert "clocks, randomness or outside state" in info.value.error.message


async def test_a_modern_client_without_the_extension_is_told_the_cause_and_the_fix(
    replicas: tuple[AnalysisServer, AnalysisServer],
) -> None:
    async with Client(replicas[0].url, mode=MODERN) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("profile_csv", {"path": "data/sales.csv"})
    assert info.value.error.code == catalogue.FILES_UNAVAILABLE.code
    assert info.value.error.data == {"error": "FILES_UNAVAILABLE", "reason": "no_extension"}
    assert EXTENSION_ID in info.value.error.message


async def test_a_legacy_client_of_a_stateless_server_fails_at_once_naming_the_fix(
    replicas: tuple[AnalysisServer, AnalysisServer],
) -> None:
    async with Client(replicas[0].url, mode="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("profile_csv", {"path": "data/sales.csv"})
    assert info.value.error.code == catalogue.INTERNAL_ERROR.code
    message = info.value.error.message
    assert "no return path" in message and EXTENSION_ID in message and "statefully" in message


def test_the_key_file_must_be_private_and_hold_long_keys(tmp_path: Path) -> None:
    from jupyter_fsbroker.serverkit import load_state_keys

    path = tmp_path / "keys"
    path.write_text("short\n")
    path.chmod(0o600)
    with pytest.raises(ValueError, match="at least 32"):
        load_state_keys(path)
    path.write_text("# ring\n" + "k" * 40 + "\n\n" + "j" * 32 + "\n")
    assert load_state_keys(path) == [b"k" * 40, b"j" * 32]
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        load_state_keys(path)


class _WithoutChanges(BatchAnswerer):
    """A client of the extension that does not list the ``changes`` feature."""

    def settings(self) -> dict[str, Any]:
        return {"features": ["perPathConsent"]}


async def test_a_watching_tool_fails_at_once_for_a_client_without_changes(
    replicas: tuple[AnalysisServer, AnalysisServer], core: tuple[Path, Any, Broker]
) -> None:
    _, connection, broker = core
    broker.allow("data", ops=("watch",))
    answerer = _WithoutChanges(connection)
    async with Client(replicas[0].url, mode=MODERN, extensions=[answerer]) as client:
        with pytest.raises(MCPError) as info:
            await call(client, answerer, "watch_changes", {"path": "data", "seconds": 1})
    error = info.value.error
    assert error.code == catalogue.FILES_UNAVAILABLE.code
    assert error.data == {"error": "FILES_UNAVAILABLE", "reason": "no_changes"}
    assert "changes" in error.message and EXTENSION_ID in error.message
    assert answerer.methods == []  # nothing was watched


async def test_watch_changes_runs_over_files_changes_answered_by_the_core(
    modern: tuple[Client, BatchAnswerer, Path], core: tuple[Path, Any, Broker]
) -> None:
    client, answerer, data = modern
    core[1].keep_changes()  # a modern connection: every watch's events kept from its start
    core[2].allow("data", ops=("watch",))
    # The file the tool waits for is made when the watch is live: its audit record says so.
    made: list[str] = []

    def on_record(record: Any) -> None:
        if record.method == "files/watch" and record.error is None and not made:
            made.append(record.method)
            (data / "_SUCCESS").write_text("done")

    stop = core[2].audit.subscribe(on_record)
    try:
        result = await call(
            client, answerer, "watch_changes", {"path": "data", "seconds": 60, "until": "_SUCCESS"}
        )
    finally:
        stop()
    assert not result.is_error, result.content
    assert result.structured_content is not None and result.structured_content["until_seen"] is True
    assert answerer.methods[0] == "files/watch" and "files/changes" in answerer.methods
    assert answerer.methods[-1] == "files/unwatch"


@pytest.fixture
async def product(
    replicas: tuple[AnalysisServer, AnalysisServer], core: tuple[Path, Any, Broker]
) -> AsyncIterator[tuple[ServerConnection, Path]]:
    """The product's client on its default era, connected to one stateless replica."""
    data, _, broker = core
    async with open_connection(broker, "product", url=replicas[0].url, consenter=approve_all()) as conn:
        yield conn, data


async def test_concurrent_calls_of_one_connection_take_turns_on_a_lock(
    product: tuple[ServerConnection, Path],
) -> None:
    # A kept lock belongs to the connection: its calls take turns in the server process, as
    # they do on one legacy session, so no increment is lost.
    conn, data = product
    assert conn.era == "modern"
    results = await asyncio.gather(
        *(conn.call_tool("atomic_increment", {"path": "data/counter.txt"}, timeout=60) for _ in range(12))
    )
    assert [r["isError"] for r in results] == [False] * 12, [r["content"] for r in results]
    assert sorted(r["structuredContent"]["value"] for r in results) == list(range(42, 54))
    assert (data / "counter.txt").read_text().strip() == "53"


async def test_the_pydata_tools_read_through_batches(product: tuple[ServerConnection, Path]) -> None:
    # fsspec runs its reads in worker threads: they reach the call's batches from there too.
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    conn, data = product
    frame = pd.DataFrame({"n": range(1000), "region": ["north", "south"] * 500})
    frame.to_parquet(data / "orders.parquet", index=False)
    profile = await conn.call_tool(
        "profile_parquet", {"path": "data/orders.parquet", "columns": ["n"]}, timeout=60
    )
    assert not profile["isError"], profile["content"]
    [column] = profile["structuredContent"]["columns"]
    assert (column["name"], column["mean"]) == ("n", 499.5)
    sql = "SELECT region, count(*) AS k FROM orders GROUP BY region ORDER BY region"
    query = await conn.call_tool(
        "query", {"sql": sql, "tables": {"orders": "data/orders.parquet"}}, timeout=60
    )
    assert not query["isError"], query["content"]
    assert query["structuredContent"]["rows"] == 2
    assert query["structuredContent"]["data"] == [["north", 500], ["south", 500]]
