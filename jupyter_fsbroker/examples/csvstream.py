"""Reading CSV files as a stream: per-column statistics, filtered rows, a Markdown report.

The CSV side of the example analysis server (:mod:`.analysis_server`): text
arrives in chunks cut anywhere (even inside a quoted field with newlines), and
only complete records are parsed, so memory stays bounded by a chunk, a record
and capped counters whatever the file's size. Plain standard library: nothing
here reads a file or talks to a client.
"""

from __future__ import annotations

import csv
import io
import math
import posixpath
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["CsvProfiler", "RowFilter", "render_report", "report_path"]

#: Values counted as missing (besides the empty string), compared case-insensitively.
MISSING = frozenset({"na", "n/a", "nan", "null", "none", "-"})
#: Most distinct values counted exactly per column.
DISTINCT_CAP = 10_000
#: Top values reported per column.
TOP_K = 5
#: Largest record (quoted newlines included) the profiler holds while waiting for its end.
MAX_RECORD_CHARS = 16 * 1024 * 1024


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

    def add(self, raw: Sequence[str]) -> None:
        """Add the column's next values, in file order (a batch: C-speed where the result allows)."""
        values = list(map(str.strip, raw))
        present = [v for v in values if v and not (len(v) <= 4 and v.lower() in MISSING)]
        self.missing += len(values) - len(present)
        if not present:
            return
        self.count += len(present)
        if not self.is_text:
            self._add_numbers(present)
        if self.distinct is not None:
            self.distinct.update(present)
            if len(self.distinct) > DISTINCT_CAP:
                self.distinct, self.distinct_capped = None, True
        self.top.update(present)
        if len(self.top) > DISTINCT_CAP:
            # Keep the heaviest values; counts of later newcomers start late.
            self.top = Counter(dict(self.top.most_common(DISTINCT_CAP // 10)))
            self.top_approximate = True

    def _add_numbers(self, values: list[str]) -> None:
        try:
            numbers = list(map(float, values))
        except ValueError:
            numbers = [math.nan]
        if not all(map(math.isfinite, numbers)):
            # One value that is not a finite number makes a text column: stop parsing.
            self.is_text = True
            return
        # Welford's running mean and variance, value by value: the result does not depend on
        # where the chunks were cut.
        n, mean, m2 = self.numeric, self.mean, self.m2
        for number in numbers:
            n += 1
            delta = number - mean
            mean += delta / n
            m2 += delta * (number - mean)
        self.numeric, self.mean, self.m2 = n, mean, m2
        self.minimum = min(self.minimum, min(numbers))
        self.maximum = max(self.maximum, max(numbers))

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


class _Records:
    """Cuts text fed in arbitrary chunks into complete CSV records (quoted newlines kept inside)."""

    def __init__(self) -> None:
        self.chars = 0
        self._carry = ""

    def complete(self, text: str) -> str:
        """The records that *text* completes (possibly ``""``); the rest waits for the next chunk."""
        if not self.chars and text.startswith("\ufeff"):
            text = text[1:]
        self.chars += len(text)
        buffer = self._carry + text
        cut = _last_record_end(buffer)
        self._carry = buffer[cut:]
        if len(self._carry) > MAX_RECORD_CHARS:
            raise ValueError("a record is larger than 16 MiB (an unterminated quoted field?)")
        return buffer[:cut]

    def rest(self) -> str:
        """What is left at the end of the file (a last record without a newline)."""
        rest, self._carry = self._carry, ""
        return rest


class CsvProfiler:
    """Per-column statistics of a CSV fed in arbitrary text chunks.

    :meth:`feed` accepts chunks cut anywhere, even inside a quoted field with
    newlines: only complete records are parsed, the rest waits for the next
    chunk. Memory stays bounded by one chunk, one record and the capped
    per-column counters, and the result does not depend on where the chunks
    were cut.

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
        self._records = _Records()
        self._header: list[str] | None = None

    @property
    def chars(self) -> int:
        """Characters fed so far."""
        return self._records.chars

    def feed(self, text: str) -> None:
        """Add the next chunk of the file's text."""
        records = self._records.complete(text)
        if records:
            self._parse(records)

    def finish(self) -> dict[str, Any]:
        """Parse what is left and return the statistics."""
        rest = self._records.rest()
        if rest:
            self._parse(rest)
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
        rows = [row for row in reader if row]
        if not rows:
            return
        self.rows += len(rows)
        if set(map(len, rows)) != {width}:
            for i, row in enumerate(rows):
                if len(row) != width:
                    self.ragged_rows += 1
                    # Extra fields are ignored; absent ones count as missing (as an empty value does).
                    rows[i] = (row + [""] * (width - len(row)))[:width]
        for column, values in zip(columns, zip(*rows, strict=True), strict=True):
            column.add(values)


class RowFilter:
    """The rows of a CSV whose *column* equals *value*, from text fed in arbitrary chunks.

    :meth:`feed` returns the CSV text of the matching rows that the chunk
    completes (the header first), :meth:`finish` the rest; the values are
    compared after stripping surrounding spaces, as the profiler sees them.

    Parameters
    ----------
    column
        The column's name, as the header row writes it.
    value
        The value to keep.
    delimiter
        The field separator.
    """

    def __init__(self, column: str, value: str, delimiter: str = ",") -> None:
        self.column = column
        self.value = value.strip()
        self.delimiter = delimiter
        self.rows = 0
        self.matched = 0
        self._records = _Records()
        self._index: int | None = None

    def feed(self, text: str) -> str:
        """Add the next chunk of the file's text; return the CSV text of the rows it completes."""
        records = self._records.complete(text)
        return self._filter(records) if records else ""

    def finish(self) -> str:
        """The CSV text of the matching rows left at the end (and the header, for an empty file)."""
        return self._filter(self._records.rest())

    def _filter(self, text: str) -> str:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=self.delimiter)
        out = io.StringIO()
        writer = csv.writer(out, delimiter=self.delimiter, lineterminator="\n")
        if self._index is None:
            header = next(reader, None)
            if header is None:
                return ""
            names = [name.strip() for name in header]
            if self.column not in names:
                raise ValueError(f"no column named {self.column!r} (columns: {', '.join(names)})")
            self._index = names.index(self.column)
            writer.writerow(header)
        index, value = self._index, self.value
        rows = [row for row in reader if row]
        self.rows += len(rows)
        kept = [row for row in rows if len(row) > index and row[index].strip() == value]
        self.matched += len(kept)
        writer.writerows(kept)
        return out.getvalue()


def _last_record_end(text: str) -> int:
    """The index just after the last newline that ends a record (quotes balanced), or 0."""
    if '"' not in text:  # no quoted field: every newline ends a record
        return text.rfind("\n") + 1
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


def report_path(path: str) -> str:
    """Where the report of *path* goes: ``data/sales.csv`` → ``data/sales.report.md``."""
    stem, _ = posixpath.splitext(path)
    return f"{stem}.report.md"


def _cell(value: object) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def render_report(stats: dict[str, Any], generated: float | None = None) -> str:
    """A Markdown report of a profile (what the server's ``profile_csv`` tool returns).

    *generated*: the ``time.time()`` the report says it was made at (default: now).
    """
    lines = [
        f"# Profile of `{stats['path']}`",
        "",
        f"- Rows: {stats['rows']:,}",
        f"- Columns: {len(stats['columns'])}",
        f"- Size: {stats['bytes']:,} bytes",
        f"- Generated: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(generated))} by the analysis server",
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
