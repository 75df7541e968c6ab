"""Byte buffers a connection lends to one chunk at a time, so that big chunks reuse memory.

A ``files/read`` of 1 MiB passes through buffers of 1-3 MB: the bytes read,
the JSON answer on its way to the server. Made new for every chunk and
dropped after it, their pages go back to the system (the C allocator returns
the top of a heap once a few MiB of it are free) and are faulted in again
for the next chunk: more than half of what the brokering process spent on a
streamed read (the figures are in ``benchmarks/README.md``, "Why the code is
shaped this way"). A :class:`BufferPool` keeps the few buffers a connection's
chunks in flight need and lends them out again; it lets go of them once none
was taken for a second (:meth:`BufferPool.discard_idle`, which the broker's
janitor calls every second) and when the connection closes. Nothing here
changes how the process's allocator serves anyone else.
"""

from __future__ import annotations

import threading
import time

from .resource import Closeable

__all__ = ["POOLED_MIN", "BufferPool"]

#: Buffers smaller than this are not worth keeping: the allocator reuses them by itself.
POOLED_MIN = 64 * 1024
# Sizes are rounded up to this, so that the next chunk's answer (a few bytes longer: its
# offset has more digits) fits the buffer of the last one.
_GRAIN = 64 * 1024


class BufferPool(Closeable):
    """Reusable byte buffers, lent by :meth:`take` and given back by :meth:`give` (from any thread).

    A buffer never given back is simply dropped: lending one out again is an
    optimisation, never a duty.

    Parameters
    ----------
    keep
        Free buffers kept at most (the smallest go first).
    idle
        Seconds without a :meth:`take` after which :meth:`discard_idle` drops the free buffers.
    """

    def __init__(self, keep: int = 8, idle: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._free: list[bytearray] = []
        self._keep = keep
        self._idle = idle
        self._taken_at = 0.0
        self._closed = False
        #: Buffers made so far (every other :meth:`take` lent a kept one again).
        self.made = 0

    def take(self, size: int) -> bytearray:
        """A buffer of at least *size* bytes: the smallest kept one that is large enough, or a new one."""
        with self._lock:
            self._taken_at = time.monotonic()
            fitting = [buffer for buffer in self._free if len(buffer) >= size]
            if fitting:
                best = min(fitting, key=len)
                self._free.remove(best)
                return best
            self.made += 1
        return bytearray(-(-size // _GRAIN) * _GRAIN)

    def give(self, buffer: bytearray) -> None:
        """Give *buffer* back for the next :meth:`take` (nothing may use it any more)."""
        with self._lock:
            if self._closed:
                return
            self._free.append(buffer)
            if len(self._free) > self._keep:
                self._free.remove(min(self._free, key=len))

    @property
    def kept(self) -> int:
        """Bytes of the free buffers kept now."""
        with self._lock:
            return sum(len(buffer) for buffer in self._free)

    def discard_idle(self) -> None:
        """Drop the free buffers if none was taken for ``idle`` seconds."""
        with self._lock:
            if self._free and time.monotonic() - self._taken_at >= self._idle:
                self._free.clear()

    def close(self) -> None:
        """Drop the free buffers; buffers given back later are dropped too. Idempotent."""
        with self._lock:
            self._closed = True
            self._free.clear()
