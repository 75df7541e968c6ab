"""A connection's memory budget: bytes held by ``files/*`` answers being produced or waiting to be written.

One server sending hundreds of large ``files/read`` at once must not grow the
brokering process without bound (before the budget, finished answers queued
behind the single writer: over 1 GiB for a flood of reads of a 2 MiB file).
:class:`MemoryBudget` bounds it in bytes, not in requests:

* a request *waits* (first come, first served) until its estimated answer fits
  in what is left of the budget; one request alone may always proceed, so a
  budget smaller than one answer slows a server down but never stops it;
* the estimate is corrected to the answer's real size once it is encoded, and
  released once it is written;
* the requests waiting are themselves bounded (by their count and the bytes
  they carry): past that, :meth:`MemoryBudget.admit` says no and the request is
  answered ``RATE_LIMITED`` with ``retryAfterMs`` at once.

So at any time a connection holds at most about twice its budget: answers
being made or written (the budget), and requests waiting their turn (at most
the budget again). :func:`answer_estimate` says what each ``files/*`` request
may cost.

Runs on one asyncio event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Mapping
from typing import Any

__all__ = ["MIN_HELD", "MemoryBudget", "Reservation", "answer_estimate"]

#: What a request waiting its turn is counted as at least (its task, its parsed message).
MIN_HELD = 4096

# What an answer costs beyond its content: the JSON around it, small results.
_OVERHEAD = 4096
# A listing entry while it is being built (a dict of five members) and written.
_LIST_ENTRY = 512


def answer_estimate(
    method: str, params: Mapping[str, Any] | None, *, read_default: int, read_max: int, list_max: int
) -> int:
    """Bytes the answer to one ``files/*`` request may take while it is produced.

    A read of *n* bytes holds, at its peak, the bytes read, their base64 text
    and the encoded JSON line (about 3.7 *n*); a listing, its entries; a write,
    its decoded content beside the request's text. Everything else is small.
    """
    p = params or {}
    if method == "files/read":
        length = p.get("length")
        n = (
            length
            if isinstance(length, int) and not isinstance(length, bool) and length >= 0
            else read_default
        )
        return min(n, read_max) * 11 // 3 + _OVERHEAD
    if method == "files/list":
        wanted = p.get("maxEntries")
        count = (
            wanted if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted > 0 else list_max
        )
        return min(count, list_max) * _LIST_ENTRY + _OVERHEAD
    if method in ("files/write", "files/create"):
        content = p.get("content")
        return (len(content) if isinstance(content, str) else 0) + _OVERHEAD
    return _OVERHEAD


def held_by(params: Mapping[str, Any] | None) -> int:
    """Bytes a waiting request keeps alive: its content, or :data:`MIN_HELD`."""
    content = (params or {}).get("content")
    return max(MIN_HELD, len(content) if isinstance(content, str) else 0)


class Reservation:
    """Bytes reserved for one answer; :meth:`resize` to its real size, :meth:`release` once written."""

    __slots__ = ("_budget", "size")

    def __init__(self, budget: MemoryBudget, size: int) -> None:
        self._budget = budget
        self.size = size

    def resize(self, size: int) -> None:
        """The answer's real size is known: count that instead (never waits, may exceed the budget)."""
        self._budget._change(size - self.size)
        self.size = size

    def release(self) -> None:
        """The answer is written (or will never be): give its bytes back. Idempotent."""
        self._budget._change(-self.size)
        self.size = 0


class MemoryBudget:
    """Bytes for the answers of one connection.

    Parameters
    ----------
    limit
        The budget in bytes.
    max_waiting
        The most requests that may wait their turn.
    """

    def __init__(self, limit: int, *, max_waiting: int = 8192) -> None:
        if limit <= 0:
            raise ValueError("the memory budget must be positive")
        self.limit = limit
        self.max_waiting = max_waiting
        self._used = 0
        self._waiters: collections.deque[tuple[asyncio.Future[None], int]] = collections.deque()
        self._held = 0  # bytes the waiting requests carry
        self.peak = 0  #: the most bytes ever reserved at once

    @property
    def used(self) -> int:
        """Bytes reserved now."""
        return self._used

    @property
    def waiting(self) -> int:
        """Requests waiting for room."""
        return len(self._waiters)

    def admit(self, held: int) -> bool:
        """Whether one more request carrying *held* bytes may wait its turn (or go at once)."""
        if not self._waiters and self._fits(1):
            return True
        return len(self._waiters) < self.max_waiting and self._held + held <= self.limit

    async def reserve(self, size: int, *, held: int = MIN_HELD) -> Reservation:
        """Wait until *size* bytes fit (or nothing else is reserved), in arrival order; reserve them.

        *held* is what the request keeps alive meanwhile (see :meth:`admit`).
        Cancelling the wait leaves nothing reserved.
        """
        if not self._waiters and self._fits(size):
            self._change(size)
            return Reservation(self, size)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (future, size)
        self._waiters.append(entry)
        self._held += held
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self._change(-size)  # granted just as the wait was cancelled: hand it on
            else:
                with contextlib.suppress(ValueError):  # already dropped by _grant
                    self._waiters.remove(entry)
                self._grant()
            raise
        finally:
            self._held -= held
        return Reservation(self, size)

    def _fits(self, size: int) -> bool:
        return self._used == 0 or self._used + size <= self.limit

    def _change(self, delta: int) -> None:
        self._used += delta
        self.peak = max(self.peak, self._used)
        if delta < 0:
            self._grant()

    def _grant(self) -> None:
        while self._waiters:
            future, size = self._waiters[0]
            if future.done():  # cancelled, about to remove itself
                self._waiters.popleft()
                continue
            if not self._fits(size):
                return
            self._waiters.popleft()
            self._used += size
            self.peak = max(self.peak, self._used)
            future.set_result(None)
