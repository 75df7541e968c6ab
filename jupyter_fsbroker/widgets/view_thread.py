"""The views' own thread: every view update of a notebook runs there, never on an I/O thread.

The broker reports what happens on the threads that do the work: the pipe's reading
thread in the middle of a read, the worker threads, the background loop. A view that
changed its widgets there would make the read wait for comm messages, and two threads
could interleave one view's updates. So the kernel's views are changed on one daemon
thread, ``fsbroker-views``: the I/O thread pays a queue ``put`` (:meth:`ViewThread.post`),
and only when the view wants the event (:meth:`ViewThread.posting`, whose test runs on
the caller's thread: a read done in one chunk posts nothing).

The same thread is the views' clock: :meth:`ViewThread.coalesce` runs a burst of refresh
requests as one call, at most one per interval (the dashboard, the JupyterLab panel), and
:meth:`ViewThread.clock` calls a function on a schedule it sets itself (the consent
prompts' countdowns), so no view starts a timer or a thread of its own.

The thread starts with the first call posted and ends with :meth:`ViewThread.close`,
which joins it. A call that raises is logged and the thread goes on. This module
imports no widgets: it only runs what views post.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ..core.resource import Closeable

__all__ = ["VIEWS_THREAD", "ViewThread"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The name of the views' thread.
VIEWS_THREAD = "fsbroker-views"
#: Seconds :meth:`ViewThread.close` waits for the call running to end.
_JOIN_TIMEOUT = 5.0

_Call = tuple[Callable[..., Any], tuple[Any, ...]]
_STOP = object()


class ViewThread(Closeable):
    """One thread that runs every view update posted to it, in the order posted.

    Parameters
    ----------
    prepare
        Called once on the thread before anything else (the kernel detaches the
        thread from the running cell there, so widgets built on it are not
        routed to a cell's output).
    name
        The thread's name.
    """

    def __init__(self, *, prepare: Callable[[], None] | None = None, name: str = VIEWS_THREAD) -> None:
        self._prepare = prepare
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Timed calls, touched only on the thread: (when, order, key, call).
        self._timed: list[tuple[float, int, Hashable, _Call]] = []
        self._order = itertools.count()
        self._pending: set[Hashable] = set()  # coalesce keys waiting (under the lock)
        self._last_run: dict[Hashable, float] = {}  # on the thread only

    # -- any thread ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def is_current(self) -> bool:
        """Whether the caller runs on this thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def post(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` on the thread soon. Never blocks; ``False`` once closed (nothing runs)."""
        return self._put(("now", (fn, args)))

    def posting(
        self, fn: Callable[[T], Any], *, when: Callable[[T], bool] | None = None
    ) -> Callable[[T], None]:
        """A listener that posts ``fn(event)``, for the events that ``when(event)`` wants.

        *when* runs on the thread that reports the event, so it must be quick and
        change nothing: events it declines cost the reporter that test only.
        """

        def listener(event: T) -> None:
            if when is None or when(event):
                self.post(fn, event)

        return listener

    def coalesce(self, key: Hashable, fn: Callable[[], Any], interval: float) -> None:
        """Run *fn* soon, once however often this is asked meanwhile, and at most once per *interval*.

        While a call of *key* waits, asking again changes nothing; it runs as
        soon as *interval* seconds have passed since the last run of *key*.
        Never blocks.
        """
        with self._lock:
            if key in self._pending or self._closed:
                return
            self._pending.add(key)
        self._put(("coalesce", key, (fn, ()), max(0.0, interval)))

    def clock(self, fn: Callable[[], float | None], first: float = 0.0) -> None:
        """Call *fn* after *first* seconds, then again after each delay it returns, until it returns ``None``.

        A countdown returns the seconds until its display changes next; one
        thread so serves every countdown shown.
        """
        self._put(("clock", (fn, ()), max(0.0, first)))

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
        """Run ``fn(*args)`` on the thread and return its result (or raise its error).

        Runs at once on the caller's thread when that is this thread, or once the
        thread is closed. For a caller that must hold what the views build (a cell
        that displays it); the views' thread never waits for a cell.

        Raises
        ------
        TimeoutError
            The thread did not run it in *timeout* seconds.
        """
        if self.is_current() or self._closed:
            return fn(*args)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn(*args))
                except BaseException as exc:
                    done.set_exception(exc)

        if not self.post(run):
            return fn(*args)
        try:
            return done.result(timeout)
        except concurrent.futures.TimeoutError:
            if done.cancel():
                raise TimeoutError(f"the views' thread did not run {fn!r} in {timeout:g} s") from None
            return done.result()

    def settle(self, timeout: float = _JOIN_TIMEOUT) -> None:
        """Wait until everything posted before has run (at most *timeout* seconds)."""
        try:
            self.call(lambda: None, timeout=timeout)
        except TimeoutError:
            log.warning("the views' thread is still busy")

    def close(self) -> None:
        """Run what is posted already, drop the timed calls, end the thread and join it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        if thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("the views' thread did not end in %g s", _JOIN_TIMEOUT)

    # -- the thread ----------------------------------------------------------------------------

    def _put(self, item: Any) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put(item)
        return True

    def _run(self) -> None:
        if self._prepare is not None:
            self._guarded(self._prepare, ())
        while True:
            wait = None if not self._timed else max(0.0, self._timed[0][0] - time.monotonic())
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                self._run_due()
                continue
            if item is _STOP:
                return
            self._take(item)
            self._run_due()

    def _take(self, item: Any) -> None:
        now = time.monotonic()
        kind = item[0]
        if kind == "now":
            self._guarded(*item[1])
        elif kind == "coalesce":
            _, key, call, interval = item
            when = max(now, self._last_run.get(key, now - interval) + interval)
            heapq.heappush(self._timed, (when, next(self._order), key, call))
        else:  # a clock
            _, call, first = item
            heapq.heappush(self._timed, (now + first, next(self._order), None, call))

    def _run_due(self) -> None:
        while self._timed and self._timed[0][0] <= time.monotonic():
            _, _, key, call = heapq.heappop(self._timed)
            if key is not None:  # coalesced: asking again from now on schedules the next run
                with self._lock:
                    self._pending.discard(key)
                self._last_run[key] = time.monotonic()
                self._guarded(*call)
                continue
            again = self._guarded(*call)
            if isinstance(again, int | float) and not isinstance(again, bool):
                when = time.monotonic() + max(0.0, again)
                heapq.heappush(self._timed, (when, next(self._order), None, call))

    @staticmethod
    def _guarded(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        try:
            return fn(*args)
        except Exception:  # a view that fails must not stop the others
            log.exception("a view update failed")
            return None
