"""pandas, pyarrow, polars, DuckDB and Dask on the kit's fsspec filesystem, over real stdio and HTTP.

The server (tests/serverkit/pydata_server.py) runs each library's ordinary code on
``files(ctx).fsspec()``; every result is compared with the same code on the local file, and the
Parquet reads with the byte ranges that crossed the wire (the client's recorded ``files/read``s).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.serverkit import FilesClient
from tests.protocol.rawclient import RawClient
from tests.serverkit.pydata_server import digest
from tests.support.kit_clients import data_broker, transport_fixtures

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

if not hasattr(FilesClient, "fsspec"):
    pytest.skip("the kit has no fsspec filesystem (FilesClient.fsspec)", allow_module_level=True)

pytestmark = pytest.mark.anyio

SERVER = "tests.serverkit.pydata_server"
ROWS = 200_000
#: Row groups of the wide Parquet file: a filter on ``key`` (sorted) keeps the last ones only.
ROW_GROUPS = 8

stdio, http, client = transport_fixtures(SERVER)


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import numpy as np

    folder = tmp_path_factory.mktemp("pydata") / "data"
    folder.mkdir()
    rng = np.random.default_rng(22)
    frame = pd.DataFrame(
        {
            "key": np.arange(ROWS, dtype="float64"),
            **{f"v{i}": rng.standard_normal(ROWS) for i in range(6)},
            "label": rng.choice(["north", "south", "east", "west"], ROWS),
        }
    )
    frame.to_parquet(folder / "wide.parquet", index=False, row_group_size=ROWS // ROW_GROUPS)
    frame.head(20_000).to_csv(folder / "small.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def broker(data: Path) -> Iterator[Broker]:
    with data_broker(data) as b:
        yield b


def _bytes_read(client: RawClient) -> int:
    return sum(r.result["bytesRead"] for r in client.requests("files/read") if r.result is not None)


def _column_bytes(path: Path, names: list[str], groups: range | None = None) -> int:
    meta = pq.ParquetFile(path).metadata
    schema = meta.schema.to_arrow_schema()
    indices = [schema.get_field_index(name) for name in names]
    chosen = groups if groups is not None else range(meta.num_row_groups)
    return sum(meta.row_group(g).column(i).total_compressed_size for g in chosen for i in indices)


def _footer_bytes(path: Path) -> int:
    return pq.ParquetFile(path).metadata.serialized_size + 8


async def test_pandas_read_csv_equals_the_local_read(client: RawClient, data: Path) -> None:
    got = await client.tool_json("pandas_csv", {"path": "data/small.csv"})
    assert got == digest(pd.read_csv(data / "small.csv"))
    assert got["rows"] == 20_000


async def test_pandas_read_parquet_with_columns(client: RawClient, data: Path) -> None:
    got = await client.tool_json("pandas_parquet", {"path": "data/wide.parquet", "columns": ["v2", "label"]})
    assert got == digest(pd.read_parquet(data / "wide.parquet", columns=["v2", "label"]))


async def test_pyarrow_reads_only_the_projected_column(client: RawClient, data: Path) -> None:
    local = data / "wide.parquet"
    got = await client.tool_json("arrow_parquet", {"path": "data/wide.parquet", "columns": ["v3"]})
    assert got == digest(pq.read_table(local, columns=["v3"]).to_pandas())
    column = _column_bytes(local, ["v3"])
    moved = _bytes_read(client)
    assert column < moved < 1.2 * column + _footer_bytes(local), (moved, column, local.stat().st_size)


async def test_pyarrow_filter_skips_row_groups(client: RawClient, data: Path) -> None:
    local = data / "wide.parquet"
    above = ROWS - ROWS // ROW_GROUPS - 1  # the last row group only
    got = await client.tool_json(
        "arrow_parquet", {"path": "data/wide.parquet", "columns": ["v1"], "above": above}
    )
    assert got == digest(pq.read_table(local, columns=["v1"], filters=[("key", ">", above)]).to_pandas())
    assert got["rows"] == ROWS // ROW_GROUPS
    # The filter column in every group's statistics (footer), the data of the last group only.
    needed = _column_bytes(local, ["v1", "key"], range(ROW_GROUPS - 1, ROW_GROUPS))
    moved = _bytes_read(client)
    assert moved < 1.2 * needed + _footer_bytes(local), (moved, needed)


async def test_pyarrow_dataset_projection_and_filter(client: RawClient, data: Path) -> None:
    import pyarrow.dataset as ds

    local = data / "wide.parquet"
    above = ROWS // 2
    args = {"path": "data/wide.parquet", "columns": ["v0", "label"], "above": above}
    got = await client.tool_json("arrow_dataset", args)
    table = ds.dataset(local, format="parquet").to_table(
        columns=["v0", "label"], filter=ds.field("key") > above
    )
    assert got == digest(table.to_pandas())
    everything = local.stat().st_size
    assert _bytes_read(client) < everything / 2


async def test_polars_reads_parquet(client: RawClient, data: Path) -> None:
    _needs("polars")
    got = await client.tool_json("polars_parquet", {"path": "data/wide.parquet", "columns": ["key", "v5"]})
    # The local reference is pandas: polars started in this process keeps its thread pool's event
    # descriptors for the process's life, which the test suite reports as left behind.
    assert got == digest(pd.read_parquet(data / "wide.parquet", columns=["key", "v5"]))


async def test_duckdb_queries_through_the_registered_filesystem(client: RawClient, data: Path) -> None:
    _needs("duckdb")
    import duckdb

    # Rounded: DuckDB's parallel avg() sums in an order that depends on its threads' share of the
    # row groups, so the last bits differ from run to run (and between a local and a remote read).
    sql = "SELECT label, count(*) AS n, round(avg(v4), 9) AS mean FROM t GROUP BY label ORDER BY label"
    got = await client.tool_json("duckdb_sql", {"path": "data/wide.parquet", "sql": sql})
    local = duckdb.connect(":memory:")
    local.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{data / 'wide.parquet'}')")
    expected = local.sql(sql).df()
    local.close()
    assert got["rows"] == 4 and got["columns"] == list(expected.columns)
    assert got == digest(expected)


async def test_dask_threaded_scheduler_reads_row_groups_at_once(client: RawClient, data: Path) -> None:
    _needs("dask")
    args = {"path": "data/wide.parquet", "columns": ["key", "v2"]}
    got = await client.tool_json("dask_parquet", args)
    assert got == digest(pd.read_parquet(data / "wide.parquet", columns=["key", "v2"]))
    # A partition per row group, each its own ranged reads, and only the two columns' bytes.
    assert _bytes_read(client) < 1.2 * _column_bytes(
        data / "wide.parquet", ["key", "v2"]
    ) + 4 * _footer_bytes(data / "wide.parquet")


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
async def test_writes_results_back_atomically(client: RawClient, data: Path, suffix: str) -> None:
    name = f"out_{type(client).__name__}.{suffix}"
    target = data / name
    target.write_text("old\n")
    args: dict[str, Any] = {"source": "data/wide.parquet", "output": f"data/{name}", "fail": True}
    result = await client.request("tools/call", {"name": "write_back", "arguments": args})
    assert result["isError"] is True
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in data.iterdir() if p.name.startswith(".")) == []  # no staged leftovers
    got = await client.tool_json("write_back", {**args, "fail": False})
    source = pd.read_parquet(data / "wide.parquet")
    assert got == digest(source)
    if suffix == "parquet":
        assert digest(pd.read_parquet(target)) == got
    else:  # the same text as the local call writes
        assert target.read_text() == source.to_csv(index=False)
