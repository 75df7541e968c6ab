"""Reading a brokered file ahead of a sequential reader: :class:`ReadAhead`, the files' fsspec cache.

A CSV or JSON parser reads a file front to back in pieces of a few hundred KiB
and parses each before it asks for the next; one request per piece would leave
the wire idle while the parser works and the parser idle while the wire works.
As s3fs and gcsfs do, the file is read ahead of such a reader: once two reads
in a row start where the one before ended, the next window is asked for in the
background (its wire chunks all in flight at once), and the window grows with
the streak up to :data:`READ_AHEAD_BYTES`; while the reader is inside one
window, the next is on its way. A reader that seeks elsewhere (a Parquet or
DuckDB reader jumping between column chunks) ends the streak and gets what it
asked for plus a small block, so that random access moves no bytes no one
asked for.

Not thread-safe by itself: the file that owns it calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from fsspec.caching import BaseCache  # type: ignore[import-untyped]

from ..wire.caps import MiB

__all__ = ["READ_AHEAD_BYTES", "ReadAhead"]

#: The largest window read ahead of a sequential reader: four of the wire's largest chunks, all
#: in flight at once, while the reader works through the window before.
READ_AHEAD_BYTES = 8 * MiB
#: Reads in a row, each starting where the last ended, before anything is read ahead.
STREAK = 2


class ReadAhead(BaseCache):  # type: ignore[misc]
    """Bytes of one file held for its reader, and the next window asked for in the background.

    Parameters
    ----------
    blocksize
        What a read that is not sequential fetches beyond its end.
    fetcher
        ``fetcher(start, end)``: bytes ``[start, end)``, blocking.
    size
        The file's size.
    prefetch
        ``prefetch(start, end)``: the same bytes, fetched in the background.
    max_ahead
        The largest window read ahead.
    """

    name = "fsbroker-readahead"

    def __init__(
        self,
        blocksize: int,
        fetcher: Callable[[int, int], bytes],
        size: int,
        *,
        prefetch: Callable[[int, int], Future[bytes]],
        max_ahead: int = READ_AHEAD_BYTES,
    ) -> None:
        super().__init__(blocksize, fetcher, size)
        self._prefetch = prefetch
        self._max_ahead = max_ahead
        #: The bytes held: ``[_start, _start + len(_data))``.
        self._start = 0
        self._data = b""
        #: The window on its way: ``(start, end, future)``.
        self._ahead: tuple[int, int, Future[bytes]] | None = None
        self._last = self._next = 0  # where the last read started and ended
        self._streak = 0

    def _fetch(self, start: int | None, end: int | None) -> bytes:
        start = 0 if start is None else start
        end = self.size if end is None else min(end, self.size)
        if start >= end:
            return b""
        # Sequential: on from the last read, or back into it (a line reader seeks back to just
        # after the line it found).
        sequential = self._last <= start <= self._next
        self._streak = self._streak + 1 if sequential else 0
        self._last, self._next = start, end
        self._take_ahead(start, end)
        held_end = self._start + len(self._data)
        if self._start <= start and end <= held_end:
            self.hit_count += 1
            out = self._data[start - self._start : end - self._start]
        else:
            self.miss_count += 1
            keep = self._start <= start < held_end
            head = self._data[start - self._start :] if keep else b""
            begin = held_end if keep else start
            # A reader that jumps about gets a small block more, as fsspec's "readahead" cache gives.
            want = end if self._streak >= STREAK else min(end + self.blocksize, self.size)
            more = self.fetcher(begin, want)
            self.total_requested_bytes += len(more)
            self._start, self._data = start, head + more
            out = self._data[: end - start]
        if self._streak >= STREAK:
            self._read_ahead(end, end - start)
        return out

    def _take_ahead(self, start: int, end: int) -> None:
        """Join the window on its way to what is held, if this read reaches into it."""
        if self._ahead is None:
            return
        first, last, future = self._ahead
        if not (start < last and first < end):
            if self._streak == 0:
                self._ahead = None  # the reader went elsewhere: what comes of it is dropped
            return
        self._ahead = None
        data = future.result()
        self.total_requested_bytes += len(data)
        held_end = self._start + len(self._data)
        if held_end == first and self._start <= start < held_end:
            self._data = self._data[start - self._start :] + data
            self._start = start
        else:
            self._start, self._data = first, data

    def _read_ahead(self, end: int, length: int) -> None:
        """Ask for the next window in the background unless one is on its way or held already."""
        if self._ahead is not None:
            return
        held_end = self._start + len(self._data)
        window = min(self._max_ahead, max(length, self.blocksize) << self._streak)
        if held_end >= self.size or held_end - end >= window:
            return
        last = min(self.size, held_end + window)
        self._ahead = (held_end, last, self._prefetch(held_end, last))

    def close(self) -> None:
        """Drop what is held; a window still on its way is dropped when it arrives."""
        self._ahead = None
        self._data = b""
