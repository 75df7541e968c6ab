"""Per-column statistics of a CSV with pyarrow: the profile of :class:`.csvstream.CsvProfiler`, at C speed.

:func:`profile_arrow` streams the file through ``pyarrow.csv.open_csv`` in
record batches and answers exactly what the standard-library profiler answers
(rows, and per column type, count, missing, distinct, top values and the
numeric min, max, mean and std), with the same rules: values stripped, the same
missing markers, a column numeric while every present value is a finite
number. Means and standard deviations are combined batch by batch (Chan's
parallel form of Welford's), so they equal the standard library's up to float
rounding; the top values are exact unless the column has more than
:data:`~.csvstream.DISTINCT_CAP` distinct values (``top_approximate``), where
both keep only the heaviest ones (this one counts on only those, the standard
library lets newcomers in late).

Every value is read as text and converted here, so that a number as Arrow
parses it (``pyarrow.compute.cast``) is what makes a column numeric. A file
the Arrow reader does not take as a table — rows with a different number of
fields, text that is not UTF-8, an empty file — raises
:class:`NotTabular`, and the caller profiles it with the standard library,
which reports such files as they are. A number Python's ``float`` takes and
Arrow does not (``1_000``, digits of other scripts) makes the column text here.

:func:`profile_parquet` profiles chosen columns of a Parquet file the same
way, reading only their column chunks. Nothing here talks to a client.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .csvstream import DISTINCT_CAP, MISSING, _Column

__all__ = ["BATCH_BYTES", "NotTabular", "profile_arrow", "profile_parquet"]

#: Bytes of the file each record batch is parsed from (Arrow's block size).
BATCH_BYTES = 1024 * 1024
#: Bytes read to find a CSV's header: only its first record is wanted.
_HEADER_BYTES = 64 * 1024


def _spellings(word: str) -> set[str]:
    return {"".join(chars) for chars in itertools.product(*({c.lower(), c.upper()} for c in word))}


#: The missing markers in every case (the standard library lowers each value; a set lookup is
#: far cheaper than lowering a whole column), and the empty value.
_MISSING_SET = pa.array(sorted({""}.union(*map(_spellings, MISSING))), pa.string())


class NotTabular(ValueError):
    """The Arrow reader does not take the file as a table; the standard library's profiler will."""


class _ArrowColumn(_Column):
    """Running statistics of one column, fed Arrow string arrays a batch at a time."""

    __slots__ = ("_kept",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        #: The values still counted once the top values are approximate.
        self._kept = _MISSING_SET

    def add(self, raw: pa.Array) -> None:
        values = pc.utf8_trim_whitespace(raw.drop_null() if raw.null_count else raw)
        present = pc.filter(values, pc.invert(pc.is_in(values, value_set=_MISSING_SET)))
        self.missing += len(raw) - len(present)
        if not len(present):
            return
        self.count += len(present)
        if not self.is_text:
            self._add_numbers(present)
        if self.top_approximate:
            # Past the cap only the values kept are counted on: counting every newcomer of a
            # column of unique values (an id) would cost more than all the rest of the profile.
            present = pc.filter(present, pc.is_in(present, value_set=self._kept))
        counts = pc.value_counts(present)
        # In order of first appearance, as the standard library's Counter sees them: ties in the
        # top values are broken the same way.
        seen = counts.field("values").to_pylist()
        if self.distinct is not None:
            self.distinct.update(seen)
            if len(self.distinct) > DISTINCT_CAP:
                self.distinct, self.distinct_capped = None, True
        self.top.update(dict(zip(seen, counts.field("counts").to_pylist(), strict=True)))
        if len(self.top) > DISTINCT_CAP:
            self.top = Counter(dict(self.top.most_common(DISTINCT_CAP // 10)))
            self.top_approximate = True
            self._kept = pa.array(list(self.top), pa.string())

    def _add_numbers(self, present: pa.Array) -> None:
        try:
            numbers = pc.cast(present, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            self.is_text = True
            return
        if not pc.all(pc.is_finite(numbers)).as_py():
            self.is_text = True
            return
        x = numbers.to_numpy(zero_copy_only=False)
        n_b = len(x)
        mean_b = float(x.mean())
        m2_b = float(((x - mean_b) ** 2).sum())
        n = self.numeric + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.numeric * n_b / n
        self.numeric = n
        self.minimum = min(self.minimum, float(x.min()))
        self.maximum = max(self.maximum, float(x.max()))


def _parse_options(delimiter: str) -> Any:
    # Quoted fields may hold newlines (the standard library's reader takes them too).
    return pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)


def _profile_batches(names: list[str], batches: Iterable[Any]) -> tuple[dict[str, Any], int]:
    columns = [_ArrowColumn(name.strip() or f"column_{i + 1}") for i, name in enumerate(names)]
    rows = count = 0
    for batch in batches:
        count += 1
        rows += batch.num_rows
        for column, array in zip(columns, batch.columns, strict=True):
            column.add(array if pa.types.is_string(array.type) else pc.cast(array, pa.string()))
    return {"rows": rows, "columns": [c.result() for c in columns], "ragged_rows": 0}, count


def profile_arrow(
    open_file: Callable[[int], IO[bytes]], *, delimiter: str = ",", batch_bytes: int = BATCH_BYTES
) -> tuple[dict[str, Any], int]:
    """The profile of a CSV, read with pyarrow in record batches, and the number of batches.

    Parameters
    ----------
    open_file
        Called with a block size, returns a new binary file object of the CSV
        (called twice: a small block for the header, then for the data).
    delimiter
        The field separator.
    batch_bytes
        Bytes of the file per record batch.

    Returns
    -------
    tuple
        ``(profile, batches)``: the profile as :meth:`.CsvProfiler.finish` answers it.

    Raises
    ------
    NotTabular
        The Arrow reader does not take the file (ragged rows, not UTF-8, empty...).
    """
    try:
        with open_file(_HEADER_BYTES) as probe:
            names = _header(probe, delimiter)
        convert = pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        read = pacsv.ReadOptions(block_size=batch_bytes)
        with open_file(batch_bytes) as f:
            reader = pacsv.open_csv(
                f, read_options=read, parse_options=_parse_options(delimiter), convert_options=convert
            )
            with reader:
                return _profile_batches(names, reader)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotTabular(str(exc)) from exc


def _header(probe: IO[bytes], delimiter: str) -> list[str]:
    """The column names of the CSV (its first record), as Arrow reads them."""
    read = pacsv.ReadOptions(block_size=_HEADER_BYTES)
    with pacsv.open_csv(probe, read_options=read, parse_options=_parse_options(delimiter)) as reader:
        names: list[str] = reader.schema.names
    return names


def profile_parquet(
    source: IO[bytes], columns: Sequence[str] | None = None, *, batch_rows: int = 64 * 1024
) -> tuple[dict[str, Any], int]:
    """The profile of some columns of a Parquet file (all if *columns* is ``None``), and its batches.

    Only the column chunks of *columns* are read from *source* (and the footer).
    Each value is profiled as its text (``pyarrow.compute.cast`` to string), so
    that a CSV written as Parquet profiles as the CSV did: nulls and ``NaN``
    count as missing, numbers give min, max, mean and std.

    Raises
    ------
    ValueError
        *columns* names a column the file does not have.
    """
    file = pq.ParquetFile(source)
    names = file.schema_arrow.names
    wanted = list(names if columns is None else columns)
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise ValueError(f"no column named {unknown[0]!r} (columns: {', '.join(names)})")
    return _profile_batches(wanted, file.iter_batches(batch_size=batch_rows, columns=wanted))
