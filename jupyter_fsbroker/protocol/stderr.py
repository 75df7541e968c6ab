"""A stdio server's stderr, read line by line on the event loop while the server runs.

:func:`captured_stderr` makes a pipe, yields its write end (to give the server
process as its stderr) and reads the other end on the running asyncio loop
(``add_reader``: no thread), handing each complete line to a callback. When
the block ends, whatever the server still wrote is read and the pipe is
closed. Lines are decoded as UTF-8 with replacement and cut at a bound, so a
server that writes without newlines cannot grow memory.

It never writes anything, and never blocks the loop: the read end is
non-blocking and each wake-up reads what is there.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import TextIO

__all__ = ["MAX_LINE_BYTES", "captured_stderr"]

#: Bytes of one line kept before it is cut (the rest of the line is dropped).
MAX_LINE_BYTES = 64 * 1024

_READ_SIZE = 64 * 1024


class _LineReader:
    """Splits the bytes read from a pipe into lines for *on_line*."""

    def __init__(self, fd: int, on_line: Callable[[str], object]) -> None:
        self._fd = fd
        self._on_line = on_line
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        self._cut = False
        self.eof = False

    def read_available(self) -> None:
        """Read what the pipe holds now (never waits); hand over each complete line."""
        while not self.eof:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self._feed(self._decoder.decode(b"", final=True))
                if self._pending:
                    self._emit(self._pending)
                return
            self._feed(self._decoder.decode(data))

    def _feed(self, text: str) -> None:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            self._emit(line)
        if len(self._pending) > MAX_LINE_BYTES:
            # A line without end: keep its start, drop the rest up to the next newline.
            self._emit(self._pending[:MAX_LINE_BYTES] + " …(cut)")
            self._pending = ""
            self._cut = True

    def _emit(self, line: str) -> None:
        if self._cut:  # the tail of a line already cut
            self._cut = False
            return
        self._on_line(line.rstrip("\r"))


@contextlib.asynccontextmanager
async def captured_stderr(on_line: Callable[[str], object]) -> AsyncIterator[TextIO]:
    """A file to give a child process as its stderr; each line it writes goes to *on_line*.

    Call :meth:`close` on the yielded file once the child has started (the
    child keeps its own copy), so the pipe ends when the child exits. The
    callback runs on the event loop.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    reader = _LineReader(read_fd, on_line)
    writer = open(write_fd, "w", encoding="utf-8", closefd=True)  # noqa: SIM115  closed below or by the caller
    loop.add_reader(read_fd, reader.read_available)
    try:
        yield writer
    finally:
        writer.close()
        loop.remove_reader(read_fd)
        with contextlib.suppress(Exception):
            reader.read_available()  # what the server wrote last; a grandchild may keep the pipe open
        os.close(read_fd)
