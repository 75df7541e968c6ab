"""Tables for data work: finding a table in a result's data, and showing it as HTML or a DataFrame.

:func:`find_table` recognises the two shapes a JSON result takes when it is a
table — a list of records (``[{"name": "a", "n": 1}, ...]``) or columns
(``{"name": ["a", "b"], "n": [1, 2]}``) — and, in a dict that is neither, its
one list of records (``profile_csv``'s ``columns``). :func:`html_table` renders
one with text left-aligned and numbers right-aligned, as every table the package
shows does; :func:`to_dataframe` makes a :class:`pandas.DataFrame` of one, and
pandas is imported there only (it is optional).

Plain functions of plain values: nothing here talks to a server.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Table", "find_table", "html_table", "to_dataframe"]

#: Rows an HTML table shows before it says how many more there are.
SHOWN_ROWS = 200
_CELL = "padding:1px 10px 1px 0;vertical-align:top;text-align:"


@dataclass(frozen=True)
class Table:
    """A table: its column names and its rows (one value per column, ``None`` where missing).

    Attributes
    ----------
    columns
        The column names, in the order they first appear.
    rows
        The rows.
    key
        Where in the data the table was found (``"columns"``), ``""`` when it is the data itself.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    key: str = ""


def _records(value: Any) -> Table | None:
    if not isinstance(value, list) or not value or not all(isinstance(r, Mapping) for r in value):
        return None
    columns: dict[str, None] = {}
    for record in value:
        columns.update(dict.fromkeys(map(str, record)))
    names = tuple(columns)
    return Table(names, tuple(tuple(r.get(c) for c in names) for r in value))


def _columns(value: Any) -> Table | None:
    if not isinstance(value, Mapping) or not value:
        return None
    lists = list(value.values())
    if not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
        return None
    return Table(tuple(map(str, value)), tuple(zip(*lists, strict=True)))


def find_table(data: Any) -> Table | None:
    """The table in *data*: records, columns, or a dict's one list of records; ``None`` if there is none."""
    table = _records(data) or _columns(data)
    if table is not None or not isinstance(data, Mapping):
        return table
    found = [(str(k), t) for k, v in data.items() if (t := _records(v)) is not None]
    if len(found) != 1:
        return None
    key, table = found[0]
    return Table(table.columns, table.rows, key)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, css_class: str) -> str:
    """*rows* as an HTML table: text left-aligned, numbers right-aligned; the first rows only.

    A column is right-aligned when every value in it is a number (or missing).
    """
    numeric = [
        any(_numeric(row[i]) for row in rows) and all(row[i] is None or _numeric(row[i]) for row in rows)
        for i in range(len(columns))
    ]
    align = [_CELL + ("right" if n else "left") for n in numeric]
    head = "".join(f'<th style="{a}">{html.escape(c)}</th>' for c, a in zip(columns, align, strict=True))
    body = "".join(
        "<tr>"
        + "".join(f'<td style="{a}">{html.escape(_shown(v))}</td>' for v, a in zip(row, align, strict=True))
        + "</tr>"
        for row in rows[:SHOWN_ROWS]
    )
    more = len(rows) - SHOWN_ROWS
    tail = (
        f'<tr><td colspan="{len(columns)}" style="{_CELL}left">… {more:,} more rows</td></tr>'
        if more > 0
        else ""
    )
    return f'<table class="{css_class}"><tr>{head}</tr>{body}{tail}</table>'


def to_dataframe(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, times: Sequence[str] = ()) -> Any:
    """A :class:`pandas.DataFrame` of the table; the columns *times* (``time.time()``) as UTC timestamps.

    Raises
    ------
    ImportError
        pandas is not installed (it is optional: ``pip install pandas``).
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas, which is not installed: pip install pandas") from None
    frame = pd.DataFrame.from_records([tuple(r) for r in rows], columns=list(columns))
    for name in times:
        frame[name] = pd.to_datetime(frame[name], unit="s", utc=True)
    return frame
