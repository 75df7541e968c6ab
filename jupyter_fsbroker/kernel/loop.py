"""The background event loop: one daemon thread with its own asyncio loop.

The MCP client, its ``files/*`` handlers and the watchers run here, never on the
kernel's own loop: that loop stops completely while a synchronous cell runs
(docs/design.md, "Where the client runs"). :class:`BackgroundLoop` starts the thread,
runs coroutines on it from any thread (:meth:`~BackgroundLoop.submit` returns a
:class:`concurrent.futures.Future`), and stops it leaving no thread behind.

Context
-------
Coroutines submitted from a cell would normally inherit the cell's
:mod:`contextvars` (``asyncio`` copies the caller's context into every task it
creates), and with it the cell's Jupyter parent header. Everything submitted
here runs instead in the loop thread's own context, prepared once by the
*prepare* callable given at construction (the kernel glue uses it to give the
loop an empty parent header, see :mod:`.ipykernel_compat`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..core.hop import post

__all__ = ["BackgroundLoop", "LoopClosedError"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopClosedError(RuntimeError):
    """The background loop is not running (never started, or stopped)."""


class BackgroundLoop:
    """An asyncio event loop on a dedicated daemon thread.

    Parameters
    ----------
    name
        The thread's name.
    prepare
        Called once on the new thread before the loop runs; whatever
        :mod:`contextvars` it sets is the context of every coroutine submitted.

    Notes
    -----
    Thread-safe. :meth:`stop` cancels what is still running, shuts down the
    loop's default executor and async generators, closes the loop and joins the
    thread.
    """

    def __init__(self, name: str = "fsbroker-loop", *, prepare: Callable[[], object] | None = None) -> None:
        self._name = name
        self._prepare = prepare
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: contextvars.Context | None = None
        self._stopping = False

    # -- lifetime ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread and wait until its loop runs. Idempotent."""
        with self._lock:
            if self._thread is not None:
                return
            ready = threading.Event()
            failure: list[BaseException] = []
            thread = threading.Thread(target=self._run, args=(ready, failure), name=self._name, daemon=True)
            self._thread = thread
            thread.start()
        ready.wait()
        if failure:
            thread.join()
            with self._lock:
                self._thread = None
            raise LoopClosedError(f"the background loop did not start: {failure[0]!r}") from failure[0]

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            if self._prepare is not None:
                self._prepare()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        self._context = contextvars.copy_context()
        self._loop = loop
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                self._finish(loop)
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def _finish(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop thread, after :meth:`stop`: let cancelled tasks end, then tidy up."""
        tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=5.0))
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.warning("a background task failed while stopping: %r", task.exception())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and join its thread (at most *timeout* seconds). Idempotent.

        Must not be called from the loop's own thread.
        """
        with self._lock:
            thread, loop = self._thread, self._loop
            if thread is None:
                return
            if thread is threading.current_thread():
                raise RuntimeError("the background loop cannot stop itself")
            self._stopping = True
        if loop is not None:
            post(loop, loop.stop)  # already closed: nothing to stop
        thread.join(timeout)
        if thread.is_alive():
            log.warning("the background loop thread did not stop within %g s", timeout)
            return
        with self._lock:
            self._thread = None
            self._loop = None
            self._context = None

    @property
    def running(self) -> bool:
        """Whether the loop runs and accepts work."""
        loop = self._loop
        return loop is not None and loop.is_running() and not self._stopping

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    # -- running work --------------------------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run *coro* on the loop, from any thread; return a future of its result.

        Cancelling the returned future cancels the task. The task runs in the
        loop thread's context, not the caller's.

        Raises
        ------
        LoopClosedError
            The loop is not running (the coroutine is closed, never run).
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        loop, context = self._loop, self._context
        if loop is None or context is None or self._stopping:
            coro.close()
            raise LoopClosedError("the background loop is not running")

        def spawn() -> None:
            if future.cancelled():
                coro.close()
                return
            task = loop.create_task(coro)
            task.add_done_callback(lambda t: _copy_outcome(t, future))
            future.add_done_callback(lambda f: _cancel_task(loop, task, f))

        try:
            loop.call_soon_threadsafe(spawn, context=context)
        except RuntimeError:
            coro.close()
            raise LoopClosedError("the background loop is not running") from None
        return future


def _copy_outcome(task: asyncio.Task[T], future: concurrent.futures.Future[T]) -> None:
    if future.done():
        return
    try:
        if task.cancelled():
            future.cancel()
        elif (exc := task.exception()) is not None:
            future.set_exception(exc)
        else:
            future.set_result(task.result())
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by its owner meanwhile


def _cancel_task(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], future: concurrent.futures.Future[Any]
) -> None:
    if future.cancelled() and not task.done():
        post(loop, task.cancel)  # the loop is closed: the task is gone with it
