"""A connection's memory budget: bytes held by ``files/*`` answers being produced or waiting to be written.

One server sending hundreds of large ``files/read`` at once must not grow the
brokering process without bound (before the budget, finished answers queued
behind the single writer: over 1 GiB for a flood of reads of a 2 MiB file).
:class:`MemoryBudget` bounds it in bytes, not in requests:

* a request asks for its estimated answer's bytes the moment it arrives, and
  *waits* (first come, first served) until they fit in what is left of the
  budget; one request alone may always proceed, so a budget smaller than one
  answer slows a server down but never stops it;
* the estimate is corrected to the answer's real size once it is encoded, and
  released once it is written;
* the requests waiting are themselves bounded (by their count and the bytes
  they carry): past that, :meth:`MemoryBudget.request` says no and the request
  is answered ``RATE_LIMITED`` with ``retryAfterMs`` at once.

So at any time a connection holds at most about twice its budget: answers
being made or written (the budget), and requests waiting their turn (at most
the budget again). :func:`answer_estimate` says what each ``files/*`` request
may cost.

Threads: the budget changes on the connection's event loop only (a request's
turn is an asyncio future); what it holds may be read from any thread
(:meth:`MemoryBudget.snapshot`, :meth:`MemoryBudget.would_grant`,
:meth:`MemoryBudget.may_wait`), consistently, under
its lock: the desk decides on the transport's reading thread too.
"""

from __future__ import annotations

import asyncio
import collections
import threading
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
    """Bytes asked for one answer: :meth:`wait` for them, :meth:`resize` to the real size, :meth:`release`.

    Made by :meth:`MemoryBudget.request`, in the order requests arrive.
    """

    __slots__ = ("_budget", "_granted", "held", "size")

    def __init__(self, budget: MemoryBudget, size: int, held: int) -> None:
        self._budget = budget
        self.size = size
        self.held = held
        self._granted: asyncio.Future[None] | None = None

    @property
    def granted(self) -> bool:
        """Whether the bytes are reserved (the answer may be produced)."""
        return self._granted is None or (self._granted.done() and not self._granted.cancelled())

    async def wait(self) -> None:
        """Wait for the turn of this answer; cancelling the wait gives everything back."""
        if self._granted is None:
            return
        try:
            await asyncio.shield(self._granted)
        except BaseException:
            self.release()
            raise

    def resize(self, size: int) -> None:
        """The answer's real size is known: count that instead (never waits, may exceed the budget)."""
        if self.granted:
            self._budget._change(size - self.size)
        self.size = size

    def release(self) -> None:
        """The answer is written (or never will be): give its bytes back. Idempotent."""
        self._budget._drop(self)


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
        self._waiting: collections.deque[Reservation] = collections.deque()
        self._held = 0  # bytes the waiting requests carry
        self._live: set[Reservation] = set()
        self._lock = threading.Lock()
        self.peak = 0  #: the most bytes ever reserved at once

    @property
    def used(self) -> int:
        """Bytes reserved now."""
        return self._used

    @property
    def waiting(self) -> int:
        """Requests waiting for room."""
        return len(self._waiting)

    def snapshot(self) -> tuple[int, int]:
        """``(used, waiting)``, read together: bytes reserved and requests waiting, at one instant."""
        with self._lock:
            return self._used, len(self._waiting)

    def would_grant(self, size: int) -> bool:
        """Whether :meth:`request` would grant *size* bytes now, without waiting."""
        with self._lock:
            return not self._waiting and self._fits(size)

    def may_wait(self, held: int = MIN_HELD) -> bool:
        """Whether :meth:`request` would let a request carrying *held* bytes wait its turn."""
        with self._lock:
            return len(self._waiting) < self.max_waiting and self._held + held <= self.limit

    def request(self, size: int, *, held: int = MIN_HELD) -> Reservation | None:
        """Ask for *size* bytes, now, in arrival order; ``None`` when too many requests wait already.

        The reservation is granted at once when nobody waits and the bytes fit
        (or nothing else is reserved); otherwise it waits its turn
        (:meth:`Reservation.wait`), keeping *held* bytes alive meanwhile, and
        is refused when that would put more than :attr:`max_waiting` requests,
        or more than the budget in bytes, in the queue.
        """
        reservation = Reservation(self, size, held)
        with self._lock:
            if not self._waiting and self._fits(size):
                self._take(reservation)
                return reservation
            if len(self._waiting) >= self.max_waiting or self._held + held > self.limit:
                return None
            reservation._granted = asyncio.get_running_loop().create_future()
            self._waiting.append(reservation)
            self._held += held
        return reservation

    def _fits(self, size: int) -> bool:
        return self._used == 0 or self._used + size <= self.limit

    def _take(self, reservation: Reservation) -> None:
        self._live.add(reservation)
        self._used += reservation.size
        self.peak = max(self.peak, self._used)

    def _change(self, delta: int) -> None:
        with self._lock:
            self._changed(delta)

    def _changed(self, delta: int) -> None:
        self._used += delta
        self.peak = max(self.peak, self._used)
        if delta < 0:
            self._grant()

    def _drop(self, reservation: Reservation) -> None:
        with self._lock:
            if reservation in self._live:
                self._live.discard(reservation)
                self._changed(-reservation.size)
            elif reservation in self._waiting:
                self._waiting.remove(reservation)
                self._held -= reservation.held
                assert reservation._granted is not None
                reservation._granted.cancel()
                self._grant()

    def _grant(self) -> None:
        while self._waiting and self._fits(self._waiting[0].size):
            reservation = self._waiting.popleft()
            self._held -= reservation.held
            self._take(reservation)
            assert reservation._granted is not None
            if not reservation._granted.done():
                reservation._granted.set_result(None)
