"""The example server's tables tools over a real connection: profile_csv with pyarrow, profile_parquet, query.

Each result is compared with the same code run on the local file: the Arrow profile with the
standard library's (:func:`tests.support.profiles.assert_same_profile`), a Parquet profile with
:func:`profile_parquet` on the local file, a query with DuckDB on the local file. What crossed
the wire is read from the broker's audit, beside the Parquet metadata's column chunk sizes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision
from tests.protocol.rawclient import RawClient, StdioClient, python_argv
from tests.protocol.servers.harness import HeldConsenter
from tests.serverkit.test_analysis_server import MiB, make_csv, reference_profile
from tests.support.env import server_env
from tests.support.kit_clients import data_broker, transport_fixtures
from tests.support.profiles import assert_same_profile
from tests.support.servers import MODULE

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")
pd = pytest.importorskip("pandas")

from jupyter_fsbroker.examples.analysis_server import ARROW_FROM_BYTES  # noqa: E402
from jupyter_fsbroker.examples.arrowstats import profile_parquet  # noqa: E402

pytestmark = pytest.mark.anyio

ROWS = 120_000


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import numpy as np

    folder = tmp_path_factory.mktemp("tables") / "data"
    folder.mkdir()
    (folder / "sales.csv").write_text(make_csv(2 * MiB + 500, seed=22), encoding="utf-8")
    (folder / "ragged.csv").write_text("a,b\n1,2\n3\n4,5,6\n7,8\n", encoding="utf-8")
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "id": np.arange(ROWS),
            **{f"v{i}": rng.standard_normal(ROWS) for i in range(5)},
            "region": rng.choice(["north", "south", "east", "west"], ROWS),
            "amount": np.where(rng.random(ROWS) < 0.05, np.nan, rng.uniform(0, 100, ROWS)),
        }
    )
    frame.to_parquet(folder / "wide.parquet", index=False, row_group_size=ROWS // 4)
    return folder


@pytest.fixture(scope="module")
def broker(data: Path) -> Iterator[Broker]:
    with data_broker(data) as b:
        yield b


stdio, http, client = transport_fixtures(MODULE)


def _local_profile(path: Path) -> dict[str, Any]:
    return reference_profile(path.read_text(encoding="utf-8"))


def _read_bytes(broker: Broker, client: RawClient, since: float) -> int:
    """Bytes the audit says this connection read since *since*."""
    return sum(
        r.bytes
        for r in broker.audit.records()
        if r.connection_id == client.conn.id and r.method == "files/read" and r.time >= since
    )


def _local_query(data: Path, sql: str, tables: dict[str, str]) -> Any:
    con = duckdb.connect(":memory:")
    try:
        for name, path in tables.items():
            reader = "read_parquet" if path.endswith(".parquet") else "read_csv"
            local = data / path.removeprefix("data/")
            con.execute(f"CREATE VIEW \"{name}\" AS SELECT * FROM {reader}('{local}')")
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


async def test_profile_csv_with_arrow_equals_the_standard_library(client: RawClient, data: Path) -> None:
    expected = _local_profile(data / "sales.csv")
    fast = await client.tool_json("profile_csv", {"path": "data/sales.csv", "engine": "arrow"})
    assert fast["engine"] == "arrow" and fast["bytes"] == (data / "sales.csv").stat().st_size
    assert_same_profile(fast, expected)
    plain = await client.tool_json("profile_csv", {"path": "data/sales.csv", "engine": "python"})
    assert plain["engine"] == "python"
    assert_same_profile(plain, expected)
    assert {k for k in fast if k != "columns"} == {k for k in plain if k != "columns"}
    # A file this small goes to the standard library unless Arrow is asked for.
    auto = await client.tool_json("profile_csv", {"path": "data/sales.csv"})
    assert auto["engine"] == "python"


async def test_a_large_csv_goes_to_arrow(client: RawClient, data: Path) -> None:
    path = data / f"large_{type(client).__name__}.csv"
    rows = 600_000  # about 11 MB, past ARROW_FROM_BYTES
    path.write_text("n,half\n" + "".join(f"{i},{i / 2}\n" for i in range(rows)), encoding="utf-8")
    assert path.stat().st_size > ARROW_FROM_BYTES
    got = await client.tool_json("profile_csv", {"path": f"data/{path.name}"})
    assert got["engine"] == "arrow" and got["rows"] == rows
    assert_same_profile(got, _local_profile(path))


async def test_a_ragged_csv_falls_back_to_the_standard_library(client: RawClient, data: Path) -> None:
    got = await client.tool_json("profile_csv", {"path": "data/ragged.csv", "engine": "arrow"})
    assert got["engine"] == "python" and got["ragged_rows"] == 2
    assert_same_profile(got, _local_profile(data / "ragged.csv"))


async def test_profile_parquet_moves_only_the_column_asked_for(
    client: RawClient, data: Path, broker: Broker
) -> None:
    local = data / "wide.parquet"
    since = time.time()
    got = await client.tool_json("profile_parquet", {"path": "data/wide.parquet", "columns": ["amount"]})
    with local.open("rb") as f:
        expected, _ = profile_parquet(f, ["amount"])
    assert_same_profile(got, expected)
    [amount] = got["columns"]
    assert amount["type"] == "numeric" and 0 < amount["missing"] < ROWS // 10  # NaN counts as missing
    meta = pq.ParquetFile(local).metadata
    index = meta.schema.to_arrow_schema().get_field_index("amount")
    column = sum(meta.row_group(g).column(index).total_compressed_size for g in range(meta.num_row_groups))
    footer = meta.serialized_size + 8
    moved = _read_bytes(broker, client, since)
    assert column < moved < 1.2 * column + footer, (moved, column, local.stat().st_size)
    assert moved < local.stat().st_size / 4


async def test_profile_parquet_names_a_missing_column(client: RawClient) -> None:
    got = await client.call_tool("profile_parquet", {"path": "data/wide.parquet", "columns": ["colour"]})
    assert got["isError"] and "no column named 'colour'" in got["content"][0]["text"]


async def test_query_answers_a_small_result_inline(client: RawClient, data: Path) -> None:
    sql = (
        "SELECT s.region, count(*) AS n, max(w.v1) AS top FROM s JOIN w ON s.id = w.id "
        "WHERE s.region <> '' GROUP BY s.region ORDER BY s.region"
    )
    tables = {"s": "data/sales.csv", "w": "data/wide.parquet"}
    got = await client.tool_json("query", {"sql": sql, "tables": tables})
    expected = _local_query(data, sql, tables)
    assert got["rows"] == expected.num_rows == 4
    assert [c["name"] for c in got["columns"]] == expected.column_names
    assert got["data"] == [list(row.values()) for row in expected.to_pylist()]
    assert got["seconds"] >= 0


async def test_query_writes_a_large_result_as_parquet(client: RawClient, data: Path, broker: Broker) -> None:
    name = f"big_{type(client).__name__}.parquet"
    sql = "SELECT id, region, v0 * 2 AS twice FROM w WHERE region = 'north' ORDER BY id"
    tables = {"w": "data/wide.parquet"}
    args = {"sql": sql, "tables": tables, "output": f"data/{name}"}
    got = await client.tool_json("query", args)
    expected = _local_query(data, sql, tables)
    written = pq.read_table(data / name)
    assert written.equals(expected)
    assert got["rows"] == expected.num_rows > 1000 and got["output"] == f"data/{name}"
    assert got["bytes"] == (data / name).stat().st_size and len(got["preview"]) == 10
    writes = [r for r in broker.audit.records() if r.method == "files/write" and r.path == f"data/{name}"]
    assert writes and writes[-1].decision == "allow"  # after the consent the first one asked for
    no_output = await client.call_tool("query", {"sql": sql, "tables": tables})
    assert no_output["isError"] and "give an output path" in no_output["content"][0]["text"]


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("INSTALL httpfs", "disabled by configuration"),
        ("SET enable_external_access = true", "locked"),
        ("COPY w TO '/tmp/escaped.csv'", "disabled by configuration"),
    ],
)
async def test_query_reaches_nothing_but_the_brokered_files(stdio: StdioClient, sql: str, words: str) -> None:
    got = await stdio.call_tool("query", {"sql": sql, "tables": {"w": "data/wide.parquet"}})
    assert got["isError"] and words in got["content"][0]["text"]
    assert not Path("/tmp/escaped.csv").exists()


async def test_seconds_leave_out_the_wait_for_consent(broker: Broker, data: Path) -> None:
    held = HeldConsenter()
    argv = python_argv("-m", MODULE)
    async with await StdioClient.start(argv, broker, env=server_env(), consenter=held) as c:
        started = time.perf_counter()
        task = asyncio.ensure_future(c.tool_json("profile_csv", {"path": "data/sales.csv"}))
        request, future = await held.next()
        held_from = time.perf_counter()
        await asyncio.sleep(2.0)  # the user thinking: a duration, not a wait for an event
        future.set_result(ConsentDecision.approve_all(request))
        hold = time.perf_counter() - held_from
        got = await task
        wall = time.perf_counter() - started
    assert got["rows"] > 0
    assert got["seconds"] <= wall - hold
