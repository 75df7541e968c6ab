"""stdio's framing: bytes read from a pipe, cut into JSON-RPC lines (:class:`LineSplitter`).

Pure: it is fed bytes and calls back with whole lines, so it is tested without a pipe. Each byte
is searched for a newline once (a read that holds whole messages is cut without a copy into the
buffer); blank lines are skipped; a line longer than the limit is never held whole: once the
buffer passes the limit, what follows up to the next newline is counted and dropped, and the line
is reported with its first bytes (they may name the request to refuse). The last line of a
stream may lack its newline (:meth:`LineSplitter.end`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..framing import MAX_MESSAGE_BYTES

__all__ = ["PREFIX_BYTES", "LineSplitter"]

#: How many first bytes of an over-long line are kept to report it.
PREFIX_BYTES = 4096


class LineSplitter:
    """Cuts a byte stream into lines, in order.

    Parameters
    ----------
    on_line
        Called with each non-blank line, without its newline (``bytes`` or a ``bytearray``
        that the splitter reuses after the call returns).
    on_too_long
        Called with ``(prefix, size)`` for a line longer than *limit*: its first
        :data:`PREFIX_BYTES` bytes and its size (at least; a line dropped as it came is
        counted up to its newline).
    limit
        The longest line, in bytes.
    """

    def __init__(
        self,
        on_line: Callable[[bytes | bytearray], None],
        on_too_long: Callable[[bytes, int], None],
        *,
        limit: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._on_line = on_line
        self._on_too_long = on_too_long
        self._limit = limit
        self._buffer = bytearray()
        self._searched = 0  # bytes at the start of _buffer known to hold no newline
        self._skipped: int | None = None  # bytes of an over-long line dropped so far
        self._skipped_prefix = b""

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held (not those of an over-long line being dropped)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        """Take the bytes of one read; call back with every line they finish."""
        if self._skipped is not None:
            end = data.find(b"\n")
            if end < 0:
                self._skipped += len(data)
                return
            self._on_too_long(self._skipped_prefix, self._skipped + end)
            self._skipped = None
            data = data[end + 1 :]
        buffer = self._buffer
        if not buffer:
            # The common case: whole messages in one read, framed without a copy into the buffer.
            start = 0
            end = data.find(b"\n")
            while end >= 0:
                self._line(data[start:end])
                start = end + 1
                end = data.find(b"\n", start)
            if start < len(data):
                buffer += data[start:] if start else data
            self._searched = len(buffer)
        else:
            buffer += data
            end = buffer.find(b"\n", self._searched)
            start = 0
            while end >= 0:
                self._line(buffer[start:end])
                start = end + 1
                end = buffer.find(b"\n", start)
            if start:
                del buffer[:start]
            self._searched = len(buffer)
        if len(buffer) > self._limit:
            self._skipped = len(buffer)
            self._skipped_prefix = bytes(buffer[:PREFIX_BYTES])
            buffer.clear()
            self._searched = 0

    def end(self) -> None:
        """The stream ended: call back with a last line that lacks its newline, and forget it."""
        if self._buffer.strip() and self._skipped is None:
            self._line(self._buffer)
        self._buffer.clear()
        self._searched = 0

    def _line(self, line: bytes | bytearray) -> None:
        if len(line) > self._limit:
            self._on_too_long(bytes(line[:PREFIX_BYTES]), len(line))
        elif line.strip():
            self._on_line(line)
