"""The "remote analysis server" of the tutorials, written with the server-side helper.

Run it over stdio (the client spawns it)::

    python -m jupyter_fsbroker.examples.analysis_server

or serve Streamable HTTP at ``http://HOST:PORT/mcp``::

    python -m jupyter_fsbroker.examples.analysis_server --http 127.0.0.1:8765

Tools (paths as the notebook shares them, e.g. ``data/sales.csv``):

``profile_csv(path)``
    Streams a CSV of any size in chunks (never the whole file in memory) and
    returns per-column statistics: count, missing, numeric min/max/mean/std,
    distinct count (capped), top values.
``write_report(path)``
    Profiles the CSV and writes a Markdown report next to it
    (``sales.csv`` → ``sales.report.md``).
``atomic_increment(path)``
    Locked read-modify-write of a counter file: ``keepLocked`` read, write,
    unlock.
``watch_changes(path, seconds=5)``
    Reports the change events received for a few seconds.

Each tool asks the user's consent (``files/consent``) for what it needs, the
first time an operation is refused as not granted. A client that does not
advertise ``filesystemBrokering`` gets JSON-RPC error -32603 with SEP-1708's
message from any tool (or already at ``initialize`` with
``--require-brokering``).
"""

from __future__ import annotations

import argparse
import csv
import inspect
import io
import math
import posixpath
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.protocol.server import FilesClient, enable_files, files, run_stdio

__all__ = ["CsvProfiler", "build_server", "main", "render_report", "report_path"]

_Tool = TypeVar("_Tool", bound=Callable[..., Any])

#: Values counted as missing (besides the empty string), compared case-insensitively.
MISSING = frozenset({"na", "n/a", "nan", "null", "none", "-"})
#: Most distinct values counted exactly per column.
DISTINCT_CAP = 10_000
#: Top values reported per column.
TOP_K = 5
#: Largest record (quoted newlines included) the profiler holds while waiting for its end.
MAX_RECORD_CHARS = 16 * 1024 * 1024
#: Most change events ``watch_changes`` reports.
MAX_EVENTS = 1000


class _Column:
    """Running statistics of one column."""

    __slots__ = (
        "count",
        "distinct",
        "distinct_capped",
        "is_text",
        "m2",
        "maximum",
        "mean",
        "minimum",
        "missing",
        "name",
        "numeric",
        "top",
        "top_approximate",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.missing = 0
        self.numeric = 0
        self.is_text = False
        self.minimum = math.inf
        self.maximum = -math.inf
        self.mean = 0.0
        self.m2 = 0.0
        self.distinct: set[str] | None = set()
        self.distinct_capped = False
        self.top: Counter[str] = Counter()
        self.top_approximate = False

    def add(self, raw: str) -> None:
        value = raw.strip()
        if not value or (len(value) <= 4 and value.lower() in MISSING):
            self.missing += 1
            return
        self.count += 1
        if not self.is_text:
            self._add_number(value)
        if self.distinct is not None:
            self.distinct.add(value)
            if len(self.distinct) > DISTINCT_CAP:
                self.distinct, self.distinct_capped = None, True
        self.top[value] += 1
        if len(self.top) > DISTINCT_CAP:
            # Keep the heaviest values; counts of later newcomers start late.
            self.top = Counter(dict(self.top.most_common(DISTINCT_CAP // 10)))
            self.top_approximate = True

    def _add_number(self, value: str) -> None:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            # One value that is not a finite number makes a text column: stop parsing.
            self.is_text = True
            return
        # Welford's running mean and variance.
        self.numeric += 1
        delta = number - self.mean
        self.mean += delta / self.numeric
        self.m2 += delta * (number - self.mean)
        if number < self.minimum:
            self.minimum = number
        if number > self.maximum:
            self.maximum = number

    def result(self) -> dict[str, Any]:
        kind = "empty" if self.count == 0 else "text" if self.is_text else "numeric"
        out: dict[str, Any] = {
            "name": self.name,
            "type": kind,
            "count": self.count,
            "missing": self.missing,
            "distinct": DISTINCT_CAP if self.distinct is None else len(self.distinct),
            "distinct_capped": self.distinct_capped,
            "top": [{"value": v, "count": n} for v, n in self.top.most_common(TOP_K)],
            "top_approximate": self.top_approximate,
        }
        if kind == "numeric":
            out["min"] = self.minimum
            out["max"] = self.maximum
            out["mean"] = self.mean
            out["std"] = math.sqrt(self.m2 / (self.numeric - 1)) if self.numeric > 1 else 0.0
        return out


class CsvProfiler:
    """Per-column statistics of a CSV fed in arbitrary text chunks.

    :meth:`feed` accepts chunks cut anywhere, even inside a quoted field with
    newlines: only complete records are parsed, the rest waits for the next
    chunk. Memory stays bounded by one chunk, one record and the capped
    per-column counters.

    Parameters
    ----------
    delimiter
        The field separator.
    """

    def __init__(self, delimiter: str = ",") -> None:
        self.delimiter = delimiter
        self.columns: list[_Column] = []
        self.rows = 0
        self.ragged_rows = 0
        self.chars = 0
        self._carry = ""
        self._header: list[str] | None = None

    def feed(self, text: str) -> None:
        """Add the next chunk of the file's text."""
        if not self.chars and text.startswith("\ufeff"):
            text = text[1:]
        self.chars += len(text)
        buffer = self._carry + text
        cut = _last_record_end(buffer)
        self._carry = buffer[cut:]
        if len(self._carry) > MAX_RECORD_CHARS:
            raise ValueError("a record is larger than 16 MiB (an unterminated quoted field?)")
        if cut:
            self._parse(buffer[:cut])

    def finish(self) -> dict[str, Any]:
        """Parse what is left and return the statistics."""
        if self._carry:
            self._parse(self._carry)
            self._carry = ""
        return {
            "rows": self.rows,
            "columns": [column.result() for column in self.columns],
            "ragged_rows": self.ragged_rows,
        }

    def _parse(self, text: str) -> None:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=self.delimiter)
        if self._header is None:
            header = next(reader, None)
            if header is None:
                return
            self._header = header
            self.columns = [_Column(name.strip() or f"column_{i + 1}") for i, name in enumerate(header)]
        columns = self.columns
        width = len(columns)
        for row in reader:
            if not row:
                continue
            self.rows += 1
            if len(row) != width:
                self.ragged_rows += 1
            for column, value in zip(columns, row, strict=False):
                column.add(value)
            for column in columns[len(row) :]:
                column.missing += 1


def _last_record_end(text: str) -> int:
    """The index just after the last newline that ends a record (quotes balanced), or 0."""
    end = 0
    inside = False
    start = 0
    while True:
        newline = text.find("\n", start)
        if newline < 0:
            return end
        if text.count('"', start, newline) % 2:
            inside = not inside
        if not inside:
            end = newline + 1
        start = newline + 1


async def profile(
    fs: FilesClient, path: str, *, encoding: str = "utf-8", delimiter: str = ","
) -> dict[str, Any]:
    """Profile the CSV at *path* through *fs*, chunk by chunk.

    Parsing runs in a worker thread while the next chunks are being read.
    """
    profiler = CsvProfiler(delimiter)
    started = time.perf_counter()
    chunks = 0
    async with fs.iter_chunks(path, encoding=encoding) as stream:
        async for text in stream:
            chunks += 1
            await anyio.to_thread.run_sync(profiler.feed, text)
        size = stream.size or 0
    result = await anyio.to_thread.run_sync(profiler.finish)
    return {
        "path": path,
        "bytes": size,
        "chunks": chunks,
        "seconds": round(time.perf_counter() - started, 3),
        **result,
    }


def report_path(path: str) -> str:
    """Where the report of *path* goes: ``data/sales.csv`` → ``data/sales.report.md``."""
    stem, _ = posixpath.splitext(path)
    return f"{stem}.report.md"


def _cell(value: object) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def render_report(stats: dict[str, Any]) -> str:
    """A Markdown report of :func:`profile`'s result."""
    lines = [
        f"# Profile of `{stats['path']}`",
        "",
        f"- Rows: {stats['rows']:,}",
        f"- Columns: {len(stats['columns'])}",
        f"- Size: {stats['bytes']:,} bytes",
        f"- Generated: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by the analysis server",
    ]
    if stats.get("ragged_rows"):
        lines.append(f"- Rows with a different number of fields: {stats['ragged_rows']:,}")
    lines += [
        "",
        "| Column | Type | Count | Missing | Distinct | Min | Max | Mean | Std | Top values |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for column in stats["columns"]:
        distinct = f"≥{column['distinct']:,}" if column["distinct_capped"] else f"{column['distinct']:,}"
        top = ", ".join(f"{_cell(t['value'])} ({t['count']:,})" for t in column["top"])
        numbers = [_cell(column[key]) if key in column else "" for key in ("min", "max", "mean", "std")]
        cells = [_cell(column["name"]), column["type"], f"{column['count']:,}", f"{column['missing']:,}"]
        lines.append("| " + " | ".join([*cells, distinct, *numbers, top]) + " |")
    return "\n".join(lines) + "\n"


def build_server(*, require_brokering: bool = False) -> MCPServer[Any]:
    """The analysis server with its four tools."""
    server: MCPServer[Any] = MCPServer(
        "jupyter-fsbroker-analysis",
        instructions=(
            "Analyses files the user shares from their notebook (SEP-1708 brokered filesystem). "
            "Paths are as the notebook shares them, e.g. 'data/sales.csv'."
        ),
    )
    enable_files(server, require=require_brokering)

    def tool(fn: _Tool) -> _Tool:
        # mcp takes the docstring as it is, indentation and all: clients show it cleaned.
        return server.tool(description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    @tool
    async def profile_csv(path: str, ctx: Context) -> dict[str, Any]:
        """Per-column statistics of a CSV file of any size, read in chunks.

        Returns rows, and for each column: count, missing, distinct (capped),
        top values, and for numeric columns min, max, mean and std.
        """
        fs = files(ctx, consent_message=f"Profile {path}: read it and compute per-column statistics")
        async with fs:
            return await profile(fs, path)

    @tool
    async def write_report(path: str, ctx: Context) -> dict[str, Any]:
        """Profile a CSV and write a Markdown report next to it (sales.csv -> sales.report.md)."""
        report = report_path(path)
        fs = files(
            ctx,
            consent_message=f"Profile {path} and write the report {report}",
            consent_access={path: ["read"], report: ["write"]},  # never write on the data itself
        )
        async with fs:
            stats = await profile(fs, path)
            written = await fs.write_text(report, render_report(stats))
        return {"report": report, "bytes": written.bytes_written, "rows": stats["rows"]}

    @tool
    async def atomic_increment(path: str, ctx: Context) -> dict[str, Any]:
        """Add one to the integer in a counter file (created at 0), under an exclusive lock."""
        fs = files(ctx, consent_message=f"Update the counter {path}", consent_operations=("read", "write"))
        async with fs, fs.lock(path, create=True) as lock_id:
            text = await fs.read_text(path, lock_id=lock_id)
            value = int(text.strip() or "0") + 1
            await fs.write_text(path, f"{value}\n", lock_id=lock_id)
        return {"path": path, "value": value}

    @tool
    async def watch_changes(path: str, ctx: Context, seconds: float = 5.0) -> dict[str, Any]:
        """Watch a file or folder (recursively) for a few seconds; report the changes seen."""
        seconds = max(0.0, min(float(seconds), 300.0))
        fs = files(ctx, consent_message=f"Watch {path} for changes for {seconds:g} seconds")
        events: list[dict[str, Any]] = []
        async with fs, fs.watch(path, recursive=True) as watch:
            with anyio.move_on_after(seconds):
                async for event in watch:
                    events.append(asdict(event))
                    if len(events) >= MAX_EVENTS:
                        break
        return {"path": path, "seconds": seconds, "count": len(events), "events": events}

    return server


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: stdio by default, ``--http HOST:PORT`` for Streamable HTTP at ``/mcp``."""
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_fsbroker.examples.analysis_server",
        description="An MCP analysis server that reads the notebook's files through SEP-1708 brokering.",
    )
    parser.add_argument(
        "--http", type=_host_port, metavar="HOST:PORT", help="serve Streamable HTTP at http://HOST:PORT/mcp"
    )
    parser.add_argument(
        "--require-brokering",
        action="store_true",
        help="refuse clients without the filesystemBrokering capability already at initialize",
    )
    args = parser.parse_args(argv)
    server = build_server(require_brokering=args.require_brokering)
    if args.http is None:
        run_stdio(server)
    else:
        host, port = args.http
        print(f"analysis server: http://{host}:{port}/mcp", file=sys.stderr, flush=True)
        server.run("streamable-http", host=host, port=port)


if __name__ == "__main__":
    main()
