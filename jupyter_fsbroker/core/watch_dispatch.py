"""Delivering watch events: raw file-system events coalesced per watch and path, and handed to sinks.

The :class:`~jupyter_fsbroker.core.watch.WatchManager` sets watches up and takes
them down; a :class:`WatchDispatcher` gets every raw event of its observer (on
the observer's thread), maps it to the changes it means for each watch
(:func:`_classify`: root-relative paths, kept to the watch's scope), coalesces
them per watch and path (:func:`~jupyter_fsbroker.core.changes.merge`), and on
its own thread asks each watch's ``accept`` whether a path may still be shown,
applies the ``events`` filter and calls the sink, never while its lock is held.
When an event is delivered, and how renames are reported, is told in
:mod:`jupyter_fsbroker.core.watch`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    FileAttribEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileSystemEvent,
    FileSystemMovedEvent,
)

from ..wire.timestamps import iso_utc
from .changes import ChangeEvent, Parts, Pending, merge
from .names import is_wire_safe, readable
from .rootpath import RootPath
from .roots import Root

__all__ = ["Accept", "LiveWatch", "Sink", "WatchDispatcher"]

logger = logging.getLogger(__name__)

#: How long a removal or a close waits for a sink that is running (a sink that
#: blocks on the thread calling them would otherwise dead-lock it).
_WAIT_TIMEOUT = 5.0

#: Paths a watch remembers as lately delivered before it forgets the stale ones.
_RECENT_MOST = 1024

Accept = Callable[[Root, Parts], bool]
Sink = Callable[[ChangeEvent], None]


@dataclass(eq=False)
class LiveWatch:
    """One live watch: what it watches, where its events go, and its changes not yet delivered."""

    id: str
    owner: str
    location: RootPath
    is_dir: bool
    recursive: bool
    events: frozenset[str]
    sink: Sink
    accept: Accept
    key: tuple[str, bool]
    active: bool = True
    pending: dict[Parts, Pending] = field(default_factory=dict)
    # Paths delivered lately: until when a new change of each is coalesced rather than sent at once.
    recent: dict[Parts, float] = field(default_factory=dict)
    recent_most: int = _RECENT_MOST
    deadline: float | None = None

    def in_scope(self, parts: Parts | None) -> bool:
        if parts is None:
            return False
        mine = self.location.parts
        if not self.is_dir:
            return parts == mine
        n = len(mine)
        if len(parts) <= n or parts[:n] != mine:
            return False
        return self.recursive or len(parts) == n + 1

    def to_parts(self, path: bytes | str) -> Parts | None:
        """Root-relative parts of an absolute event path, or ``None`` when outside the root.

        A name that is not valid UTF-8 stays as Python spells it (surrogate
        escapes), naming the file exactly; it is made readable when sent.
        """
        if not path:
            return None
        below = RootPath.below(self.location.root, os.fsdecode(path))
        return None if below is None else below.parts

    def rel_of(self, parts: Parts) -> str:
        """The root-relative spelling of *parts* in this watch's root, readable."""
        return readable(RootPath(self.location.root, parts).rel)

    def change(self, parts: Parts, kind: str, timestamp: float, src: Parts | None = None) -> ChangeEvent:
        """The event *kind* of *parts* (moved from *src*), names that are not valid UTF-8 made readable."""
        lossy = not all(is_wire_safe(p) for p in (*parts, *(src or ())))
        old = None if src is None else self.rel_of(src)
        # The wire spells times to the millisecond: the nearest one.
        return ChangeEvent(self.id, self.rel_of(parts), kind, iso_utc(round(timestamp, 3)), old, lossy)

    def quiet(self, parts: Parts, now: float) -> bool:
        """Whether a change of *parts* at monotonic time *now* starts a new burst (sent at once)."""
        until = self.recent.get(parts)
        if until is None:
            return True
        if until > now:
            return False
        del self.recent[parts]
        return True

    def delivered(self, parts: Parts, until: float) -> None:
        """Remember that *parts* was just delivered: changes before *until* are coalesced."""
        recent = self.recent
        recent[parts] = until
        if len(recent) > self.recent_most:
            now = time.monotonic()
            for key in [k for k, t in recent.items() if t <= now]:
                del recent[key]
            # Forget the stale ones again only once as many more were added: linear on the whole.
            self.recent_most = max(_RECENT_MOST, 2 * len(recent))


class WatchDispatcher:
    """The coalescing of one watch manager's raw events, and the thread that delivers them.

    Parameters
    ----------
    coalesce
        The coalescing window in seconds (see :mod:`jupyter_fsbroker.core.watch`).

    Notes
    -----
    :attr:`cond` guards the dispatcher's state, the watches' pending changes, and
    the manager's table of watches (the manager takes it too). Sinks and
    ``accept`` callbacks run on the dispatcher's thread, one at a time, with
    :attr:`cond` released.
    """

    def __init__(self, coalesce: float) -> None:
        self.cond = threading.Condition(threading.Lock())
        #: The coalescing window in seconds; set it under :attr:`cond`.
        self.coalesce = coalesce
        self._due: set[LiveWatch] = set()
        self._ready: collections.deque[tuple[LiveWatch, Parts, Pending]] = collections.deque()
        self._delivering: LiveWatch | None = None
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the delivering thread, unless it runs (call it under the manager's scheduling lock)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fsbroker-watch-dispatch", daemon=True)
            self._thread.start()

    def forget(self, watch: LiveWatch) -> None:
        """End *watch*: nothing pending of it is delivered any more (call it under :attr:`cond`)."""
        watch.active = False
        watch.pending.clear()
        watch.recent.clear()
        watch.deadline = None
        self._due.discard(watch)

    def stop(self) -> None:
        """Drop what is pending and let the thread end (call it under :attr:`cond`)."""
        self._stopped = True
        self.cond.notify_all()

    def join(self) -> None:
        """Wait (a few seconds at most) for the thread to end, after :meth:`stop`."""
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(_WAIT_TIMEOUT)
            if thread.is_alive():
                logger.warning("the watch dispatcher did not stop: a sink is blocked")

    def wait_idle(self, gone: list[LiveWatch]) -> None:
        """Wait until no sink of the watches *gone* is running (unless called from that sink)."""
        if threading.current_thread() is self._thread or not gone:
            return
        with self.cond:
            idle = self.cond.wait_for(lambda: self._delivering not in gone, timeout=_WAIT_TIMEOUT)
        if not idle:
            logger.warning("a watch sink is still running after its watch was removed")

    def on_raw(self, members: set[LiveWatch], event: FileSystemEvent) -> None:
        """Take a raw event of the observer for the watches *members* (on the observer's thread)."""
        now = time.time()
        with self.cond:
            if self._stopped:
                return
            clock = time.monotonic()
            wake = False
            for watch in members:
                if not watch.active:
                    continue
                for parts, kind, src in _classify(watch, event):
                    change = Pending(kind, now, src)
                    if kind != "created" and parts not in watch.pending and watch.quiet(parts, clock):
                        # The first change of a quiet path: at once; what follows is coalesced.
                        watch.delivered(parts, clock + self.coalesce)
                        self._ready.append((watch, parts, change))
                        wake = True
                        continue
                    merge(watch.pending, parts, change)
                    if watch.deadline is None:
                        watch.deadline = clock + self.coalesce
                        self._due.add(watch)
                        wake = True
            if wake:
                self.cond.notify_all()

    # -- the dispatcher thread ----------------------------------------------------

    def _run(self) -> None:
        while True:
            with self.cond:
                while True:
                    if self._stopped:
                        return
                    if self._ready:
                        break
                    now = time.monotonic()
                    ready = [w for w in self._due if w.deadline is not None and w.deadline <= now]
                    if ready:
                        break
                    deadlines = [w.deadline for w in self._due if w.deadline is not None]
                    self.cond.wait(max(0.0, min(deadlines) - now) if deadlines else None)
                batches: list[tuple[LiveWatch, list[tuple[Parts, Pending]]]] = []
                if self._ready:
                    batches = [(watch, [(parts, change)]) for watch, parts, change in self._ready]
                    self._ready.clear()
                else:
                    until = now + self.coalesce
                    for watch in sorted(ready, key=lambda w: w.deadline or 0.0):
                        batches.append((watch, list(watch.pending.items())))
                        for parts in watch.pending:
                            watch.delivered(parts, until)
                        watch.pending = {}
                        watch.deadline = None
                        self._due.discard(watch)
            for watch, batch in batches:
                try:
                    self._deliver(watch, batch)
                except Exception:
                    logger.exception("error while delivering watch events")

    def _deliver(self, watch: LiveWatch, batch: list[tuple[Parts, Pending]]) -> None:
        for parts, pending in batch:
            for event in self._resolve(watch, parts, pending):
                with self.cond:
                    if not watch.active or self._stopped:
                        return
                    self._delivering = watch
                try:
                    watch.sink(event)
                except Exception:
                    logger.exception("a watch sink failed on %s %s", event.event, event.path)
                finally:
                    with self.cond:
                        self._delivering = None
                        self.cond.notify_all()

    def _resolve(self, watch: LiveWatch, parts: Parts, pending: Pending) -> list[ChangeEvent]:
        """Turn a pending change into the events to deliver (accept and events filter applied)."""
        stamp = pending.timestamp
        if not _accepts(watch, parts):
            if pending.kind == "moved" and pending.src is not None and _accepts(watch, pending.src):
                return _filtered(watch, [watch.change(pending.src, "deleted", stamp)])
            return []
        if pending.kind != "moved":
            return _filtered(watch, [watch.change(parts, pending.kind, stamp)])
        if pending.src is None or not _accepts(watch, pending.src):
            # An atomic replace (or a file renamed in from outside the scope).
            return _filtered(watch, [watch.change(parts, "created" if pending.fresh else "modified", stamp)])
        if "moved" in watch.events:
            return [watch.change(parts, "moved", stamp, pending.src)]
        return _filtered(
            watch, [watch.change(pending.src, "deleted", stamp), watch.change(parts, "created", stamp)]
        )


# -- helpers --------------------------------------------------------------------------


def _classify(watch: LiveWatch, event: FileSystemEvent) -> list[tuple[Parts, str, Parts | None]]:
    """The changes a raw event means for *watch*: (parts, kind, move source)."""
    src = watch.to_parts(event.src_path)
    if isinstance(event, FileSystemMovedEvent):
        dest = watch.to_parts(event.dest_path)
        src_in, dest_in = watch.in_scope(src), watch.in_scope(dest)
        if dest_in:
            assert dest is not None
            return [(dest, "moved", src if src_in else None)]
        if src_in:
            assert src is not None
            return [(src, "deleted", None)]
        return []
    if src is None or not watch.in_scope(src):
        return []
    if isinstance(event, FileCreatedEvent | DirCreatedEvent):
        return [(src, "created", None)]
    if isinstance(event, FileDeletedEvent | DirDeletedEvent):
        return [(src, "deleted", None)]
    if isinstance(event, FileModifiedEvent | FileAttribEvent):
        return [(src, "modified", None)]
    # Directory "modified"/"attrib" (its entries changed), opens, closes: not interesting.
    return []


def _accepts(watch: LiveWatch, parts: Parts) -> bool:
    try:
        return bool(watch.accept(watch.location.root, parts))
    except Exception:
        logger.exception("a watch accept() callback failed; the event is dropped")
        return False


def _filtered(watch: LiveWatch, events: list[ChangeEvent]) -> list[ChangeEvent]:
    return [e for e in events if e.event in watch.events]
