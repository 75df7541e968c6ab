"""The client's messages off a pipe: read into one kept buffer, parsed as each line ends.

:class:`LineReader` reads the read pipe of :func:`~.stdio_server.stdio_streams`
itself, straight into a buffer it keeps, and parses each line there as soon
as it ends. A ``files/read`` answer is a line of 1.4 MB for a 1 MiB chunk;
asyncio's pipe transport read it as pieces of 256 KiB, each a new ``bytes``,
joined into a new line: buffers of a few MiB made and dropped for every
chunk, whose pages the C allocator hands back to the system and faults in
again for the next one (a third of what the server spent on a chunk:
``benchmarks/README.md``, "Why the code is shaped this way"). The kept buffer is written again for every line
instead, and given back once no message came for a second.

:func:`parse_line` parses one message. A ``files/read`` answer is mostly its
``content``: 1.4 MB of base64 for a 1 MiB chunk, which ``pydantic_core``'s
JSON parser scans and copies character by character, many times slower than
checking it. When a message holds exactly one ``"content":"`` member, at the
top of ``result``, whose value is valid base64 (checked by decoding it in
slices, SIMD-fast), the rest of the message is parsed without it and the
value is put back as it was. Anything else — text content, escapes around
it, several ``content`` members, another shape — is parsed the ordinary way,
so the result is always what the JSON parser gives for the whole message,
with one exception asked for: an answer *decode* says yes to (one that
answers a binary read of the helper's own, :meth:`.direct.DirectChannel.wants_bytes`)
gets a base64 ``content`` of its ``result`` as the decoded ``bytes``, and no
text is made for it at all.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable
from typing import Any

import pydantic_core

from .exceptions import IntegrityError
from .lenient import FAST_BASE64, decode_base64, is_base64

#: Whether an answer (parsed without its content) should get a base64 content decoded.
Decoder = Callable[[object], bool]

__all__ = ["Decoder", "LineReader", "parse_line"]

# Smaller contents are parsed the ordinary way: splicing pays for itself on large ones only.
_SPLICE_MIN = 64 * 1024
_CONTENT = b'"content":"'
_CONTENT_TOKEN = b'"content"'

# Messages parsed but not yet taken before reading pauses.
_QUEUE_MESSAGES = 64
_QUEUE_BYTES = 16 * 1024 * 1024

# The buffer: its first size, the least room a read gets and the most it asks for at once.
_FIRST_SIZE = 256 * 1024
_READ_MIN = 64 * 1024
_READ_MAX = 1024 * 1024
# Seconds without a read after which the buffer is given back (made again by the next read).
_IDLE = 1.0
_WHITESPACE = b" \t\r\n"


def parse_line(
    data: bytes | bytearray, start: int = 0, end: int | None = None, *, decode: Decoder | None = None
) -> Any:
    """The JSON value of the message ``data[start:end]`` (see the module's docstring).

    Raises
    ------
    ValueError
        It is not JSON (``pydantic_core``'s error).
    """
    end = len(data) if end is None else end
    if FAST_BASE64 and end - start >= _SPLICE_MIN:
        spliced = _without_content(data, start, end, decode)
        if spliced is not None:
            return spliced
    return pydantic_core.from_json(data if start == 0 and end == len(data) else data[start:end])


def _without_content(line: bytes | bytearray, lo: int, hi: int, decode: Decoder | None) -> Any:
    """``line[lo:hi]`` parsed with its large base64 ``result.content`` taken aside, or ``None``."""
    key = line.find(_CONTENT, lo, hi)
    if key < 0:
        return None
    start = key + len(_CONTENT)
    end = line.find(b'"', start, hi)
    if end - start < _SPLICE_MIN:  # also end < 0: no closing quote
        return None
    # Exactly one "content" token and no escapes outside the value: then a "content" key of
    # result, if the rest of the message has one, is this one.
    if (
        line.find(_CONTENT_TOKEN, lo, key) >= 0
        or line.find(_CONTENT_TOKEN, end, hi) >= 0
        or line.find(b"\\", lo, key) >= 0
        or line.find(b"\\", end, hi) >= 0
    ):
        return None
    view = memoryview(line)
    value = view[start:end]
    try:
        obj = pydantic_core.from_json(b"".join((view[lo:start], view[end:hi])))
    except ValueError:
        return None
    result = obj.get("result") if isinstance(obj, dict) else None
    if not isinstance(result, dict) or result.get("content") != "":
        return None
    if decode is not None and result.get("encoding", "base64") == "base64" and decode(obj):
        try:
            result["content"] = decode_base64(value)  # also the check that it is base64
        except IntegrityError:
            return None
        return obj
    if not is_base64(value):  # its alphabet has no quote, backslash or control character
        return None
    result["content"] = str(value, "ascii")
    return obj


class LineReader:
    """Newline-delimited messages off a non-blocking pipe, parsed; ``async for`` takes them in order.

    Each item is a message's JSON value, or the ``ValueError`` of a line that
    is not JSON or was longer than *max_line* (dropped as it arrived); blank
    lines are skipped. Reading pauses while too many messages wait to be
    taken, and ends at end of file (a last line without its newline counts)
    or on :meth:`close`.

    Parameters
    ----------
    loop
        The event loop that watches *fd*.
    fd
        The pipe's read end, non-blocking; the caller closes it after :meth:`close`.
    max_line
        The longest line accepted, in bytes.

    Attributes
    ----------
    decode
        What :func:`parse_line` asks whether an answer's base64 content comes decoded.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, max_line: int) -> None:
        self._loop = loop
        self._fd = fd
        self._max_line = max_line
        self.decode: Decoder | None = None
        # The bytes read: the line not yet ended is _buffer[_start:_filled], of which the
        # bytes before _scanned hold no newline.
        self._buffer = bytearray()
        self._start = self._filled = self._scanned = 0
        self._skipping = False  # dropping the rest of a line over the limit
        self._items: collections.deque[tuple[Any, int]] = collections.deque()
        self._queued = 0
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._watching = False
        self._reads = 0
        self._idle: asyncio.TimerHandle | None = None
        self._watch(True)

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self._eof:
                raise StopAsyncIteration
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        item, size = self._items.popleft()
        self._queued -= size
        if not self._eof and not self._full():
            self._watch(True)
        return item

    def close(self) -> None:
        """Stop reading (the pipe stays open) and end the iteration once what was parsed is taken."""
        self._watch(False)
        self._eof = True
        self._buffer = bytearray()
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._wake()

    @property
    def waiting(self) -> int:
        """Messages parsed and not yet taken."""
        return len(self._items)

    @property
    def buffer_size(self) -> int:
        """Bytes of the buffer kept now (0 once it was given back)."""
        return len(self._buffer)

    # -- reading --------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        room = self._room()
        try:
            count = os.readv(self._fd, [room])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            count = 0
        finally:
            room.release()
        if not count:
            self._end()
            return
        self._reads += 1
        self._filled += count
        self._frame()
        if self._full():
            self._watch(False)
        if self._idle is None:
            self._idle = self._loop.call_later(_IDLE, self._give_back, self._reads)

    def _room(self) -> memoryview:
        """Where the next read goes: after what is read, with at least ``_READ_MIN`` bytes of room."""
        buffer = self._buffer
        if len(buffer) - self._filled < _READ_MIN:
            pending = self._filled - self._start
            if pending + _READ_MIN <= len(buffer) // 2:
                # The line not yet ended moves to the front: at most half the buffer is copied
                # once at least half of it was read since the last move.
                view = memoryview(buffer)
                view[:pending] = view[self._start : self._filled]
                view.release()
            else:
                bigger = bytearray(max(_FIRST_SIZE, 2 * len(buffer)))
                bigger[:pending] = memoryview(buffer)[self._start : self._filled]
                self._buffer = buffer = bigger
            self._scanned -= self._start
            self._start, self._filled = 0, pending
        return memoryview(buffer)[self._filled : min(len(buffer), self._filled + _READ_MAX)]

    def _frame(self) -> None:
        """Parse every line the last read ended; drop a line over the limit as it arrives."""
        buffer = self._buffer
        while (end := buffer.find(b"\n", self._scanned, self._filled)) >= 0:
            if self._skipping:
                self._skipping = False
                self._push(self._too_long(), 0)
            elif end - self._start > self._max_line:
                self._push(self._too_long(), 0)
            else:
                self._line(self._start, end)
            self._start = self._scanned = end + 1
        self._scanned = self._filled
        if self._skipping or self._filled - self._start > self._max_line:
            self._skipping = True
            self._start = self._filled  # nothing of it is kept
        if self._start == self._filled:
            self._start = self._filled = self._scanned = 0

    def _line(self, start: int, end: int) -> None:
        buffer = self._buffer
        if start == end or (buffer[start] in _WHITESPACE and not buffer[start:end].strip()):
            return  # blank
        try:
            item: Any = parse_line(buffer, start, end, decode=self.decode)
        except ValueError as exc:
            item = exc
        self._push(item, end - start)

    def _too_long(self) -> ValueError:
        return ValueError(f"a message longer than {self._max_line} bytes was dropped")

    def _push(self, item: Any, size: int) -> None:
        self._items.append((item, size))
        self._queued += size
        self._wake()

    def _end(self) -> None:
        if not self._skipping and self._filled > self._start:
            self._line(self._start, self._filled)  # a last message without its newline
        self.close()

    def _give_back(self, reads: int) -> None:
        """A second after a read: give the buffer back if nothing was read since and no line is half read."""
        self._idle = None
        if self._reads == reads and self._filled == self._start:
            self._buffer = bytearray()
            self._start = self._filled = self._scanned = 0
        elif not self._eof:
            self._idle = self._loop.call_later(_IDLE, self._give_back, self._reads)

    def _full(self) -> bool:
        return len(self._items) >= _QUEUE_MESSAGES or self._queued >= _QUEUE_BYTES

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _watch(self, on: bool) -> None:
        if on and not self._watching and not self._eof:
            self._loop.add_reader(self._fd, self._on_readable)
        elif not on and self._watching:
            self._loop.remove_reader(self._fd)
        else:
            return
        self._watching = on
