"""The watch events a connection keeps for ``files/changes``: watching without notifications.

The 2026-07-28 wire has no server-bound notifications, so a server learns about changes by
asking (PROTOCOL.md, "Watching: ``files/changes``"). A :class:`ChangeLog` keeps, per watch of
one connection, the events its watch delivered (already coalesced, filtered and accepted by the
watch's dispatcher), at most :data:`KEPT_PER_WATCH` of them: the oldest go first, and the next
answer from before them says ``dropped``. A cursor names a position in a watch's sequence of
events (``e`` and the number of events before it); it carries nothing secret and is checked
against the watch it is given with.

A connection that speaks the 2026-07-28 era keeps every watch's events from its start
(:meth:`ChangeLog.keep_all`); one that gets notifications keeps a watch's events only from its
first ``files/changes``, since the notifications carried the earlier ones.

Events come from the watch dispatcher's thread; waiting happens on an event loop
(:meth:`ChangeLog.await_changes`, holding no thread) or on a worker thread
(:meth:`ChangeLog.wait_changes`). Nothing here touches the file system.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .changes import ChangeEvent
from .errors import InvalidParams

__all__ = ["KEPT_PER_WATCH", "MAX_WAIT_MS", "ChangeLog", "Changes"]

#: The most events kept per watch; older ones are dropped first.
KEPT_PER_WATCH = 10_000
#: The longest a ``files/changes`` waits for its first event.
MAX_WAIT_MS = 30_000

_CURSOR = re.compile(r"e(\d{1,12})")


@dataclass(frozen=True)
class Changes:
    """One answer of ``files/changes``: the events after a cursor, the next cursor, and whether
    events after the cursor were dropped."""

    events: tuple[ChangeEvent, ...]
    cursor: str
    dropped: bool

    def to_result(self) -> dict[str, object]:
        """The ``files/changes`` result."""
        return {
            "events": [event.to_params() for event in self.events],
            "cursor": self.cursor,
            "dropped": self.dropped,
        }


@dataclass
class _Kept:
    """The events of one watch: ``start`` is the position of ``events[0]``."""

    events: deque[ChangeEvent] = field(default_factory=deque)
    start: int = 0
    wakers: set[Callable[[], None]] = field(default_factory=set)

    @property
    def end(self) -> int:
        return self.start + len(self.events)


class ChangeLog:
    """The events kept for ``files/changes``, per watch of one connection (thread-safe).

    Parameters
    ----------
    capacity
        The most events kept per watch.
    """

    def __init__(self, capacity: int = KEPT_PER_WATCH) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._kept: dict[str, _Kept] = {}
        self._all = False

    def keep_all(self) -> None:
        """Keep the events of every watch from its start (the connection has no notifications)."""
        self._all = True

    def add(self, event: ChangeEvent) -> None:
        """The dispatcher's thread: keep *event* if its watch is kept, and wake who waits for it."""
        with self._lock:
            kept = self._kept.get(event.watch_id)
            if kept is None:
                if not self._all:
                    return
                kept = self._kept[event.watch_id] = _Kept()
            kept.events.append(event)
            if len(kept.events) > self._capacity:
                kept.events.popleft()
                kept.start += 1
            wakers = list(kept.wakers)
        for wake in wakers:
            wake()

    def forget(self, watch_id: str) -> None:
        """The watch ended: drop its events and release who waits on it."""
        with self._lock:
            kept = self._kept.pop(watch_id, None)
        for wake in list(kept.wakers) if kept is not None else ():
            wake()

    def clear(self) -> None:
        """The connection ended: drop everything and release every waiter."""
        with self._lock:
            gone = list(self._kept.values())
            self._kept.clear()
        for kept in gone:
            for wake in list(kept.wakers):
                wake()

    def take(
        self,
        watch_id: str,
        cursor: str | None,
        max_events: int,
        keep: Callable[[ChangeEvent], bool] | None = None,
    ) -> Changes:
        """The events of *watch_id* after *cursor* (``None``: from the watch's start), at most
        *max_events*, without waiting; those *keep* refuses are passed over (a grant revoked since).

        Raises
        ------
        InvalidParams
            ``reason="bad_cursor"``: not a position of this watch.
        """
        with self._lock:
            kept = self._kept_locked(watch_id)
            position = self._position(kept, cursor)
            dropped = position < kept.start
            position = max(position, kept.start)
            events: list[ChangeEvent] = []
            while position < kept.end and len(events) < max_events:
                event = kept.events[position - kept.start]
                position += 1
                if keep is None or keep(event):
                    events.append(event)
            return Changes(tuple(events), f"e{position}", dropped)

    def wait_changes(self, watch_id: str, cursor: str | None, wait_ms: int) -> None:
        """Block (a worker thread) until *watch_id* has an event after *cursor*, or *wait_ms* passed."""
        ready = threading.Event()
        if self._register(watch_id, cursor, ready.set):
            try:
                ready.wait(wait_ms / 1000)
            finally:
                self._unregister(watch_id, ready.set)

    async def await_changes(self, watch_id: str, cursor: str | None, wait_ms: int) -> None:
        """:meth:`wait_changes` on the event loop, holding no thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, future)

        if self._register(watch_id, cursor, wake):
            try:
                await asyncio.wait_for(asyncio.shield(future), wait_ms / 1000)
            except TimeoutError:
                pass
            finally:
                self._unregister(watch_id, wake)

    def _register(self, watch_id: str, cursor: str | None, wake: Callable[[], None]) -> bool:
        """Whether to wait: nothing after *cursor* yet (then *wake* is called when something comes)."""
        with self._lock:
            kept = self._kept_locked(watch_id)
            if self._position(kept, cursor) < kept.end:
                return False
            kept.wakers.add(wake)
            return True

    def _unregister(self, watch_id: str, wake: Callable[[], None]) -> None:
        with self._lock:
            kept = self._kept.get(watch_id)
            if kept is not None:
                kept.wakers.discard(wake)

    def _kept_locked(self, watch_id: str) -> _Kept:
        kept = self._kept.get(watch_id)
        if kept is None:
            # Kept from now on: a watch's first files/changes on a connection with notifications.
            kept = self._kept[watch_id] = _Kept()
        return kept

    @staticmethod
    def _position(kept: _Kept, cursor: str | None) -> int:
        if cursor is None:
            return 0
        match = _CURSOR.fullmatch(cursor)
        if match is None or int(match.group(1)) > kept.end:
            raise InvalidParams(
                "the cursor does not belong to this watch", reason="bad_cursor", param="cursor"
            )
        return int(match.group(1))


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
