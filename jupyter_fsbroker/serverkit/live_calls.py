"""Live calls: a modern tool call kept running in the replica that ran its last round.

Replay (:mod:`.replay`) lets any replica carry on a call, but each round re-runs the tool over
every answer so far, and the journal rides in the continuation: a call that streams much data
outgrows it, and its cost grows with the square of the rounds. So the replica that ran a round
also keeps the tool's run, waiting on its batch, in a bounded table of this process, keyed by
the call's id: a continuation that comes back to it hands the answers to the waiting calls and
the tool goes on from where it is, at the cost of one batch. Another replica can still replay
the call while its journal fits in a continuation; past that the call is live here only.

A kept run is cancelled when its continuation expires, when the table needs its place for a
newer call, and when the server stops (:meth:`LiveCalls.close`). Its tool keeps the context of
the request that began the call; ``files(ctx)`` on this wire needs nothing of that request but
the client's description, which the step holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .replay import ReplayStep

__all__ = ["LiveCall", "LiveCalls", "run_round", "settle"]

log = logging.getLogger(__name__)

# Event-loop turns without a new operation after which a waiting tool is taken to have asked
# all it can without answers (concurrent calls, such as a read-ahead, join the batch meanwhile).
_QUIET_TURNS = 8


@dataclass(frozen=True)
class LiveCall:
    """One kept run: the tool's task, its step, and the round whose answers it waits for."""

    step: ReplayStep
    task: asyncio.Future[Any]
    round: int

    def cancel(self) -> None:
        """End the run: the calls it waits in are cancelled, and so is the tool."""
        self.step.close()
        self.task.cancel()


class LiveCalls:
    """The kept runs of this process, at most *capacity*, each until its deadline.

    Parameters
    ----------
    capacity
        How many calls are kept at once; a newer call takes the place of the oldest one.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._calls: OrderedDict[str, tuple[LiveCall, asyncio.TimerHandle]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._calls)

    def keep(self, call: str, live: LiveCall, ttl: float) -> bool:
        """Keep *live* as call *call* for *ttl* seconds; ``False`` when nothing can be kept."""
        if self.capacity < 1 or ttl <= 0:
            return False
        self.drop(call)
        while len(self._calls) >= self.capacity:
            oldest, (evicted, timer) = self._calls.popitem(last=False)
            timer.cancel()
            evicted.cancel()
            log.info("live call %s evicted: %d calls are kept at most", oldest, self.capacity)
        timer = asyncio.get_running_loop().call_later(ttl, self._expire, call, live)
        self._calls[call] = (live, timer)
        return True

    def take(self, call: str) -> LiveCall | None:
        """The run kept for *call*, no longer kept (the caller keeps it again after its round)."""
        item = self._calls.pop(call, None)
        if item is None:
            return None
        item[1].cancel()
        return item[0]

    def drop(self, call: str) -> None:
        """Cancel the run kept for *call*, if any."""
        live = self.take(call)
        if live is not None:
            live.cancel()

    def close(self) -> None:
        """Cancel every kept run (the server is stopping)."""
        while self._calls:
            _, (live, timer) = self._calls.popitem()
            timer.cancel()
            live.cancel()

    def _expire(self, call: str, live: LiveCall) -> None:
        item = self._calls.get(call)
        if item is not None and item[0] is live:
            del self._calls[call]
            live.cancel()


async def settle(step: ReplayStep, task: asyncio.Future[Any], *, wait: bool = True) -> bool:
    """Let the tool run until it ends (``True``: *task* is done) or waits with a batch for the
    client (``False``); with *wait* false, only until it is quiet (it may wait on an operation
    that no answer will come for: the client cancelled the call). Cancelled (the request went
    away), it cancels the tool."""
    waiter = asyncio.ensure_future(step.wait_for_new())
    try:
        if wait:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        quiet = 0
        while not task.done() and quiet < _QUIET_TURNS and not step.full:
            asked = step.asked
            await asyncio.sleep(0)
            quiet = quiet + 1 if step.asked == asked else 0
        return task.done()
    except BaseException:
        step.close()
        task.cancel()
        raise
    finally:
        waiter.cancel()


async def run_round(live: LiveCall, *, cancelling: bool, answered_only: bool) -> bool:
    """Run the round of *live* until the tool ends (``True``) or waits with a batch (``False``).

    *cancelling*: the client cancelled the call. The tool takes the answers it was sent (a lock's
    id, say, which it then releases) before it is cancelled where it waits; a run replaying a
    cancelled call is cancelled where the call was, and goes on with its clean-up's recorded
    answers. *answered_only*: the tool may wait on an operation no answer will come for (the
    client sent the answers of those it performed before it cancelled).
    """
    step, task = live.step, live.task
    ended = await settle(step, task, wait=not answered_only)
    if cancelling and not step.cancelled and not ended:
        step.cancel()
        task.cancel()
        ended = await settle(step, task)
    return ended
