"""What a notebook broker does between cells: :class:`CellEvents`.

Before each cell, an import of the warm-up still running ends first (a cell
never races it, :mod:`.warming`); after each cell, the warm-up starts (once)
and the notices the views queued meanwhile (:meth:`.views.NotebookViews.take_notices`)
are printed on stderr, in that cell's output. Without a shell's events (a
script), the warm-up starts at once.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from ..core.resource import Closeable
from .views import NotebookViews
from .warming import WarmUp

__all__ = ["CellEvents"]


class CellEvents(Closeable):
    """The notebook broker's hooks on IPython's ``pre_run_cell`` and ``post_run_cell``.

    Parameters
    ----------
    shell
        The IPython shell, if any (its ``events`` are hooked).
    warm
        The notebook broker's warm-up.
    views
        The notebook broker's views (their notices).
    """

    def __init__(self, shell: Any | None, *, warm: WarmUp, views: NotebookViews) -> None:
        self._warm = warm
        self._views = views
        self._events = getattr(shell, "events", None)
        if self._events is not None:
            self._events.register("pre_run_cell", self._before_cell)
            self._events.register("post_run_cell", self._after_cell)
        else:
            self._warm.start()

    def _before_cell(self, *args: object) -> None:
        """Before each cell: let an import of the warm-up end first (see :mod:`.warming`)."""
        self._warm.wait()

    def _after_cell(self, *args: object) -> None:
        """After each cell: start the warm-up (once), print what the views noticed meanwhile."""
        self._warm.start()
        for notice in self._views.take_notices():
            print(notice, file=sys.stderr)

    def close(self) -> None:
        """Unhook from the shell's events. Idempotent."""
        if self._events is not None:
            for event, callback in (("pre_run_cell", self._before_cell), ("post_run_cell", self._after_cell)):
                with contextlib.suppress(ValueError):  # never registered, or unregistered already
                    self._events.unregister(event, callback)
