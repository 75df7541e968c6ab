"""Reading a file: one ``files/read``, or the whole file as an ordered stream of chunks.

:func:`read_chunk` is one request. :class:`ChunkStream` plans the offsets,
keeps at most ``concurrency`` reads unanswered and at most that many chunks in
memory, and checks that the file does not change between chunks. Both send
through their tool call's :class:`~.requester.Requester` (retries, consent);
they never write.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from ..wire.caps import DEFAULT_CHUNK_BYTES
from .answers import ReadBytes, ReadChunk
from .exceptions import ClientInternalError, ContentEncodingError, PreconditionFailedError, TooLargeError
from .lenient import CHUNK_SAFE_CODECS, compact_params
from .requester import Requester

__all__ = ["ChunkStream", "collect", "read_chunk"]

T = TypeVar("T", bytes, str)

_Fetched = tuple[ReadChunk | ReadBytes, bytes | str]


async def read_chunk(
    requester: Requester,
    path: str,
    *,
    offset: int,
    length: int | None,
    encoding: str,
    keep_locked: bool,
    lock_id: str | None,
) -> ReadChunk:
    """One ``files/read`` request (see :meth:`FilesClient.read`)."""
    request = compact_params(
        path=path,
        encoding=encoding,
        offset=offset,
        length=length,
        keepLocked=keep_locked or None,
        lockId=lock_id,
    )
    nbytes = DEFAULT_CHUNK_BYTES if length is None else length
    result = await requester.op("files/read", request, op="read", paths=[path], nbytes=nbytes)
    return ReadChunk.from_result(result, encoding, offset)


async def _read_binary(
    requester: Requester, path: str, *, offset: int, length: int, lock_id: str | None
) -> ReadBytes:
    """:func:`read_chunk` of a binary chunk, its content decoded where it arrives (see :class:`ReadBytes`)."""
    request = compact_params(path=path, encoding="base64", offset=offset, length=length, lockId=lock_id)
    result = await requester.op("files/read", request, op="read", paths=[path], nbytes=length, binary=True)
    return ReadBytes.from_result(result, offset)


async def collect(stream: ChunkStream[Any], max_size: int | None) -> list[Any]:
    """Every chunk of *stream*, refusing a file larger than *max_size*."""
    parts: list[Any] = []
    async with stream as chunks:
        chunks.max_size = max_size
        async for part in chunks:
            parts.append(part)
    return parts


class ChunkStream(Generic[T]):
    """An ordered async iterator of a file's chunks with several reads in flight.

    Made by :meth:`FilesClient.iter_chunks`. Use ``async with`` (or call
    :meth:`aclose`) when you may stop early, so reads in flight are cancelled.
    It checks its arguments and keeps each request under *cap* bytes (the
    client's read cap): ``chunk_size`` is the size a request asks for.

    Attributes
    ----------
    size
        The file's size, once the first chunk arrived.
    etag
        The file's etag, once the first chunk arrived.
    max_size
        If set before iterating: raise :class:`TooLargeError` when the file is larger.
    requests
        ``files/read`` requests sent so far.
    """

    def __init__(
        self,
        requester: Requester,
        cap: int,
        path: str,
        *,
        chunk_size: int,
        concurrency: int,
        encoding: str,
        lock_id: str | None,
        on_close: Callable[[ChunkStream[Any]], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        size = min(chunk_size, cap)
        if encoding != "base64":
            # A resync read asks for up to one character more than a chunk: stay under the cap.
            size = min(size, cap - 64)
        self._requester = requester
        self._on_close = on_close
        self.path = path
        self.chunk_size = size
        self.concurrency = concurrency
        self.encoding = encoding
        self.lock_id = lock_id
        self.size: int | None = None
        self.etag: str | None = None
        self.max_size: int | None = None
        self.requests = 0
        self._gen: AsyncIterator[Any] | None = None
        self._tasks: set[asyncio.Task[_Fetched]] = set()
        self._closed = False

    async def __aenter__(self) -> ChunkStream[T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> ChunkStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        if self._gen is None:
            self._gen = self._chunks()
        try:
            return cast("T", await anext(self._gen))
        except StopAsyncIteration:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Cancel reads in flight and stop; idempotent."""
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        gen, self._gen = self._gen, None
        aclose = getattr(gen, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # closed from another task while running
                await aclose()

    def _spawn(self, offset: int, length: int, wire: str) -> asyncio.Task[_Fetched]:
        task = asyncio.get_running_loop().create_task(self._fetch(offset, length, wire))
        self._tasks.add(task)
        task.add_done_callback(_retrieve)
        return task

    def _running(self) -> list[asyncio.Task[_Fetched]]:
        self._tasks = {task for task in self._tasks if not task.done()}
        return list(self._tasks)

    async def _free_slot(self) -> None:
        """Wait until fewer than ``concurrency`` reads are unanswered.

        A read no longer needed is not cancelled (the client may go on serving
        it anyway): it keeps its slot until its answer arrives, so the client
        never has more than ``concurrency`` of our reads at once.
        """
        while len(running := self._running()) >= self.concurrency:
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)

    async def _fetch(self, offset: int, length: int, wire: str) -> _Fetched:
        self.requests += 1
        if wire == "base64":
            piece = await _read_binary(
                self._requester, self.path, offset=offset, length=length, lock_id=self.lock_id
            )
            return piece, piece.data
        chunk = await read_chunk(
            self._requester,
            self.path,
            offset=offset,
            length=length,
            encoding=wire,
            keep_locked=False,
            lock_id=self.lock_id,
        )
        return chunk, chunk.content

    def _check(self, chunk: ReadChunk | ReadBytes) -> None:
        if chunk.etag != self.etag or chunk.size != self.size:
            raise PreconditionFailedError(
                f"{self.path} changed while it was read",
                data={"error": "PRECONDITION_FAILED", "reason": "changed_during_read", "path": self.path},
                method="files/read",
            )

    def _decode(
        self, decoder: codecs.IncrementalDecoder | None, payload: bytes | str, final: bool
    ) -> bytes | str:
        """*payload* as it is yielded: decoded here when the text travels as bytes."""
        if decoder is None:
            return payload
        assert isinstance(payload, bytes)
        try:
            return decoder.decode(payload, final)
        except UnicodeDecodeError:
            raise ContentEncodingError(
                f"{self.path} is not valid {self.encoding}; ask for base64",
                data={"error": "ENCODING_ERROR", "reason": "invalid_content", "path": self.path},
                method="files/read",
            ) from None

    async def _chunks(self) -> AsyncIterator[bytes | str]:
        """The reader. Three ways to move a file:

        * binary (``base64``): reads at fixed offsets, all usable;
        * text over the wire, for codecs whose every character boundary can
          start a fresh decoder (UTF-8, ASCII, single-byte codecs): reads
          ahead at planned offsets, each used only if the previous chunk
          ended exactly there (it ends early when a character straddles);
        * bytes decoded here with one incremental decoder: for stateful codecs
          (UTF-16/32 with a BOM, ISO-2022 ...), which chunks decoded apart
          would garble, and as soon as a planned offset falls inside a
          character in the previous mode (no more reads wasted on it).
        """
        text = self.encoding != "base64"
        decoder: codecs.IncrementalDecoder | None = None
        wire = self.encoding
        if text:
            codec = codecs.lookup(self.encoding)
            if codec.name not in CHUNK_SAFE_CODECS:
                decoder, wire = codec.incrementaldecoder("strict"), "base64"
        step = self.chunk_size
        first, payload = await self._fetch(0, step, wire)
        self.size, self.etag = first.size, first.etag
        if self.max_size is not None and first.size > self.max_size:
            raise TooLargeError(
                f"{self.path} has {first.size} bytes, more than {self.max_size}",
                data={"error": "TOO_LARGE", "reason": "file_too_large", "path": self.path},
                method="files/read",
            )
        pos = first.offset + first.bytes_read
        done = first.eof or pos >= first.size
        payload = self._decode(decoder, payload, done)
        if payload:
            yield payload
        if done:
            return
        size = first.size
        inflight: dict[int, asyncio.Task[_Fetched]] = {}
        aims: dict[int, int] = {}  # offset -> where that read is meant to end
        next_plan = pos
        try:
            while True:
                if pos not in inflight:
                    # Read from where the last chunk ended up to the next planned
                    # offset still wanted, so the reads ahead stay usable.
                    await self._free_slot()
                    later = [offset for offset in inflight if offset > pos]
                    aim = min(later) if later else pos + step
                    inflight[pos], aims[pos] = self._spawn(pos, aim - pos, wire), aim
                    next_plan = max(next_plan, aim)
                while len(self._running()) < self.concurrency and next_plan < size:
                    if next_plan not in inflight:
                        inflight[next_plan] = self._spawn(next_plan, step, wire)
                        aims[next_plan] = next_plan + step
                    next_plan += step
                task, aim = inflight.pop(pos), aims.pop(pos)
                chunk, payload = await task
                self._check(chunk)
                if chunk.bytes_read <= 0 and not chunk.eof:
                    raise ClientInternalError(
                        f"files/read of {self.path} made no progress", method="files/read"
                    )
                pos = chunk.offset + chunk.bytes_read
                done = chunk.eof or pos >= size
                payload = self._decode(decoder, payload, done)
                if payload:
                    yield payload
                if done:
                    return
                if pos < aim:
                    if wire != "base64":
                        # A character straddles the planned offset: the read ahead
                        # there is unusable, and others may be too. Go on with bytes.
                        inflight.clear()
                        aims.clear()
                        decoder = codecs.getincrementaldecoder(self.encoding)("strict")
                        wire, next_plan = "base64", pos
                    else:
                        # The client reads less per request than asked: plan with its size.
                        step = max(1, min(step, chunk.bytes_read))
                for offset in [offset for offset in inflight if offset < pos]:
                    del inflight[offset]
                    aims.pop(offset, None)
        finally:
            for task in self._tasks:
                task.cancel()


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a read's outcome as seen: reads dropped on purpose may have failed."""
    if not task.cancelled():
        task.exception()
