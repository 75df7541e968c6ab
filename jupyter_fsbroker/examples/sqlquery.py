"""SQL over the user's CSV and Parquet files with DuckDB, locked down to the brokered filesystem.

The ``query`` tool of the example analysis server (:mod:`.analysis_server`):
each table is a view over one brokered file (``{"sales": "data/sales.parquet"}``),
read through the kit's fsspec filesystem, so only the byte ranges DuckDB asks
for cross the wire and every read is a ``files/read`` the user granted.

DuckDB itself reaches nothing else: external access is disabled except for the
``fsbroker://`` filesystem (``enable_external_access = false`` with
``allowed_directories``), so no local file, no ``ATTACH``, no extension
installed or loaded on demand, and the configuration is locked before the
user's SQL runs. A result of at most :data:`MAX_INLINE_ROWS` rows is answered
inline; a larger one is written as Parquet to the output the caller names,
through the kit's atomic writes, and summarised.

Runs in a worker thread (``await fs.run_sync(run_query, fs, ...)``).
"""

from __future__ import annotations

import datetime
import decimal
import math
import posixpath
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_INLINE_ROWS", "PREVIEW_ROWS", "run_query"]

#: Most rows answered inline; more are written to the output file.
MAX_INLINE_ROWS = 1000
#: Rows of a written result shown in the summary.
PREVIEW_ROWS = 10
#: Rows DuckDB hands over at once.
_BATCH_ROWS = 64 * 1024

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_READERS = {".parquet": "read_parquet", ".pq": "read_parquet", ".csv": "read_csv", ".tsv": "read_csv"}


def _reader(path: str) -> str:
    stem, suffix = posixpath.splitext(path.lower())
    if suffix == ".gz":
        suffix = posixpath.splitext(stem)[1]
    reader = _READERS.get(suffix)
    if reader is None:
        raise ValueError(f"{path}: a table is a .csv, .tsv or .parquet file")
    return reader


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _connect(fs: Any, tables: Mapping[str, str]) -> Any:
    import duckdb

    con = duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
        },
    )
    try:
        con.register_filesystem(fs)
        for name, path in tables.items():
            if not _NAME.match(name):
                raise ValueError(f"table name {name!r}: letters, digits and _ only, not first a digit")
            url = f"{fs.protocol}://{fs._strip_protocol(path)}"
            # A view takes no parameters: the name is checked above and the path quoted.
            view = f'CREATE VIEW "{name}" AS SELECT * FROM {_reader(path)}({_literal(url)})'  # noqa: S608
            con.execute(view)
        # Views read when queried, so from here on: the brokered files only, and no way back.
        con.execute(f"SET allowed_directories = [{_literal(fs.protocol + '://')}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return str(value)


def _rows(batches: list[Any]) -> list[list[Any]]:
    return [[_json(v) for v in row.values()] for batch in batches for row in batch.to_pylist()]


def run_query(fs: Any, sql: str, tables: Mapping[str, str], output: str | None = None) -> dict[str, Any]:
    """Run *sql* over *tables* (``{name: path}``) in DuckDB, reading them through *fs*.

    Parameters
    ----------
    fs
        The tool call's :class:`~jupyter_fsbroker.serverkit.BrokeredFileSystem`.
    sql
        One query; the tables are views named by *tables*' keys.
    tables
        ``{name: path}``: a CSV or Parquet file each, as the client shares it.
    output
        Where a result of more than :data:`MAX_INLINE_ROWS` rows is written, as Parquet.

    Returns
    -------
    dict
        ``columns`` (name and type), ``rows`` (their count), and either ``data``
        (the rows, inline) or ``output``, ``bytes`` and ``preview`` (its first rows).

    Raises
    ------
    ValueError
        A bad table name or file kind, a statement without a result, or a large result without *output*.
    duckdb.Error
        DuckDB refused the SQL (a syntax error, a file it may not read...).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    con = _connect(fs, tables)
    try:
        relation = con.sql(sql)
        if relation is None:
            raise ValueError("the SQL gives no result: query tables with SELECT (or WITH ... SELECT)")
        reader: pa.RecordBatchReader = relation.to_arrow_reader(_BATCH_ROWS)
        columns = [{"name": f.name, "type": str(f.type)} for f in reader.schema]
        head: list[Any] = []
        rows = 0
        for batch in reader:
            head.append(batch)
            rows += batch.num_rows
            if rows > MAX_INLINE_ROWS:
                break
        if rows <= MAX_INLINE_ROWS:
            return {"columns": columns, "rows": rows, "data": _rows(head)}
        if not output:
            raise ValueError(
                f"the result has more than {MAX_INLINE_ROWS:,} rows: give an output path "
                "(a .parquet file) to write it to"
            )
        # Staged by the kit and committed when the file closes: all of it, or, on failure, nothing.
        with fs.open(output, "wb") as f, pq.ParquetWriter(f, reader.schema) as writer:
            for batch in head:
                writer.write_batch(batch)
            for batch in reader:
                writer.write_batch(batch)
                rows += batch.num_rows
        preview = pa.Table.from_batches(head, reader.schema).slice(0, PREVIEW_ROWS).to_batches()
        return {
            "columns": columns,
            "rows": rows,
            "output": fs._strip_protocol(output),
            "bytes": fs.info(output)["size"],
            "preview": _rows(preview),
        }
    finally:
        con.close()
