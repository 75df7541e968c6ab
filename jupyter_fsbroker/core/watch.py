"""Watches: file-system change notifications for ``files/watch``.

A :class:`WatchManager` owns one watchdog observer (started on the first watch,
stopped when the last one goes) and one dispatcher
(:class:`~jupyter_fsbroker.core.watch_dispatch.WatchDispatcher`, with its
thread). Raw events from the observer are mapped back to root-relative paths,
kept to the watch's scope, and coalesced per watch and path. Before delivery the
dispatcher asks the watch's ``accept`` callback whether each path may still be
shown (the broker uses it for grants, sensitive names and its own temporary
files), applies the watch's ``events`` filter and hands the events to the
watch's ``sink``, never while an internal lock is held.

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

import contextlib
import errno
import logging
import math
import os
import secrets
import stat
import threading
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
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from .changes import EVENTS, ChangeEvent
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
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root
from .watch_dispatch import LiveWatch, WatchDispatcher

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
class _Observed:
    """One scheduled watchdog watch (a directory, recursive or not), shared by watches."""

    path: str
    recursive: bool
    members: set[LiveWatch] = field(default_factory=set)
    handle: ObservedWatch | None = None


class _Handler(FileSystemEventHandler):
    """Forwards the raw events of one observed directory to the dispatcher."""

    def __init__(self, dispatcher: WatchDispatcher, observed: _Observed) -> None:
        super().__init__()
        self._dispatcher = dispatcher
        self._observed = observed

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self._dispatcher.on_raw(self._observed.members, event)
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
        self._dispatcher = WatchDispatcher(_check_coalesce(coalesce))
        # Order: _sched_lock -> (observer's lock) ; _cond is never held while calling into watchdog.
        self._sched_lock = threading.RLock()
        self._cond = self._dispatcher.cond
        self._watches: dict[str, LiveWatch] = {}
        self._observed: dict[tuple[str, bool], _Observed] = {}
        self._observer: BaseObserver | None = None
        self._closed = False

    # -- public API ----------------------------------------------------------------

    # long: a public method's numpy docstring; its code is three steps (_scope, _observe, and the
    # registration under the condition).
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
        location, key = _scope(root, tuple(parts), is_dir=is_dir, recursive=recursive, events=events)
        with self._sched_lock:
            self._check_open()
            observed = self._observe(key, location.rel)
            with self._cond:
                watch_id = "w_" + secrets.token_hex(8)
                while watch_id in self._watches:
                    watch_id = "w_" + secrets.token_hex(8)
                watch = LiveWatch(
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
        self._dispatcher.wait_idle([watch])

    def owns(self, watch_id: str, owner: str) -> bool:
        """Whether *watch_id* is a live watch of *owner*."""
        with self._cond:
            watch = self._watches.get(watch_id)
            return watch is not None and watch.owner == owner

    def remove_owner(self, owner: str) -> int:
        """Stop every watch of *owner* (a closed connection); return how many there were."""
        return self._remove_where(lambda w: w.owner == owner)

    def remove_root(self, root: Root) -> int:
        """Stop every watch inside *root* (it was withdrawn); return how many there were."""
        return self._remove_where(lambda w: w.location.root.id == root.id)

    @property
    def coalesce(self) -> float:
        """The coalescing window in seconds; a change applies to the next burst of events."""
        return self._dispatcher.coalesce

    @coalesce.setter
    def coalesce(self, seconds: float) -> None:
        value = _check_coalesce(seconds)
        with self._cond:
            self._dispatcher.coalesce = value

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
                self._closed = True
                for watch in list(self._watches.values()):
                    self._detach(watch)
                self._dispatcher.stop()
            self._observed.clear()
            self._stop_observer()
        self._dispatcher.join()

    def _remove_where(self, predicate: Callable[[LiveWatch], bool]) -> int:
        with self._sched_lock:
            with self._cond:
                gone = [w for w in self._watches.values() if predicate(w)]
                for watch in gone:
                    self._detach(watch)
            self._release_observed(gone)
        self._dispatcher.wait_idle(gone)
        return len(gone)

    # -- scheduling (under _sched_lock) -----------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the watch manager is closed")

    def _observe(self, key: tuple[str, bool], rel: str) -> _Observed:
        """The scheduled watchdog watch of *key* (a directory, recursive or not): shared, renewed or new."""
        dir_path, dir_recursive = key
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
        return observed

    def _start_threads(self, rel: str) -> None:
        self._dispatcher.start()
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
                _Handler(self._dispatcher, observed),
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

    def _release_observed(self, gone: list[LiveWatch]) -> None:
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

    def _detach(self, watch: LiveWatch) -> None:
        self._dispatcher.forget(watch)
        self._watches.pop(watch.id, None)


# -- helpers --------------------------------------------------------------------------


def _scope(
    root: Root, parts: tuple[str, ...], *, is_dir: bool, recursive: bool, events: frozenset[str]
) -> tuple[RootPath, tuple[str, bool]]:
    """The watched path, and the directory the observer watches for it (with its recursion)."""
    unknown = set(events) - EVENTS
    if unknown:
        raise InvalidParams(
            f"unknown watch events: {', '.join(sorted(unknown))}", reason="unknown_event", path=None
        )
    location = RootPath(root, parts)
    if is_dir:
        return location, (location.key, recursive)
    if location.is_root:
        raise WrongType(f"{location.rel} is a directory", reason="is_directory", path=location.rel)
    # A file is watched through its parent directory, non-recursively (it need not exist yet).
    return location, (location.parent.key, False)


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
