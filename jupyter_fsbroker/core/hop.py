"""Running one blocking call on a worker thread and awaiting its result from the event loop.

:func:`off_loop` is ``loop.run_in_executor`` with the same guarantees and less
work per call. ``run_in_executor`` wraps the executor's future in an asyncio
future chained both ways (callbacks on each side, the result copied across
under the executor future's lock, a second loop callback to check for
cancellation): a large share of the event loop's own work on a small
``files/read`` (``benchmarks/README.md``, "Why the code is shaped this way").
Here the worker thread hands its result straight to an asyncio
future with one ``call_soon_threadsafe``:

* the call runs on a thread of *executor* (which bounds the threads);
* cancelling the awaiting task cancels the call if it has not started yet; one
  that has started runs to its end and its result is dropped;
* the executor cancelling the call before it ran (its shutdown) cancels the
  awaiting task, as with ``run_in_executor``;
* a result arriving after the loop closed is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

__all__ = ["off_loop", "post"]

T = TypeVar("T")


async def off_loop(executor: concurrent.futures.Executor, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a thread of *executor*; its result, or what it raised."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    work = executor.submit(_run, loop, future, fn, args)
    work.add_done_callback(partial(_done, loop, future))
    try:
        return await future
    except asyncio.CancelledError:
        work.cancel()  # not started yet: it never will
        raise


def _run(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], fn: Callable[..., Any], args: Any
) -> None:
    try:
        result = fn(*args)
    except BaseException as exc:  # what run_in_executor also carries across
        _deliver(loop, _fail, future, exc)
        return
    _deliver(loop, _succeed, future, result)


def _done(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], work: concurrent.futures.Future[Any]
) -> None:
    # Only the executor cancelling a call that never ran needs telling: _run settles the rest.
    if work.cancelled():
        _deliver(loop, _cancel, future, None)


def post(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], /, *args: Any) -> bool:
    """From any thread: have *loop* call ``callback(*args)`` soon; ``False`` (nothing done) if it is closed.

    A closed loop means that whatever the callback was for is gone with it
    (the connection, the awaiting task), so callers drop the call.
    """
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        return False
    return True


def _deliver(loop: asyncio.AbstractEventLoop, settle: Callable[..., None], future: Any, value: Any) -> None:
    post(loop, settle, future, value)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _cancel(future: asyncio.Future[Any], _: object) -> None:
    future.cancel()
