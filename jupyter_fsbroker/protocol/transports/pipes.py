"""The client side of stdio's pipes: JSON lines exchanged with a server over non-blocking pipes.

:class:`PipeReader` and :class:`PipeWriter` are the ``(read_stream, write_stream)`` pair of
``SessionMessage`` streams that :func:`~.spawn.spawn` yields, in place of mcp's own.

Why not mcp's ``stdio_client`` (mcp 2.3; the figures are in
``benchmarks/README.md``, "Why the code is shaped this way"):

* it re-splits its whole line buffer on every pipe read
  (``(buffer + chunk).split("\\n")``): quadratic in the message size, so that
  staged writes of large chunks cost the client more than twice the CPU they
  cost here. Here each byte is searched for a newline once (:mod:`.lines`).
* it drops a line that fails validation without answering it, so a server's
  malformed request waits out its own timeout. Here every line goes through
  :func:`~jupyter_fsbroker.protocol.framing.parse_message` and a malformed one reaches the middleware,
  which answers it.
* every message goes through a 64 KiB pipe, a worker-thread-free but
  chunk-at-a-time ``anyio`` stream and a pydantic dump on the event loop. Here
  the pipes are enlarged to 1 MiB where the OS allows (fewer wake-ups per
  chunk), reads and writes are plain non-blocking ``os.read`` / ``os.writev``
  driven by the loop's reader and writer callbacks (no copy of a message into
  a transport buffer), and the write side also takes messages that are already
  encoded (:meth:`PipeWriter.send_bytes`), which is how the desk sends
  its ``files/*`` answers. A worker thread may write a small answer itself
  (:meth:`PipeWriter.write_now`), and once offered a hook
  (:meth:`PipeReader.offer_to`) the reader shows each message to it as it is
  read, and reads on threads of its own (:mod:`.reading`), which may answer a
  message themselves: a sequential small read then costs no thread wake at all
  in the brokering process (the loop's hand-off to a worker was a large share
  of its time), and an answer that lasts has the other thread read on.

It never interprets a message beyond framing it and keeping the order in which
it shows messages; who answers what is the desk's decision
(:mod:`~jupyter_fsbroker.protocol.desk`).
"""

from __future__ import annotations

import asyncio
import collections
import os
import select
import threading
from collections.abc import Callable, Sequence

import anyio
from mcp.shared.message import SessionMessage

from ...core.buffers import BufferPool
from ...core.hop import post
from ..desk.route import Where
from ..framing import LentMessage, MalformedMessage, encode_outgoing, parse_message, release, too_large
from .lines import LineSplitter
from .reading import ReadingThreads

__all__ = ["PipeReader", "PipeWriter"]


# Reads start small (a large read allocates its whole size first) and grow while they come back full.
_READ_MIN = 64 * 1024
_READ_MAX = 1024 * 1024
# Messages parsed but not yet taken by the session before reading pauses.
_QUEUE_MESSAGES = 64
_QUEUE_BYTES = 16 * 1024 * 1024

_Item = SessionMessage | Exception
#: The reader's one hook: ``take(message, where)`` → on the loop, whether it took the message
#: (it is then not delivered); on a reading thread, a callable that answers it there, now, or
#: ``False`` (the loop gets it, in order).
Take = Callable[[SessionMessage, Where], "bool | Callable[[], None]"]

# The most bytes one write puts into a pipe whole, or not at all (POSIX; 512 at the least).
_ATOMIC: int = getattr(select, "PIPE_BUF", 512)


class PipeReader:
    """The read side: messages parsed from the server's stdout, in order.

    ``async for item in reader`` yields a ``SessionMessage`` per valid message
    and a :class:`~jupyter_fsbroker.protocol.framing.MalformedMessage` per invalid one; it ends when the
    server closes its stdout. Reading pauses while too many parsed messages
    wait to be taken, so a fast server cannot fill memory.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, *, thread: bool = True) -> None:
        self._loop = loop
        self._fd = fd
        self._may_thread = thread
        self._items: collections.deque[tuple[_Item, int]] = collections.deque()
        self._queued_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._lines = LineSplitter(self._line, self._too_long)
        self._read_size = _READ_MIN
        self._eof = False
        self._closed = False
        self._detached = False
        self._watching = False
        self._take: Take | None = None
        self._threads: ReadingThreads | None = None
        # A lone message read last on a thread, not yet shown to _take (a line after it goes first).
        self._candidate: tuple[SessionMessage, int] | None = None
        self._unacked: int | None = None  # the size of the message the consumer took last
        self._watch(True)

    # -- the consumer's side ------------------------------------------------------------------

    async def receive(self) -> _Item:
        """The next message.

        Raises
        ------
        anyio.EndOfStream
            The server closed its stdout.
        anyio.ClosedResourceError
            The reader was closed.
        """
        if self._unacked is not None:
            # The consumer has done with what it took last (a request it took is on its way):
            # only now may the reading thread answer a request itself.
            self._taken(1, self._unacked)
            self._unacked = None
        while not self._items:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._eof:
                raise anyio.EndOfStream
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item, size = self._items.popleft()
        self._queued_bytes -= size
        if self._threads is not None:
            self._unacked = size
        elif not self._full():
            self._watch(True)
        return item

    def offer_to(self, take: Take) -> None:
        """On the loop: show each valid message to *take* as it is read; read on threads from now on.

        On the loop, *take* sees a message only when none wait before it, so
        what it takes is never taken ahead of what came first. On a reading
        thread, it sees a message only when the consumer has taken, and is done
        with, every message read before it (it asked for the next), and nothing
        read after it waits; every message it does not answer there reaches the
        loop in order, as before. Reading blocks in ``poll`` (the GIL
        released), pauses while too many messages wait for the consumer, goes
        on on a second thread while an answer lasts (:mod:`.reading`), and ends
        at end of file or on :meth:`detach`. A reader made with ``thread=False``
        shows messages on the loop only.
        """
        self._take = take
        if self._threads is not None or self._detached or self._closed or not self._may_thread:
            return
        self._watch(False)
        self._threads = ReadingThreads(
            self._fd,
            step=self._read_step,
            pause_at=(_QUEUE_MESSAGES, _QUEUE_BYTES),
            name="fsbroker-pipe-reader",
        )
        # What the loop read already counts as handed over by the threads: it comes first.
        self._threads.start(len(self._items), self._queued_bytes)

    def _taken(self, count: int, size: int) -> None:
        if self._threads is not None:
            self._threads.taken(count, size)

    def _read_step(self) -> bool:
        """On the thread holding the reading role: one read and what it brings; ``False`` at end of file."""
        data = self._read_once()
        if data is None or self._closed:
            return True
        if not data:
            self._lines.end()  # a last message without its newline
            self._flush_candidate()
            self._post(self.detach)
            return False
        self._lines.feed(data)
        candidate, self._candidate = self._candidate, None
        if candidate is not None:
            assert self._take is not None and self._threads is not None
            answer = self._take(candidate[0], Where.READER)
            if answer is False or answer is True:
                self._hand_over(*candidate)
            else:
                # The last step before reading again: the other thread may read on meanwhile.
                with self._threads.answering():
                    answer()
        return True

    def _flush_candidate(self) -> None:
        candidate, self._candidate = self._candidate, None
        if candidate is not None:
            self._hand_over(*candidate)

    def _hand_over(self, item: _Item | MalformedMessage, size: int) -> None:
        assert self._threads is not None
        self._threads.posted(size)
        self._post(self._deliver, item, size)

    def _post(self, callback: Callable[..., None], *args: object) -> None:
        post(self._loop, callback, *args)  # a closed loop: the connection is gone

    def _deliver(self, item: _Item | MalformedMessage, size: int) -> None:
        if self._intercepted(item) or self._closed:
            self._taken(1, size)
            return
        self._push(item, size)

    def __aiter__(self) -> PipeReader:
        return self

    async def __anext__(self) -> _Item:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop delivering messages; whatever the server still writes is read and dropped."""
        self._closed = True
        dropped, dropped_bytes = len(self._items), self._queued_bytes
        self._items.clear()
        self._queued_bytes = 0
        self._wake()
        if self._threads is not None:
            self._taken(dropped, dropped_bytes)
        else:
            self._watch(True)

    async def aclose(self) -> None:
        self.close()

    def detach(self) -> None:
        """End the stream here and stop watching the pipe (the server is gone, or about to be)."""
        self._watch(False)
        self._detached = True
        self._eof = True
        self._wake()
        if self._threads is not None:
            self._threads.stop()

    @property
    def reading(self) -> bool:
        """Whether a thread of the reader's own is still running (see :meth:`offer_to`)."""
        return self._threads is not None and self._threads.alive

    @property
    def at_eof(self) -> bool:
        """Whether the server closed its stdout."""
        return self._eof

    # -- the loop's side ----------------------------------------------------------------------

    def _read_once(self) -> bytes | None:
        """One read: its bytes, ``b""`` at end of file, ``None`` if there is nothing yet."""
        try:
            data = os.read(self._fd, self._read_size)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""
        if len(data) == self._read_size:
            self._read_size = min(self._read_size * 4, _READ_MAX)
        elif len(data) < _READ_MIN:
            self._read_size = _READ_MIN
        return data

    def _on_readable(self) -> None:
        data = self._read_once()
        if data is None:
            return
        if not data:
            self._end()
            return
        if self._closed:
            return  # draining: a server blocked on a full pipe could not exit
        self._lines.feed(data)
        if self._full():
            self._watch(False)

    def _line(self, line: bytes | bytearray) -> None:
        item = parse_message(line)
        if self._threads is not None:
            self._line_on_thread(item, len(line))
        elif not self._intercepted(item):
            self._push(item, len(line))

    def _too_long(self, prefix: bytes, size: int) -> None:
        self._push(too_large(prefix, size), 0)

    def _intercepted(self, item: _Item | MalformedMessage) -> bool:
        take = self._take
        return (
            take is not None
            and not self._items
            and not self._closed
            and isinstance(item, SessionMessage)
            and take(item, Where.LOOP) is True
        )

    def _line_on_thread(self, item: _Item | MalformedMessage, size: int) -> None:
        assert self._threads is not None
        self._flush_candidate()  # a message before this one in the same read: not alone
        if self._take is not None and not self._threads.handed_over and isinstance(item, SessionMessage):
            self._candidate = (item, size)
        else:
            self._hand_over(item, size)

    def _push(self, item: _Item | MalformedMessage, size: int) -> None:
        if self._closed:
            return
        if self._threads is not None and self._threads.on_reading_thread():
            self._flush_candidate()
            self._hand_over(item, size)
            return
        self._items.append((item, size))
        self._queued_bytes += size
        self._wake()

    def _full(self) -> bool:
        return len(self._items) >= _QUEUE_MESSAGES or self._queued_bytes >= _QUEUE_BYTES

    def _end(self) -> None:
        self._lines.end()  # a last message without its newline
        self.detach()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _watch(self, on: bool) -> None:
        if on == self._watching or (on and self._detached):
            return
        self._watching = on
        if on:
            self._loop.add_reader(self._fd, self._on_readable)
        else:
            self._loop.remove_reader(self._fd)


class PipeWriter:
    """The write side: one message at a time onto the server's stdin.

    :meth:`send` takes a ``SessionMessage`` (what ``ClientSession`` writes);
    :meth:`send_bytes` takes a message already encoded as JSON, and returns
    once the server's pipe has taken all of it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, *, on_broken: Callable[[], None]) -> None:
        self._loop = loop
        self._fd = fd
        self._lock = asyncio.Lock()
        # Held while a message is on its way into the pipe, by the loop (across its waits for
        # room) or by a worker thread (for one non-blocking write): messages never interleave.
        self._wire = threading.Lock()
        self._closed = False
        self._broken = False
        self._on_broken = on_broken

    async def send(self, item: SessionMessage, /) -> None:
        """Write one ``SessionMessage``."""
        await self.send_lending(item, None)

    async def send_lending(self, item: SessionMessage, buffers: BufferPool | None, /) -> None:
        """:meth:`send`, a large message encoded in a buffer lent by *buffers* (a continuation)."""
        data = encode_outgoing(item.message, buffers=buffers)
        try:
            await self.send_bytes(data.view if isinstance(data, LentMessage) else data)
        finally:
            release(data)

    async def send_bytes(self, data: bytes | memoryview, /) -> None:
        """Write one message already encoded as UTF-8 JSON (without its newline), from any buffer.

        Raises
        ------
        anyio.ClosedResourceError
            The writer was closed.
        anyio.BrokenResourceError
            The server no longer reads its stdin.
        """
        async with self._lock:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._broken:
                raise anyio.BrokenResourceError
            # A worker holds it for one non-blocking write at most: a wait of microseconds.
            with self._wire:
                await self._write_all((data, b"\n"))

    def write_now(self, data: bytes, /) -> bool:
        """From any thread: write *data* and its newline at once, or return ``False`` having written nothing.

        It writes only a message that the pipe takes whole in one write
        (``PIPE_BUF`` bytes at most: POSIX makes such a write all or nothing),
        and only when no other message is on its way. After the writer closed
        or broke, the message is dropped (``True``), as :meth:`send_bytes` drops it.
        """
        if len(data) >= _ATOMIC or not self._wire.acquire(blocking=False):
            return False
        try:
            if self._closed or self._broken:
                return True
            try:
                os.write(self._fd, data + b"\n")
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                self._broken = True
                post(self._loop, self._on_broken)  # a closed loop: the reader is gone too
            return True
        finally:
            self._wire.release()

    def close(self) -> None:
        """Refuse further messages (a message being written is finished)."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def flushed(self) -> None:
        """Wait until no message is being written."""
        async with self._lock:
            pass

    @property
    def broken(self) -> bool:
        """Whether the server stopped reading its stdin (a write failed)."""
        return self._broken

    async def _write_all(self, parts: Sequence[bytes | memoryview]) -> None:
        views = [memoryview(part) for part in parts if part]
        while views:
            try:
                written = os.writev(self._fd, views)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError as exc:
                # The server may still be alive but no longer reads: end the read side too,
                # so the session sees the connection end instead of a call waiting forever.
                self._broken = True
                self._on_broken()
                raise anyio.BrokenResourceError from exc
            while written:
                head = views[0]
                if written >= len(head):
                    written -= len(head)
                    views.pop(0)
                else:
                    views[0] = head[written:]
                    written = 0
            if views:
                await self._writable()

    async def _writable(self) -> None:
        future: asyncio.Future[None] = self._loop.create_future()

        def ready() -> None:
            if not future.done():
                future.set_result(None)

        self._loop.add_writer(self._fd, ready)
        try:
            await future
        finally:
            self._loop.remove_writer(self._fd)
