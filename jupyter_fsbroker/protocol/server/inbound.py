"""The client's messages off a pipe: lines framed once, a read's base64 kept out of the JSON parser.

:class:`LineProtocol` is the asyncio protocol of :func:`~.stdio.stdio_streams`'
read pipe. Each line is joined once from the pieces it arrived in (asyncio's
``StreamReader`` copies a 1.4 MB line three times: into its buffer, out of
it, into ``bytes``), reading pauses while too many lines wait, and a line
longer than the limit is dropped as it arrives.

:func:`loads` parses one message. A ``files/read`` answer is mostly its
``content``: 1.4 MB of base64 for a 1 MiB chunk, which ``pydantic_core``'s JSON
parser scans and copies character by character (1.2 ms per MiB, a third of
what a server spends to receive a chunk). When a message holds exactly one
``"content":"`` member, at the top of ``result``, whose value is valid
base64 (checked by decoding it, SIMD-fast, ~0.15 ms per MiB), the rest of the
message is parsed without it and the value is put back as it was. Anything
else — text content, escapes around it, several ``content`` members, another
shape — is parsed the ordinary way, so the result is always what the JSON
parser gives for the whole message.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pydantic_core

from .wire import FAST_BASE64, is_base64

__all__ = ["LineProtocol", "loads"]

# Smaller contents are parsed the ordinary way: splicing pays for itself on large ones only.
_SPLICE_MIN = 64 * 1024
_CONTENT = b'"content":"'
_CONTENT_TOKEN = b'"content"'

# Lines parsed but not yet taken before reading pauses.
_QUEUE_LINES = 64
_QUEUE_BYTES = 16 * 1024 * 1024


def loads(line: bytes) -> Any:
    """The JSON value of one message (see the module's docstring).

    Raises
    ------
    ValueError
        *line* is not JSON (``pydantic_core``'s error).
    """
    if FAST_BASE64 and len(line) >= _SPLICE_MIN:
        spliced = _without_content(line)
        if spliced is not None:
            return spliced
    return pydantic_core.from_json(line)


def _without_content(line: bytes) -> Any:
    """The message parsed with its large base64 ``result.content`` taken aside; ``None`` if it has none."""
    key = line.find(_CONTENT)
    if key < 0:
        return None
    start = key + len(_CONTENT)
    end = line.find(b'"', start)
    if end - start < _SPLICE_MIN:  # also end < 0: no closing quote
        return None
    # Exactly one "content" token and no escapes outside the value: then a "content" key of
    # result, if the rest of the message has one, is this one.
    if (
        line.find(_CONTENT_TOKEN, 0, key) >= 0
        or line.find(_CONTENT_TOKEN, end) >= 0
        or line.find(b"\\", 0, key) >= 0
        or line.find(b"\\", end) >= 0
    ):
        return None
    value = memoryview(line)[start:end]
    if not is_base64(value):  # its alphabet has no quote, backslash or control character
        return None
    try:
        obj = pydantic_core.from_json(b"".join((memoryview(line)[:start], memoryview(line)[end:])))
    except ValueError:
        return None
    result = obj.get("result") if isinstance(obj, dict) else None
    if not isinstance(result, dict) or result.get("content") != "":
        return None
    result["content"] = str(value, "ascii")
    return obj


class LineProtocol(asyncio.Protocol):
    """Newline-delimited messages from a read pipe; :meth:`next_line` takes them in order.

    Parameters
    ----------
    max_line
        The longest line accepted, in bytes; a longer one is dropped and
        :meth:`next_line` returns a ``ValueError`` in its place.
    """

    def __init__(self, max_line: int) -> None:
        self._max_line = max_line
        self._parts: list[memoryview] = []  # the line not yet ended
        self._partial = 0
        self._skipping = False  # dropping the rest of a line over the limit
        self._lines: collections.deque[bytes | ValueError] = collections.deque()
        self._queued = 0
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
                self._push(ValueError(f"a message longer than {self._max_line} bytes was dropped"), 0)
            elif self._partial + end - start > self._max_line:
                self._push(ValueError(f"a message longer than {self._max_line} bytes was dropped"), 0)
            elif self._parts:
                self._push_line(b"".join((*self._parts, view[start:end])))
            else:
                self._push_line(data[start:end])
            self._parts.clear()
            self._partial = 0
            start = end + 1
        if start < len(data) and not self._skipping:
            self._parts.append(view[start:])
            self._partial += len(data) - start
            if self._partial > self._max_line:
                self._skipping = True
                self._parts.clear()
                self._partial = 0
        if not self._paused and self._full() and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    async def next_line(self) -> bytes | ValueError | None:
        """The next line (without its newline), an error for a line dropped, or ``None`` at the end."""
        while not self._lines:
            if self._eof:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        line = self._lines.popleft()
        if isinstance(line, bytes):
            self._queued -= len(line)
        if self._paused and not self._full() and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return line

    def _push_line(self, line: bytes) -> None:
        if line.strip():
            self._push(line, len(line))

    def _push(self, item: bytes | ValueError, size: int) -> None:
        self._lines.append(item)
        self._queued += size
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _full(self) -> bool:
        return len(self._lines) >= _QUEUE_LINES or self._queued >= _QUEUE_BYTES

    def _end(self) -> None:
        if self._eof:
            return
        if self._parts and not self._skipping:
            self._push_line(b"".join(self._parts))  # a last message without its newline
        self._parts.clear()
        self._eof = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
