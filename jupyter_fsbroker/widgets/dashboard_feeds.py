"""The dashboard's feeds: the activity log, the change feed and what servers said, newest first.

A feed keeps the tail of what the broker reported (its listener runs on the
reporting thread and only records) and renders it into one scrolling HTML
widget on the rendering thread. :class:`ServerLogFeed` follows the log of every
connection shown and stops following them at :meth:`ServerLogFeed.close`.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.status import ConnectionView
from ..core.audit import AuditRecord
from ..core.serverlog import LogEntry, ServerLog
from ..core.watch import ChangeEvent
from .markup import activity_html, changes_html, server_log_html
from .rows import set_value

__all__ = ["ActivityFeed", "ChangesFeed", "ServerLogFeed"]

_SCROLL = {"max_height": "16em", "overflow": "auto"}


def _feed_html(css: str) -> Any:
    html = widgets.HTML(layout=widgets.Layout(**_SCROLL))
    html.add_class(css)
    return html


class ActivityFeed:
    """The last audit records (DOM class ``fsbroker-activity``).

    Parameters
    ----------
    keep
        How many records it keeps.
    """

    def __init__(self, keep: int) -> None:
        self._lock = threading.Lock()
        self._records: collections.deque[AuditRecord] = collections.deque(maxlen=max(1, keep))
        self.html = _feed_html("fsbroker-activity")

    @property
    def keep(self) -> int:
        """How many records it keeps."""
        return self._records.maxlen or 1

    def add(self, record: AuditRecord) -> None:
        """Record a new audit record (any thread)."""
        with self._lock:
            self._records.append(record)

    def seed(self, known: Iterable[AuditRecord]) -> None:
        """Start from the records there were, keeping those that came since subscribing."""
        known = list(known)
        with self._lock:
            fresh = list(self._records)
            self._records.clear()
            self._records.extend(known)
            seen = {id(record) for record in known}
            self._records.extend(record for record in fresh if id(record) not in seen)

    def render(self) -> int:
        """Show the records kept; how many there are."""
        with self._lock:
            records = list(self._records)
        set_value(self.html, activity_html(records))
        return len(records)


@dataclass(frozen=True)
class _Change:
    server: str
    event: ChangeEvent


class ChangesFeed:
    """The last change events sent to servers (DOM class ``fsbroker-changes``).

    Parameters
    ----------
    keep
        How many events it keeps.
    """

    def __init__(self, keep: int) -> None:
        self._lock = threading.Lock()
        self._changes: collections.deque[_Change] = collections.deque(maxlen=max(1, keep))
        self.html = _feed_html("fsbroker-changes")

    def add(self, server: str, event: ChangeEvent) -> None:
        """Record a change event sent to *server* (any thread)."""
        with self._lock:
            self._changes.append(_Change(server, event))

    def render(self) -> int:
        """Show the events kept; how many there are."""
        with self._lock:
            changes = [(c.server, c.event) for c in self._changes]
        set_value(self.html, changes_html(changes))
        return len(changes)


class ServerLogFeed:
    """What the servers said, merged in time order (DOM class ``fsbroker-server-log``).

    Parameters
    ----------
    keep
        How many entries it shows.
    changed
        Called (on the logging thread) when a followed log gets an entry.
    """

    def __init__(self, keep: int, changed: Callable[[], None]) -> None:
        self._keep = max(1, keep)
        self._changed = changed
        self._lock = threading.Lock()
        self._closed = False
        self._followed: dict[int, tuple[ServerLog, Callable[[], None]]] = {}
        self.html = _feed_html("fsbroker-server-log")

    def render(self, views: Iterable[ConnectionView]) -> int:
        """Show the last entries of every connection's log (following new logs); how many are shown."""
        merged: list[tuple[str, LogEntry]] = []
        for view in views:
            server_log = getattr(view, "log", None)
            if not isinstance(server_log, ServerLog):
                continue
            key = id(server_log)
            with self._lock:
                if not self._closed and key not in self._followed:
                    self._followed[key] = (server_log, server_log.follow(self._on_entry))
            name = str(view.name)
            merged.extend((name, entry) for entry in server_log.entries(self._keep))
        merged.sort(key=lambda item: item[1].time)
        entries = merged[-self._keep :]
        set_value(self.html, server_log_html(entries))
        return len(entries)

    def _on_entry(self, *args: object) -> None:
        del args
        self._changed()

    def close(self) -> None:
        """Stop following every log. Idempotent."""
        with self._lock:
            self._closed = True
            stops = [stop for _, stop in self._followed.values()]
            self._followed.clear()
        for stop in stops:
            stop()
