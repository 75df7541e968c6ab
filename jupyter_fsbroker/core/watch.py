"""Watches: file-system change notifications for ``files/watch``.

A :class:`WatchManager` owns one watchdog observer (started on the first watch,
stopped when the last one goes) and one dispatcher thread. Raw events from the
observer are mapped back to root-relative paths, kept to the watch's scope, and
coalesced per watch and path. Before delivery the dispatcher asks the watch's
``accept`` callback whether each path may still be shown (the broker uses it for
grants, sensitive names and its own temporary files), applies the watch's
``events`` filter and hands the events to the watch's ``sink``, never while an
internal lock is held.

**When an event is delivered.** The first change of a path that was quiet for
``coalesce`` seconds is delivered at once, unless it is ``created`` (a new file
is usually written right after it appears: it is held for the window, so that
the client hears of it once, complete). What follows within the window is
coalesced and delivered when the window closes, with the last state (the rules
of :func:`~jupyter_fsbroker.core.changes.merge`), in the order the paths last
changed; a path keeps being coalesced, one event per window, while changes keep
coming. So a change to a quiet file costs no wait, a burst costs one event at
its start and one at its end, and the last state is always reported.

Renames are reported as follows:

* source and destination both in scope, source accepted: ``moved`` (with
  ``old_path``);
* destination in scope, source out of scope or refused by ``accept`` (an atomic
  replace through a hidden temporary file, or a sibling renamed onto a watched
  file): ``modified`` for the destination;
* only the source in scope, or the destination refused: ``deleted`` for the source.

A watch without ``moved`` in its ``events`` gets a move as ``deleted`` (old path)
plus ``created`` (new path), each subject to the filter.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import math
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from .changes import EVENTS, ChangeEvent, Parts, Pending, merge
from .errors import (
    ClosedError,
    FilesError,
    InvalidParams,
    NotFound,
    PermissionDenied,
    RateLimited,
    TooLarge,
    WrongType,
    from_os_error,
)
from .inotify import limit_cut_short
from .names import is_wire_safe, readable
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root

__all__ = ["EVENTS", "ChangeEvent", "WatchInfo", "WatchManager"]

logger = logging.getLogger(__name__)

#: The raw watchdog events a watch listens to. Directory "modified" (caused by
#: entries changing), opens and closes are left out: they are noise here.
_RAW_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
]

#: ``retryAfterMs`` of a watch refused for the operating system's limit of watches.
_LIMIT_RETRY_MS = 1000

#: How long remove() and close() wait for a sink that is running (a sink that
#: blocks on the thread calling them would otherwise dead-lock it).
_WAIT_TIMEOUT = 5.0

#: Paths a watch remembers as lately delivered before it forgets the stale ones.
_RECENT_MOST = 1024

Accept = Callable[[Root, Parts], bool]
Sink = Callable[[ChangeEvent], None]


@dataclass(frozen=True)
class WatchInfo:
    """A live watch, as listed by :meth:`WatchManager.watches`.

    Attributes
    ----------
    watch_id
        The id returned by :meth:`WatchManager.add`.
    owner
        Who created it (the broker uses the connection id).
    path
        Root-relative path of the watched directory or file.
    recursive
        Whether descendants below direct children are reported.
    events
        The event kinds delivered.
    """

    watch_id: str
    owner: str
    path: str
    recursive: bool
    events: frozenset[str]


@dataclass(eq=False)
class _Watch:
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
        return ChangeEvent(self.id, self.rel_of(parts), kind, timestamp, old, lossy)

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


@dataclass(eq=False)
class _Observed:
    """One scheduled watchdog watch (a directory, recursive or not), shared by watches."""

    path: str
    recursive: bool
    members: set[_Watch] = field(default_factory=set)
    handle: ObservedWatch | None = None


class _Handler(FileSystemEventHandler):
    """Forwards the raw events of one observed directory to the manager."""

    def __init__(self, manager: WatchManager, observed: _Observed) -> None:
        super().__init__()
        self._manager = manager
        self._observed = observed

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self._manager._on_raw(self._observed, event)
        except Exception:
            logger.exception("error while handling a file-system event")


class WatchManager(Closeable):
    """Watches directories and files inside roots and reports coalesced changes.

    Parameters
    ----------
    coalesce
        The coalescing window in seconds: a change of a quiet path is
        delivered at once (``created`` after the window), what follows it
        within the window is coalesced and delivered when the window closes.

    Notes
    -----
    Every method is thread-safe. Sinks and ``accept`` callbacks run on the
    manager's dispatcher thread, one at a time, with no lock of the manager
    held; they may call :meth:`remove`. A sink should not block on a thread
    that calls :meth:`remove` or :meth:`close`: those wait (up to a few seconds)
    for a running sink of the watches they end.
    """

    def __init__(self, *, coalesce: float = 0.05) -> None:
        self._coalesce = _check_coalesce(coalesce)
        # Order: _sched_lock -> (observer's lock) ; _cond is never held while calling into watchdog.
        self._sched_lock = threading.RLock()
        self._cond = threading.Condition(threading.Lock())
        self._watches: dict[str, _Watch] = {}
        self._observed: dict[tuple[str, bool], _Observed] = {}
        self._due: set[_Watch] = set()
        self._ready: collections.deque[tuple[_Watch, Parts, Pending]] = collections.deque()
        self._observer: BaseObserver | None = None
        self._thread: threading.Thread | None = None
        self._delivering: _Watch | None = None
        self._closed = False

    # -- public API ----------------------------------------------------------------

    def add(
        self,
        *,
        owner: str,
        root: Root,
        parts: tuple[str, ...],
        is_dir: bool,
        recursive: bool,
        events: frozenset[str],
        sink: Callable[[ChangeEvent], None],
        accept: Callable[[Root, tuple[str, ...]], bool],
    ) -> str:
        """Start watching ``root.path/parts`` and return the new watch id.

        Parameters
        ----------
        owner
            Who owns the watch (the connection); :meth:`remove` checks it.
        root
            The root the path is in.
        parts
            Canonical components of the watched path below the root (as
            resolved by :func:`jupyter_fsbroker.core.resolve.resolve`).
        is_dir
            ``True`` to watch a directory's entries. ``False`` to watch the single
            file *parts*: its parent directory is watched non-recursively and only
            that name is reported (it need not exist yet).
        recursive
            For directories: report entries at any depth, not only direct children.
        events
            The kinds to deliver, a subset of :data:`EVENTS`.
        sink
            Receives each :class:`ChangeEvent`, on the dispatcher thread.
            Exceptions it raises are logged and otherwise ignored.
        accept
            ``accept(root, parts)`` is called when an event is about to be
            delivered; a false answer drops the event (a revoked grant, a
            sensitive name, a temporary file).

        Returns
        -------
        str
            ``"w_"`` followed by 16 hex characters from a CSPRNG.

        Raises
        ------
        ClosedError
            The manager was closed.
        InvalidParams
            *events* names an unknown kind.
        NotFound
            The directory to watch does not exist.
        WrongType
            The directory to watch is not a directory, or a file watch of the root itself.
        PermissionDenied
            The directory to watch is reached through a symbolic link.
        RateLimited
            ``reason="watch_limit"``: the operating system's limit of watches
            is reached (also when it would cut a recursive watch short).
        FilesError
            The operating system refused the watch otherwise.
        """
        unknown = set(events) - EVENTS
        if unknown:
            raise InvalidParams(
                f"unknown watch events: {', '.join(sorted(unknown))}", reason="unknown_event", path=None
            )
        location = RootPath(root, tuple(parts))
        rel = location.rel
        if is_dir:
            dir_path, dir_recursive = location.key, recursive
        else:
            if location.is_root:
                raise WrongType(f"{rel} is a directory", reason="is_directory", path=rel)
            dir_path, dir_recursive = location.parent.key, False
        key = (dir_path, dir_recursive)

        with self._sched_lock:
            self._check_open()
            observed = self._observed.get(key)
            if observed is not None and not self._is_alive(observed):
                # Its directory was deleted (the emitter stopped): watch the new one.
                _check_dir(dir_path, rel)
                assert self._observer is not None
                if observed.handle is not None:
                    with contextlib.suppress(KeyError):
                        self._observer.unschedule(observed.handle)
                self._schedule(observed, rel)
            elif observed is None:
                _check_dir(dir_path, rel)
                self._start_threads(rel)
                observed = _Observed(dir_path, dir_recursive)
                try:
                    self._schedule(observed, rel)
                except BaseException:
                    if not self._observed:
                        self._stop_observer()
                    raise
                self._observed[key] = observed
            with self._cond:
                watch_id = "w_" + secrets.token_hex(8)
                while watch_id in self._watches:
                    watch_id = "w_" + secrets.token_hex(8)
                watch = _Watch(
                    id=watch_id,
                    owner=owner,
                    location=location,
                    is_dir=is_dir,
                    recursive=recursive if is_dir else False,
                    events=frozenset(events),
                    sink=sink,
                    accept=accept,
                    key=key,
                )
                self._watches[watch_id] = watch
                observed.members.add(watch)
        return watch_id

    def remove(self, watch_id: str, *, owner: str) -> None:
        """Stop the watch *watch_id* of *owner*.

        When this returns, the watch's sink is not running (unless this is
        called from that sink) and is not called again.

        Raises
        ------
        NotFound
            ``reason="unknown_watch"``: no such watch, or it belongs to another owner.
        """
        with self._sched_lock:
            with self._cond:
                watch = self._watches.get(watch_id)
                if watch is None or watch.owner != owner:
                    raise NotFound(f"no watch {watch_id!r}", reason="unknown_watch")
                self._detach(watch)
            self._release_observed([watch])
        self._wait_idle([watch])

    def remove_owner(self, owner: str) -> int:
        """Stop every watch of *owner* (a closed connection); return how many there were."""
        return self._remove_where(lambda w: w.owner == owner)

    def remove_root(self, root: Root) -> int:
        """Stop every watch inside *root* (it was withdrawn); return how many there were."""
        return self._remove_where(lambda w: w.location.root.id == root.id)

    @property
    def coalesce(self) -> float:
        """The coalescing window in seconds; a change applies to the next burst of events."""
        return self._coalesce

    @coalesce.setter
    def coalesce(self, seconds: float) -> None:
        value = _check_coalesce(seconds)
        with self._cond:
            self._coalesce = value

    def count(self, owner: str) -> int:
        """The number of live watches of *owner*."""
        with self._cond:
            return sum(1 for w in self._watches.values() if w.owner == owner)

    def watches(self) -> tuple[WatchInfo, ...]:
        """The live watches, in the order they were added."""
        with self._cond:
            return tuple(
                WatchInfo(
                    watch_id=w.id, owner=w.owner, path=w.location.rel, recursive=w.recursive, events=w.events
                )
                for w in self._watches.values()
            )

    def close(self) -> None:
        """Stop every watch, the observer and the dispatcher thread, and join them.

        Pending events are dropped. Idempotent; :meth:`add` raises
        :class:`ClosedError` afterwards.
        """
        with self._sched_lock:
            with self._cond:
                already = self._closed
                self._closed = True
                for watch in list(self._watches.values()):
                    self._detach(watch)
                self._cond.notify_all()
            self._observed.clear()
            self._stop_observer()
            thread, self._thread = self._thread, None
        if already and thread is None:
            return
        if thread is not None and thread is not threading.current_thread():
            thread.join(_WAIT_TIMEOUT)
            if thread.is_alive():
                logger.warning("the watch dispatcher did not stop: a sink is blocked")

    def _remove_where(self, predicate: Callable[[_Watch], bool]) -> int:
        with self._sched_lock:
            with self._cond:
                gone = [w for w in self._watches.values() if predicate(w)]
                for watch in gone:
                    self._detach(watch)
            self._release_observed(gone)
        self._wait_idle(gone)
        return len(gone)

    # -- scheduling (under _sched_lock) -----------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the watch manager is closed")

    def _start_threads(self, rel: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fsbroker-watch-dispatch", daemon=True)
            self._thread.start()
        if self._observer is None:
            try:
                observer = Observer()
            except OSError as exc:
                raise _watch_error(exc, rel) from None
            observer.name = "fsbroker-watch-observer"
            try:
                observer.start()
            except BaseException:
                _stop_quietly(observer)
                raise
            self._observer = observer

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            if observer is not threading.current_thread():
                observer.join()

    def _schedule(self, observed: _Observed, rel: str) -> None:
        assert self._observer is not None
        observed.handle = None
        try:
            handle = self._observer.schedule(
                _Handler(self, observed),
                observed.path,
                recursive=observed.recursive,
                event_filter=_RAW_EVENTS,
                follow_symlink=False,
            )
        except OSError as exc:
            raise _watch_error(exc, rel) from None
        except RecursionError:
            # watchdog walks a recursive watch's tree with recursion: a tree deeper than
            # Python's stack cannot be watched whole (the watches set so far stay with it).
            logger.warning("%s is too deep to be watched recursively", rel)
            raise TooLarge(
                f"{rel} is too deep to watch recursively; watch a folder below it",
                reason="too_deep",
                path=rel,
            ) from None
        try:
            # The directory may have been swapped for a symlink while the watch was set up.
            _check_dir(observed.path, rel)
            if observed.recursive and limit_cut_short(observed.path):
                # The backend skipped the directories past the limit without a word: a watch
                # that silently misses part of its tree is refused instead.
                raise _limit_error(rel)
        except FilesError:
            self._observer.unschedule(handle)
            raise
        observed.handle = handle

    def _is_alive(self, observed: _Observed) -> bool:
        if self._observer is None or observed.handle is None:
            return False
        return any(e.watch == observed.handle and e.is_alive() for e in self._observer.emitters)

    def _release_observed(self, gone: list[_Watch]) -> None:
        for watch in gone:
            observed = self._observed.get(watch.key)
            if observed is None:
                continue
            with self._cond:
                observed.members.discard(watch)
                empty = not observed.members
            if empty:
                del self._observed[watch.key]
                if self._observer is not None and observed.handle is not None:
                    with contextlib.suppress(KeyError):
                        self._observer.unschedule(observed.handle)
        if not self._observed:
            self._stop_observer()

    # -- state (under _cond) -----------------------------------------------------

    def _detach(self, watch: _Watch) -> None:
        watch.active = False
        watch.pending.clear()
        watch.recent.clear()
        watch.deadline = None
        self._due.discard(watch)
        self._watches.pop(watch.id, None)

    def _wait_idle(self, gone: list[_Watch]) -> None:
        if threading.current_thread() is self._thread or not gone:
            return
        with self._cond:
            idle = self._cond.wait_for(lambda: self._delivering not in gone, timeout=_WAIT_TIMEOUT)
        if not idle:
            logger.warning("a watch sink is still running after its watch was removed")

    # -- raw events (observer thread) --------------------------------------------

    def _on_raw(self, observed: _Observed, event: FileSystemEvent) -> None:
        now = time.time()
        with self._cond:
            if self._closed:
                return
            clock = time.monotonic()
            wake = False
            for watch in observed.members:
                if not watch.active:
                    continue
                for parts, kind, src in _classify(watch, event):
                    change = Pending(kind, now, src)
                    if kind != "created" and parts not in watch.pending and watch.quiet(parts, clock):
                        # The first change of a quiet path: at once; what follows is coalesced.
                        watch.delivered(parts, clock + self._coalesce)
                        self._ready.append((watch, parts, change))
                        wake = True
                        continue
                    merge(watch.pending, parts, change)
                    if watch.deadline is None:
                        watch.deadline = clock + self._coalesce
                        self._due.add(watch)
                        wake = True
            if wake:
                self._cond.notify_all()

    # -- dispatcher thread ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    if self._ready:
                        break
                    now = time.monotonic()
                    ready = [w for w in self._due if w.deadline is not None and w.deadline <= now]
                    if ready:
                        break
                    deadlines = [w.deadline for w in self._due if w.deadline is not None]
                    self._cond.wait(max(0.0, min(deadlines) - now) if deadlines else None)
                batches: list[tuple[_Watch, list[tuple[Parts, Pending]]]] = []
                if self._ready:
                    batches = [(watch, [(parts, change)]) for watch, parts, change in self._ready]
                    self._ready.clear()
                else:
                    until = now + self._coalesce
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

    def _deliver(self, watch: _Watch, batch: list[tuple[Parts, Pending]]) -> None:
        for parts, pending in batch:
            for event in self._resolve(watch, parts, pending):
                with self._cond:
                    if not watch.active or self._closed:
                        return
                    self._delivering = watch
                try:
                    watch.sink(event)
                except Exception:
                    logger.exception("a watch sink failed on %s %s", event.event, event.path)
                finally:
                    with self._cond:
                        self._delivering = None
                        self._cond.notify_all()

    def _resolve(self, watch: _Watch, parts: Parts, pending: Pending) -> list[ChangeEvent]:
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


def _classify(watch: _Watch, event: FileSystemEvent) -> list[tuple[Parts, str, Parts | None]]:
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


def _accepts(watch: _Watch, parts: Parts) -> bool:
    try:
        return bool(watch.accept(watch.location.root, parts))
    except Exception:
        logger.exception("a watch accept() callback failed; the event is dropped")
        return False


def _filtered(watch: _Watch, events: list[ChangeEvent]) -> list[ChangeEvent]:
    return [e for e in events if e.event in watch.events]


def _check_coalesce(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise ValueError(f"coalesce must be a non-negative number of seconds, not {seconds!r}")
    return float(seconds)


def _check_dir(dir_path: str, rel: str) -> None:
    try:
        st = os.lstat(dir_path)
    except FileNotFoundError:
        raise NotFound(f"{rel}: the directory to watch does not exist", path=rel) from None
    except OSError as exc:
        raise from_os_error(exc, rel) from None
    if stat.S_ISLNK(st.st_mode) or os.path.realpath(dir_path) != dir_path:
        raise PermissionDenied(
            f"{rel}: the directory to watch is reached through a symbolic link",
            reason="symlink",
            path=rel,
        )
    if not stat.S_ISDIR(st.st_mode):
        raise WrongType(f"{rel}: not a directory", reason="not_a_directory", path=rel)


def _watch_error(exc: OSError, rel: str) -> FilesError:
    if exc.errno in (errno.ENOSPC, errno.EMFILE, errno.ENFILE):
        return _limit_error(rel)
    return from_os_error(exc, rel)


def _limit_error(rel: str) -> FilesError:
    # RATE_LIMITED, as for a connection's own cap on watches (too_many_watches): the request is
    # fine, there is no room for it now; -32603 is for what the broker did not expect.
    return RateLimited(
        "the operating system's limit of file watches for this user is reached; the watches already "
        "set keep working: remove some, or retry later",
        reason="watch_limit",
        path=rel,
        retryAfterMs=_LIMIT_RETRY_MS,
    )


def _stop_quietly(observer: BaseObserver) -> None:
    try:
        observer.stop()
    except Exception:
        logger.debug("could not stop a watch observer", exc_info=True)
