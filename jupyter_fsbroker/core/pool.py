"""The broker's worker threads: a bounded pool that hands each call to the thread idle the shortest time.

:class:`RequestPool` is a :class:`concurrent.futures.Executor`, like the
``ThreadPoolExecutor`` it replaces, with one difference that matters for
sequential small requests: ``ThreadPoolExecutor``'s threads wait on one shared
queue, so one request after another goes round every idle thread in turn, each
one's caches cold by the time its turn comes. Here the idle threads form a
stack; a call goes straight to the one that finished last (its caches warm),
woken through a lock of its own, and threads idle longer stay asleep.

* At most *max_workers* threads, started as calls need them; a call finding
  every thread busy waits in a queue, first come, first served.
* :meth:`RequestPool.shutdown` refuses further calls, cancels the queued ones if
  asked, lets running ones finish, ends every thread and (``wait=True``) joins them.
* The threads are daemon threads, so a pool never closed cannot hold up the
  interpreter's exit; the broker closes its pool, and with it every thread, on
  :meth:`~jupyter_fsbroker.core.broker.Broker.close`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["RequestPool"]

T = TypeVar("T")

_Call = tuple["concurrent.futures.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class _Worker:
    """One thread's mailbox: the call handed to it, and the lock it sleeps on until one is."""

    __slots__ = ("call", "wake")

    def __init__(self) -> None:
        self.call: _Call | None = None
        self.wake = threading.Lock()
        self.wake.acquire()  # held while there is nothing to do: the thread blocks acquiring it


class RequestPool(concurrent.futures.Executor):
    """A bounded thread pool that wakes the most recently idle thread for each call.

    Parameters
    ----------
    max_workers
        The most threads it runs at once.
    thread_name_prefix
        Threads are named ``<prefix>_<n>``.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "pool") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._became_idle = threading.Condition(self._lock)
        self._watchers = 0  # callers of wait_idle: only they need telling
        self._idle: list[_Worker] = []  # a stack: the last one idle is woken first
        self._queue: collections.deque[_Call] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._started = 0
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args, **kwargs)`` on a thread of the pool; its future.

        Raises
        ------
        RuntimeError
            The pool is shut down.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        call: _Call = (future, fn, args, kwargs)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._idle:
                worker = self._idle.pop()
                worker.call = call
            else:
                self._queue.append(call)
                if len(self._threads) < self._max:
                    self._start_thread()
                return future
        worker.wake.release()
        return future

    @property
    def idle(self) -> int:
        """Threads waiting for a call."""
        return len(self._idle)

    def wait_idle(self, count: int, timeout: float | None = None) -> bool:
        """Wait until at least *count* threads wait for a call; whether they do."""
        with self._lock:
            self._watchers += 1
            try:
                return self._became_idle.wait_for(lambda: len(self._idle) >= count, timeout)
            finally:
                self._watchers -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further calls and end the threads once the calls they run (and the queued ones) are done.

        With *cancel_futures*, queued calls are cancelled instead of run.
        """
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                cancelled, self._queue = list(self._queue), collections.deque()
            else:
                cancelled = []
            idle, self._idle = self._idle, []
            threads = list(self._threads)
        for future, *_ in cancelled:
            future.cancel()
        for worker in idle:
            worker.wake.release()  # with no call: it ends
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _start_thread(self) -> None:
        # Under self._lock.
        thread = threading.Thread(
            target=self._serve, name=f"{self._prefix}_{self._started}", args=(_Worker(),), daemon=True
        )
        self._started += 1
        self._threads.append(thread)
        thread.start()

    def _serve(self, worker: _Worker) -> None:
        try:
            call = self._next(worker)
            while call is not None:
                _run(call)
                del call  # the call's arguments and result go before the thread sleeps
                call = self._next(worker)
        finally:
            with self._lock:
                self._threads.remove(threading.current_thread())

    def _next(self, worker: _Worker) -> _Call | None:
        """The next call for this thread: a queued one, or one handed to it after it sleeps; ``None``: end."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            if self._shutdown:
                return None
            self._idle.append(worker)
            if self._watchers:
                self._became_idle.notify_all()
        worker.wake.acquire()
        call, worker.call = worker.call, None
        return call


def _run(call: _Call) -> None:
    future, fn, args, kwargs = call
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)
