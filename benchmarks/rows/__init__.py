"""The rows of ``run.py``'s table, one module per measurement, in the order of the table.

Each module has ``NUMBERS`` (the rows it fills) and ``measure(bench)``, which
returns those rows (:class:`report.Row`) judged against their targets. A module
fills two rows only where one measurement serves both (a shared baseline, a
shared fresh kernel).
"""

from __future__ import annotations

from types import ModuleType

from . import kernel_start, listing, media, memory, responsiveness, small_reads, transfer, watch

__all__ = ["MODULES"]

#: In the order of the table.
MODULES: tuple[ModuleType, ...] = (
    transfer,  # 1, 2
    media,  # 3
    small_reads,  # 4
    listing,  # 5
    kernel_start,  # 6, 7
    watch,  # 8
    memory,  # 9
    responsiveness,  # 10
)
