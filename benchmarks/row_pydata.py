"""Rows 12 and 13: the PyData stack on brokered files, against the same call on the local file.

Row 12 (stdio) and 12a (Streamable HTTP): ``pandas.read_csv`` of a CSV file
(256 MiB; ``--quick`` 32 MiB) opened through ``files(ctx).fsspec()`` in a server
tool (``wire_server.py``'s ``pandas_csv``), against ``pandas.read_csv`` of the
same file by its local path in the same server process, in the same worker
thread (``fs.run_sync``), in turn within each repetition. Both are timed in
the server; the frames' shapes and checksums must agree. Target on stdio: the
broker within 2x of local.

Row 13: one column of a multi-column Parquet file (~1 GiB; ``--quick`` 128 MiB)
read by ``pyarrow.parquet.read_table`` through the filesystem (stdio), against
the same call on the local file. Reported: the bytes that crossed the wire
over that column's chunk bytes (the footer is the rest), target < 1.2x, and
the time against local.

The files are made once per run in the benchmark's folder: the CSV by
repeating a block of rows (numbers and labels, as a data set has), the Parquet
file with 16 float columns in row groups of 1 Mi rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from context import Bench, Skipped
from report import Row, refusals_note, summarize
from stats import median

NUMBERS = (12, 13)
MiB = 1024 * 1024
CSV_GOAL = 2.0
PARQUET_GOAL = 1.2
COLUMNS = 16
ROW_GROUP = 1024 * 1024
COLUMN = "c7"


def csv_file(bench: Bench, mib: int) -> Path:
    """``data/table-<mib>MiB.csv``: a header and a block of ~1 MiB of rows repeated to *mib* MiB."""
    import numpy as np
    import pandas as pd

    path = bench.root / f"table-{mib}MiB.csv"
    if not path.exists():
        bench.log(f"writing {path.name}")
        rng = np.random.default_rng(11)
        rows = 12_000
        frame = pd.DataFrame(
            {
                "id": np.arange(rows),
                **{f"x{i}": rng.standard_normal(rows).round(6) for i in range(6)},
                "count": rng.integers(0, 10_000, rows),
                "label": rng.choice(["north", "south", "east", "west"], rows),
            }
        )
        header, _, block = frame.to_csv(index=False).partition("\n")
        data = block.encode()
        with open(path, "wb") as out:
            out.write(header.encode() + b"\n")
            for _ in range(mib * MiB // len(data)):
                out.write(data)
    return path


def parquet_file(bench: Bench, mib: int) -> Path:
    """``data/wide-<mib>MiB.parquet``: 16 float64 columns, *mib* MiB of values, row groups of 1 Mi rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = bench.root / f"wide-{mib}MiB.parquet"
    if not path.exists():
        bench.log(f"writing {path.name}")
        rng = np.random.default_rng(12)
        rows = mib * MiB // (8 * COLUMNS)
        schema = pa.schema([(f"c{i}", pa.float64()) for i in range(COLUMNS)])
        with pq.ParquetWriter(path, schema) as writer:
            for start in range(0, rows, ROW_GROUP):
                n = min(ROW_GROUP, rows - start)
                columns = [pa.array(rng.standard_normal(n)) for _ in range(COLUMNS)]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema), row_group_size=ROW_GROUP)
    return path


def column_bytes(path: Path, column: str) -> int:
    """The compressed bytes of *column*'s chunks in every row group of the Parquet file."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    return sum(meta.row_group(g).column(index).total_compressed_size for g in range(meta.num_row_groups))


def same(ours: dict[str, Any], local: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        if ours[key] != local[key]:
            raise RuntimeError(f"the brokered read is not the local one: {key} {ours[key]} != {local[key]}")


def measure(bench: Bench) -> list[Row]:
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Skipped(f"pandas and pyarrow are needed: {exc}") from None
    s = bench.settings
    csv_mib, parquet_mib = (32, 128) if s.quick else (256, 1024)
    csv = csv_file(bench, csv_mib)
    parquet = parquet_file(bench, parquet_mib)
    csv_job = {"tool": "pandas_csv", "args": {"path": f"data/{csv.name}"}}
    csv_local = {"tool": "pandas_csv", "args": {"path": f"data/{csv.name}", "local": str(csv)}}
    pq_job = {"tool": "parquet_column", "args": {"path": f"data/{parquet.name}", "column": COLUMN}}
    pq_local = {"tool": "parquet_column", "args": {**pq_job["args"], "local": str(parquet)}}
    kinds = ("stdio", "stdio_local", "http", "http_local", "pq", "pq_local")
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in seconds}

    def record(kind: str, result: dict[str, Any]) -> dict[str, Any]:
        seconds[kind].append(result["seconds"])
        results[kind].append(result)
        return result

    stdio = bench.stdio_worker()
    with bench.runner.open("http") as http:
        for worker in (stdio, http):  # uncounted: the first call imports pandas and pyarrow
            worker.call(csv_local)
            worker.call(pq_local)
        for rep in range(s.repeats):
            bench.log(f"rows 12-13: {csv_mib} MiB CSV, {parquet_mib} MiB Parquet, run {rep + 1}/{s.repeats}")
            for kind, worker in (("stdio", stdio), ("http", http)):
                local = record(f"{kind}_local", worker.call(csv_local))
                same(record(kind, worker.call(csv_job)), local, ("shape", "checksum"))
            local = record("pq_local", stdio.call(pq_local))
            same(record("pq", stdio.call(pq_job)), local, ("rows", "checksum"))

    size = csv.stat().st_size
    rows = []
    for variant, kind, label in (("", "stdio", "stdio"), ("a", "http", "Streamable HTTP")):
        ratios = [a / b for a, b in zip(seconds[kind], seconds[f"{kind}_local"], strict=True)]
        ratio = median(ratios)
        rows.append(
            Row(
                number=12,
                variant=variant,
                what=f"pandas.read_csv of a {csv_mib} MiB CSV through the broker over {label}",
                value=summarize(seconds[kind], "{:.2f}", "s"),
                baseline=summarize(seconds[f"{kind}_local"], "{:.2f}", "s") + " local file",
                ratio=f"{ratio:.2f}x",
                target=f"≤ {CSV_GOAL:.0f}x (time)" if kind == "stdio" else "",
                met=ratio <= CSV_GOAL if kind == "stdio" else None,
                n=s.repeats,
                figures={
                    "seconds": seconds[kind],
                    "local_seconds": seconds[f"{kind}_local"],
                    "ratios": ratios,
                    "ratio": ratio,
                    "mb_per_s": [size / t / 1e6 for t in seconds[kind]],
                    "local_mb_per_s": [size / t / 1e6 for t in seconds[f"{kind}_local"]],
                    "moved": [r["moved"] for r in results[kind]],
                    "server_cpu": [r["cpu"] for r in results[kind]],
                    "parse_cpu": [r["parse_cpu"] for r in results[kind]],
                    "local_server_cpu": [r["cpu"] for r in results[f"{kind}_local"]],
                    "bytes": size,
                },
                note=(
                    "wire_server.py's pandas_csv: read_csv(fs.open(path)) in fs.run_sync's thread against"
                    " read_csv(local path) in the same process and thread, in turn; server CPU"
                    f" {median([r['cpu'] for r in results[kind]]):.2f} s (read_csv's thread"
                    f" {median([r['parse_cpu'] for r in results[kind]]):.2f} s) against"
                    f" {median([r['cpu'] for r in results[f'{kind}_local']]):.2f} s local"
                    + refusals_note(results[kind])
                ),
            )
        )
    column = column_bytes(parquet, COLUMN)
    moved = [r["moved"] for r in results["pq"]]
    share = median([m / column for m in moved])
    ratios = [a / b for a, b in zip(seconds["pq"], seconds["pq_local"], strict=True)]
    rows.append(
        Row(
            number=13,
            what=f"one column of a {parquet_mib} MiB {COLUMNS}-column Parquet file, pyarrow over stdio",
            value=f"{share:.3f}x the column's bytes; " + summarize(seconds["pq"], "{:.2f}", "s"),
            baseline=summarize(seconds["pq_local"], "{:.2f}", "s") + " local file",
            ratio=f"{median(ratios):.2f}x",
            target=f"< {PARQUET_GOAL}x bytes",
            met=share < PARQUET_GOAL,
            n=s.repeats,
            figures={
                "moved": moved,
                "column_bytes": column,
                "file_bytes": parquet.stat().st_size,
                "moved_over_column": share,
                "seconds": seconds["pq"],
                "local_seconds": seconds["pq_local"],
                "ratios": ratios,
            },
            note=(
                f"wire_server.py's parquet_column: pq.read_table(columns=[{COLUMN!r}], filesystem=fs); moved"
                f" {median(moved) / MiB:.1f} MiB of a {parquet.stat().st_size / MiB:.0f} MiB file, the column"
                f" {column / MiB:.1f} MiB; ratio: time against the local read" + refusals_note(results["pq"])
            ),
        )
    )
    return rows
