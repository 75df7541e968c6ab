"""``broker.trash()``: the trash as the notebook shows it — :class:`NotebookTrash` and :class:`TrashListing`.

::

    trash = broker.trash()
    trash                                   # a table: newest first, with ids
    trash.restore("1a2b3c4d")               # back where it was (the id's last 8 characters do)
    trash.restore(entry, to="~/elsewhere")  # or somewhere else; overwrite=True replaces
    trash.empty(older_than=7 * 86400)       # delete for good what is older than a week

A thin view over the core's :class:`~jupyter_fsbroker.core.trashcan.TrashCan`:
every restore and every entry emptied is audited there as the user's action,
and the retention is the broker's (``FSBroker.trash_max_age``,
``FSBroker.trash_max_bytes``).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterable
from typing import Any

from ..console.status import trash_text
from ..core.retention import Retention
from ..core.trashcan import TrashCan
from ..core.trashentry import TrashEntry
from ..widgets.markup import trash_html

__all__ = ["NotebookTrash", "TrashListing"]


class TrashListing(tuple[TrashEntry, ...]):
    """The trash's entries, newest first: a tuple of ``TrashEntry`` that shows as a table.

    Attributes
    ----------
    retention
        The retention in force when it was listed.
    """

    retention: Retention | None

    def __new__(cls, entries: Iterable[TrashEntry] = (), retention: Retention | None = None) -> TrashListing:
        listing = super().__new__(cls, entries)
        listing.retention = retention
        return listing

    def __repr__(self) -> str:
        return trash_text(self, time.time(), self.retention)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("TrashListing(...)" if cycle else repr(self))

    def _repr_html_(self) -> str:
        return trash_html(self, time.time(), self.retention)


class NotebookTrash:
    """The trash of a notebook's broker: list, restore, empty.

    Get it with ``broker.trash()``. It shows as its listing.

    Parameters
    ----------
    trash
        The core broker's trash.
    """

    def __init__(self, trash: TrashCan) -> None:
        self._trash = trash

    @property
    def directory(self) -> str:
        """Where the trash keeps its entries."""
        return self._trash.directory

    @property
    def retention(self) -> Retention:
        """How long and how much it keeps (seconds, bytes)."""
        return self._trash.retention

    def list(self) -> TrashListing:
        """The entries, newest first."""
        return TrashListing(self._trash.list(), self._trash.retention)

    def restore(
        self, entry: TrashEntry | str, *, to: str | os.PathLike[str] | None = None, overwrite: bool = False
    ) -> str:
        """Put *entry* back where it was deleted from (or at *to*); return where it is now.

        Parameters
        ----------
        entry
            An entry of :meth:`list`, its id, or the last 8 characters of its id.
        to
            Another place (``~`` and relative paths are expanded; an existing
            folder receives it under its own name).
        overwrite
            Replace what is there now (for good); without it nothing is replaced.

        Raises
        ------
        ConfigError
            No such entry, something is in the way, or the place cannot be
            written. The entry then stays in the trash.
        """
        return self._trash.restore(entry, to=to, overwrite=overwrite)

    def empty(self, *, older_than: float | datetime.timedelta | None = None) -> int:
        """Delete entries for good and return how many: all, or those deleted more than *older_than* ago.

        Parameters
        ----------
        older_than
            Seconds, or a :class:`~datetime.timedelta`.

        Raises
        ------
        ConfigError
            *older_than* is negative.
        """
        return len(self._trash.empty(older_than=older_than))

    def __repr__(self) -> str:
        return repr(self.list())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("NotebookTrash(...)" if cycle else repr(self))

    def _repr_html_(self) -> str:
        return self.list()._repr_html_()
