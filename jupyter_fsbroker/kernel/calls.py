"""How a cell waits for work on the broker's background loop, and the frame around each tool call.

Everything that talks to servers runs on the background loop (:mod:`.loop`); a
cell only waits for it. :class:`CallRunner` is that bridge for a notebook broker
and its connections: it hands coroutines to the loop, waits for them so that
Ctrl-C / Interrupt cancels the work, refuses to block the loop's own thread (a
deadlock), and frames each tool call in a :class:`~.prompting.CallScope` so that
consent requests and transfer progress of the call appear in the calling cell.

It must never run work on the caller's thread, nor wait on the loop's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from ..core.errors import ClosedError
from .loop import BackgroundLoop, LoopClosedError
from .prompting import CallScope, KernelConsenter
from .running_calls import CallName, RunningCall, RunningCalls
from .tool_results import CallCancelled

__all__ = ["CallRunner", "wait_interruptibly"]

T = TypeVar("T")


def wait_interruptibly(future: Future[T]) -> T:
    """Block until *future* is done and return its result; Ctrl-C cancels it and re-raises."""
    try:
        concurrent.futures.wait((future,))
        return future.result()
    except BaseException:
        future.cancel()
        raise


class CallRunner:
    """Runs a notebook broker's work on its background loop, for cells on any thread.

    Parameters
    ----------
    loop
        The broker's background loop.
    new_scope
        Builds the :class:`~.prompting.CallScope` of a tool call on the connection
        with the given broker-side id.
    consenter
        The consenter that routes consent requests to calls in flight; ``None``
        when another consenter (a terminal, a policy) answers them.
    keep
        Takes the panel a call showed in its cell, once the call ended (its
        owner closes it with the broker).
    running
        The broker's calls in flight: each tool call is listed there while it runs.
    """

    def __init__(
        self,
        loop: BackgroundLoop,
        *,
        new_scope: Callable[[str], CallScope],
        consenter: KernelConsenter | None,
        keep: Callable[[Any], None],
        running: RunningCalls | None = None,
    ) -> None:
        self.running = running if running is not None else RunningCalls()
        self._loop = loop
        self._new_scope = new_scope
        self._consenter = consenter
        self._keep = keep

    def check_thread(self) -> None:
        """Refuse to wait on the loop's own thread, where the work could never run.

        Raises
        ------
        RuntimeError
            The caller runs on the broker's event loop.
        """
        if self._loop.in_loop_thread():
            raise RuntimeError("blocking broker calls cannot run on the broker's own event loop")

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run *coro* on the loop; return a future of its result (cancelling it cancels the work).

        Raises
        ------
        ClosedError
            The broker is closed (its loop stopped); *coro* never runs.
        """
        try:
            return self._loop.submit(coro)
        except LoopClosedError:
            raise ClosedError("the broker is closed") from None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run *coro* on the loop and wait for its result; Ctrl-C cancels it.

        Raises
        ------
        RuntimeError
            Called on the loop's own thread.
        ClosedError
            The broker is closed.
        """
        self.check_thread()
        return wait_interruptibly(self.submit(coro))

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run *coro* on the loop and await its result on the caller's loop; cancelling cancels it."""
        self.check_thread()
        future = self.submit(coro)
        try:
            return await asyncio.wrap_future(future)
        except BaseException:
            future.cancel()
            raise

    def run_call(
        self, name: CallName, coro: Coroutine[Any, Any, T], *, cancelled: Callable[[], Exception]
    ) -> T:
        """Run the tool call *coro* (*name*: whose and which) framed in a call (:meth:`call`), and wait.

        The calling cell shows the call's consent requests, progress and running
        line while it waits; Ctrl-C cancels the call. A call cancelled under it
        raises :class:`~.tool_results.CallCancelled` when its Cancel did it, else
        ``cancelled()`` (the broker closing).
        """
        with self._in_flight(name, coro) as (scope, call, future):
            try:
                return scope.wait(future)
            except concurrent.futures.CancelledError:
                raise self._why_cancelled(call, cancelled) from None

    async def arun_call(
        self, name: CallName, coro: Coroutine[Any, Any, T], *, cancelled: Callable[[], Exception]
    ) -> T:
        """:meth:`run_call` for async cells: awaited on the caller's loop, which keeps handling clicks."""
        with self._in_flight(name, coro) as (scope, call, future):
            try:
                return await scope.wait_async(future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and not (task is not None and task.cancelling()):
                    # Cancelled under the call (its Cancel, the broker closing), not this task.
                    raise self._why_cancelled(call, cancelled) from None
                raise

    @contextlib.contextmanager
    def _in_flight(
        self, name: CallName, coro: Coroutine[Any, Any, T]
    ) -> Iterator[tuple[CallScope, RunningCall, Future[T]]]:
        """Frame the call, list it among those in flight while its cell waits, and submit it.

        Its scope shows its running line, whose Cancel cancels the submitted work.
        """
        with self.call(name.connection_id) as scope:
            call = self.running.start(name)
            try:
                scope.follow(call, lambda: self.running.cancel(call.id))
                future = self.submit(coro)
                self.running.attach(call.id, future)
                yield scope, call, future
            finally:
                self.running.end(call.id)

    def _why_cancelled(self, call: RunningCall, cancelled: Callable[[], Exception]) -> Exception:
        if self.running.was_cancelled(call.id):
            return CallCancelled(tool=call.tool, connection=call.server, after=call.elapsed())
        return cancelled()

    @contextlib.contextmanager
    def call(self, connection_id: str) -> Iterator[CallScope]:
        """Frame one tool call on connection *connection_id*: its consent requests come to this scope.

        Raises
        ------
        RuntimeError
            Entered on the loop's own thread.
        """
        self.check_thread()
        scope = self._new_scope(connection_id)
        if self._consenter is not None:
            self._consenter.enter(scope)
        try:
            yield scope
        finally:
            if self._consenter is not None:
                self._consenter.leave(scope)
            scope.end()
            if scope.panel is not None:
                self._keep(scope.panel)
