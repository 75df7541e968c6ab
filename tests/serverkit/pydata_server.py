"""An MCP server whose tools run pandas, pyarrow, polars, DuckDB and Dask on the kit's fsspec filesystem.

Each tool takes ``files(ctx, consent_message=...).fsspec()`` (the kit asks consent the first
time a path needs it), runs its library's ordinary code in ``await fs.run_sync(...)`` and answers a digest of
the resulting table (:func:`digest`), which the tests compare with the same code on the local file.
Run it over stdio, or ``--http 127.0.0.1:0`` as the example analysis server.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import enable_files, files
from tests.support.kit_serving import serve_from_argv

__all__ = ["build_server", "digest"]


def digest(frame: Any) -> dict[str, Any]:
    """Rows, columns and a SHA-256 of a pandas DataFrame's CSV text (the comparison of two reads)."""
    text = frame.to_csv(index=False, float_format="%.17g")
    return {
        "rows": len(frame),
        "columns": list(map(str, frame.columns)),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def _pandas_csv(fs: Any, path: str) -> dict[str, Any]:
    import pandas as pd

    with fs.open(path, "rb") as f:
        return digest(pd.read_csv(f))


def _pandas_parquet(fs: Any, path: str, columns: list[str] | None) -> dict[str, Any]:
    import pandas as pd

    return digest(pd.read_parquet(path, columns=columns, filesystem=fs))


def _arrow_parquet(fs: Any, path: str, columns: list[str] | None, above: float | None) -> dict[str, Any]:
    import pyarrow.parquet as pq

    filters = None if above is None else [("key", ">", above)]
    return digest(pq.read_table(path, columns=columns, filters=filters, filesystem=fs).to_pandas())


def _arrow_dataset(fs: Any, path: str, columns: list[str] | None, above: float | None) -> dict[str, Any]:
    import pyarrow.dataset as ds

    dataset = ds.dataset(path, format="parquet", filesystem=fs)
    where = None if above is None else ds.field("key") > above
    return digest(dataset.to_table(columns=columns, filter=where).to_pandas())


def _polars_parquet(fs: Any, path: str, columns: list[str] | None) -> dict[str, Any]:
    import polars as pl

    with fs.open(path, "rb") as f:
        frame = pl.read_parquet(f, columns=columns)
    return digest(frame.to_pandas())


def _duckdb_sql(fs: Any, path: str, sql: str) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.register_filesystem(fs)
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('fsbroker://{path}')")
        return digest(con.sql(sql).df())
    finally:
        con.close()


def _dask_parquet(fs: Any, path: str, columns: list[str] | None) -> dict[str, Any]:
    import dask
    import dask.dataframe as dd

    # One partition per row group, read by the threaded scheduler's threads at once.
    frame = dd.read_parquet(path, columns=columns, filesystem=fs, split_row_groups=True)
    with dask.config.set(scheduler="threads"):
        return digest(frame.compute().reset_index(drop=True))


def _write(fs: Any, source: str, output: str, fail: bool) -> dict[str, Any]:
    import pandas as pd

    frame = pd.read_parquet(source, filesystem=fs)
    if output.endswith(".parquet"):
        with fs.open(output, "wb") as f:
            frame.to_parquet(f, index=False)
            if fail:
                raise ValueError("failed half way")
    else:
        with fs.open(output, "wb") as f:
            frame.to_csv(f, index=False)
            if fail:
                raise ValueError("failed half way")
    return digest(frame)


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("pydata-test")
    enable_files(server)

    @server.tool()
    async def pandas_csv(path: str, ctx: Context) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} with pandas").fsspec()
        return await fs.run_sync(_pandas_csv, fs, path)

    @server.tool()
    async def pandas_parquet(path: str, ctx: Context, columns: list[str] | None = None) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} with pandas").fsspec()
        return await fs.run_sync(_pandas_parquet, fs, path, columns)

    @server.tool()
    async def arrow_parquet(
        path: str, ctx: Context, columns: list[str] | None = None, above: float | None = None
    ) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} with pyarrow").fsspec()
        return await fs.run_sync(_arrow_parquet, fs, path, columns, above)

    @server.tool()
    async def arrow_dataset(
        path: str, ctx: Context, columns: list[str] | None = None, above: float | None = None
    ) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} as a pyarrow dataset").fsspec()
        return await fs.run_sync(_arrow_dataset, fs, path, columns, above)

    @server.tool()
    async def polars_parquet(path: str, ctx: Context, columns: list[str] | None = None) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} with polars").fsspec()
        return await fs.run_sync(_polars_parquet, fs, path, columns)

    @server.tool()
    async def duckdb_sql(path: str, sql: str, ctx: Context) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Query {path} with DuckDB").fsspec()
        return await fs.run_sync(_duckdb_sql, fs, path, sql)

    @server.tool()
    async def dask_parquet(path: str, ctx: Context, columns: list[str] | None = None) -> dict[str, Any]:
        fs = files(ctx, consent_message=f"Read {path} with Dask").fsspec()
        return await fs.run_sync(_dask_parquet, fs, path, columns)

    @server.tool()
    async def write_back(source: str, output: str, ctx: Context, fail: bool = False) -> dict[str, Any]:
        fs = files(
            ctx,
            consent_message=f"Read {source} and write {output}",
            consent_access={source: ["read"], output: ["write"]},
        ).fsspec()
        return await fs.run_sync(_write, fs, source, output, fail)

    return server


if __name__ == "__main__":
    serve_from_argv(build_server())
