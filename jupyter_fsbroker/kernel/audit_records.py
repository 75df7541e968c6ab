"""The audit log as the notebook reads it: :class:`AuditRecords`, what ``broker.audit()`` returns.

A tuple of the core's frozen :class:`~jupyter_fsbroker.core.audit.AuditRecord`
values, newest last, that shows as a table and turns into a
:class:`pandas.DataFrame` (:meth:`AuditRecords.to_pandas`) when pandas is
installed. A snapshot: records appended later are not in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..console.format import clock_text
from ..core.audit import AuditRecord
from ..core.outcomes import outcomes
from .tables import html_table, to_dataframe

__all__ = ["AuditRecords"]

#: The record's fields, in the order the table shows them.
COLUMNS = tuple(f.name for f in dataclasses.fields(AuditRecord))
#: The columns the HTML table shows (the rest are in the DataFrame).
_SHOWN = ("time", "server", "method", "path", "decision", "error", "reason", "cause", "bytes", "duration_ms")
#: Where the table shows each record's outcome (:mod:`..core.outcomes`), a column of its own.
_OUTCOME_AT = _SHOWN.index("decision") + 1


class AuditRecords(tuple[AuditRecord, ...]):
    """What happened to the servers' ``files/*`` requests (and the user's own acts), newest last."""

    def __new__(cls, records: Iterable[AuditRecord] = ()) -> AuditRecords:
        return super().__new__(cls, records)

    def to_pandas(self) -> Any:
        """The records as a :class:`pandas.DataFrame`, one row per record and one column per field.

        ``time`` is a timezone-aware UTC timestamp.

        Raises
        ------
        ImportError
            pandas is not installed.
        """
        return to_dataframe(COLUMNS, [dataclasses.astuple(r) for r in self], times=("time",))

    def _rows(self) -> list[tuple[Any, ...]]:
        rows = []
        for record, said in zip(self, outcomes(self), strict=True):
            cells = [clock_text(record.time) if name == "time" else getattr(record, name) for name in _SHOWN]
            cells.insert(_OUTCOME_AT, said.word)
            rows.append(tuple(cells))
        return rows

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if not self:
            printer.text("(no audit records)")
            return
        printer.text(
            "\n".join(
                f"{clock_text(r.time)}  {r.server}  {r.method}  {r.path or ''}  {said.word}"
                + (f"  {r.error}" if r.error else "")
                for r, said in zip(self, outcomes(self), strict=True)
            )
        )

    def _repr_html_(self) -> str:
        if not self:
            return "<div>(no audit records)</div>"
        head = (*_SHOWN[:_OUTCOME_AT], "outcome", *_SHOWN[_OUTCOME_AT:])
        return html_table(head, self._rows(), css_class="fsbroker-audit")
