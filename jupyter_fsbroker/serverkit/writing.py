"""Writing a file's whole content atomically: in one ``files/write``, or staged in chunks.

Content larger than a chunk (or made on the fly) is staged with ``offset`` and
committed by the ``final`` chunk, so the file is untouched until the end. When
the client announces a smaller per-request cap (TOO_LARGE ``request_too_large``
with ``maxBytes``), the cap is learned and the refused chunk resent in pieces
it takes: the refusal comes before anything was staged.

:class:`AtomicWrite` sends through its tool call's
:class:`~.requester.Requester` (retries, consent); it never reads.
"""

from __future__ import annotations

import base64
import codecs
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel

from ..wire.caps import MAX_CHUNK_BYTES
from ..wire.catalogue import REQUEST_TOO_LARGE
from .answers import WriteResult
from .exceptions import ContentEncodingError, IntegrityError, TooLargeError
from .lenient import byte_length
from .requester import Requester

__all__ = ["AtomicWrite", "ContentCap", "WriteOptions"]

# Characters of text encoded per step when staging a large text write.
_ENCODE_STEP = 256 * 1024


class ContentCap:
    """The most content one request may carry: the wire's 2 MiB, lowered when the client says less.

    Attributes
    ----------
    limit
        The cap in bytes.
    """

    def __init__(self) -> None:
        self.limit = MAX_CHUNK_BYTES

    def learn(self, exc: TooLargeError) -> bool:
        """Remember a smaller cap that *exc* announces; whether it announced one."""
        limit = exc.data.get("maxBytes")
        if exc.reason != REQUEST_TOO_LARGE or not isinstance(limit, int) or limit < 1:
            return False
        self.limit = min(self.limit, limit)
        return True


@dataclass(frozen=True)
class WriteOptions:
    """What a write asks for besides its content (see :meth:`FilesClient.write_bytes`)."""

    create: bool
    exclusive: bool
    if_match: str | None
    keep_locked: bool
    lock_id: str | None

    @classmethod
    def from_keywords(cls, options: Mapping[str, Any]) -> WriteOptions:
        """The options of :meth:`FilesClient.write_bytes`' keyword parameters, with their defaults."""
        return cls(
            create=options.get("create", True),
            exclusive=options.get("exclusive", False),
            if_match=options.get("if_match"),
            keep_locked=options.get("keep_locked", False),
            lock_id=options.get("lock_id"),
        )

    def params(self, path: str, content: str, encoding: str, *, first: bool, final: bool) -> dict[str, Any]:
        """The params of one ``files/write``: the first chunk carries the conditions, the final the lock."""
        params: dict[str, Any] = {"path": path, "content": content, "encoding": encoding}
        if first:
            params["create"] = self.create
            if self.exclusive:
                params["exclusive"] = True
            if self.if_match is not None:
                params["ifMatch"] = self.if_match
        if final and self.keep_locked:
            params["keepLocked"] = True
        if self.lock_id is not None:
            params["lockId"] = self.lock_id
        return params


class AtomicWrite:
    """One write of a file's whole content.

    Parameters
    ----------
    path
        The file.
    options
        Conditions and locking.
    requester
        Sends each ``files/write`` (with retries and consent).
    cap
        The client's per-request cap, shared with the client's reads.
    """

    def __init__(self, requester: Requester, cap: ContentCap, path: str, options: WriteOptions) -> None:
        self._requester = requester
        self._cap = cap
        self._path = path
        self._options = options

    async def write_bytes(
        self, data: bytes | bytearray | memoryview | AsyncIterable[bytes], chunk_size: int
    ) -> WriteResult:
        """Write *data* (or its pieces, in order) in chunks of at most *chunk_size* bytes."""
        size = max(1, min(chunk_size, self._cap.limit))
        if isinstance(data, bytes | bytearray | memoryview):
            view = memoryview(data).cast("B")
            if len(view) <= size:
                try:
                    return await self._single(bytes(view))
                except TooLargeError as exc:
                    if not self._cap.learn(exc):
                        raise
                    size = min(size, self._cap.limit)
            return await self._staged(_slices(view, size))
        return await self._staged(_rechunk(data, size))

    async def write_text(self, text: str, encoding: str, chunk_size: int) -> WriteResult:
        """Write *text* in *encoding*: as text if it fits one request, else encoded here and staged."""
        size = max(1, min(chunk_size, self._cap.limit))
        codec = codecs.lookup(encoding)
        # Four bytes per character cover every common codec without encoding first.
        if len(text) * 4 <= size or len(self._encode(codec, text)) <= size:
            try:
                return await self._single_text(text, encoding)
            except TooLargeError as exc:
                if not self._cap.learn(exc):
                    raise
                size = min(size, self._cap.limit)
        return await self._staged(_rechunk(self._encode_pieces(codec, text), size))

    async def _single(self, data: bytes) -> WriteResult:
        content = base64.b64encode(data).decode("ascii")
        params = self._options.params(self._path, content, "base64", first=True, final=True)
        result = await self._send(params, len(data))
        return WriteResult.from_result(result, self._written(result, len(data)), 1)

    async def _single_text(self, text: str, encoding: str) -> WriteResult:
        params = self._options.params(self._path, text, encoding, first=True, final=True)
        result = await self._send(params, len(text))
        # SEP-1708's reference client reports the characters it wrote: accepted too.
        sent = byte_length(text, encoding)
        return WriteResult.from_result(result, self._written(result, sent, also=len(text)), 1)

    def _written(self, result: dict[str, Any], sent: int | None, *, also: int | None = None) -> int:
        """The bytes a whole-content write wrote: ``bytesWritten``, checked against *sent* when known.

        A count that is neither *sent* nor *also* means the client did not
        write what it was given (or cannot count): :class:`IntegrityError`.
        """
        claimed = result.get("bytesWritten")
        if not isinstance(claimed, int) or isinstance(claimed, bool):
            return sent if sent is not None else 0
        if claimed == also and sent is not None:
            return sent
        if sent is not None and claimed != sent:
            raise IntegrityError(
                f"files/write of {sent} bytes to {self._path} answered bytesWritten {claimed}",
                method="files/write",
            )
        return claimed

    async def _staged(self, pieces: AsyncIterator[bytes]) -> WriteResult:
        offset = 0
        chunks = 0
        current = await anext(pieces, None)
        if current is None:
            return await self._single(b"")
        while True:
            following = await anext(pieces, None)
            final = following is None
            result, sent = await self._send_parts(current, offset, final)
            offset += len(current)
            chunks += sent
            if final:
                return WriteResult.from_result(result, offset, chunks)
            assert following is not None
            current = following

    async def _send_parts(self, data: bytes, offset: int, final: bool) -> tuple[dict[str, Any], int]:
        """Stage *data* at *offset* in chunks the client takes; the last answer and the requests it took."""
        result: dict[str, Any] = {}
        sent = 0
        parts = _split(data, self._cap.limit)
        for index, part in enumerate(parts):
            last = final and index == len(parts) - 1
            result, count = await self._chunk(part, offset, last)
            offset += len(part)
            sent += count
        return result, sent

    async def _chunk(self, data: bytes, offset: int, final: bool) -> tuple[dict[str, Any], int]:
        """Send one staged chunk; returns the last answer and the chunks it took."""
        content = base64.b64encode(data).decode("ascii")
        params = self._options.params(self._path, content, "base64", first=offset == 0, final=final)
        params["offset"] = offset
        params["final"] = final
        try:
            return await self._send(params, len(data)), 1
        except TooLargeError as exc:
            # Refused before anything was staged: resend it in pieces the client takes.
            if not self._cap.learn(exc) or len(data) <= self._cap.limit:
                raise
        return await self._send_parts(data, offset, final)

    async def _send(self, params: dict[str, Any], nbytes: int) -> dict[str, Any]:
        return await self._requester.op("files/write", params, op="write", paths=[self._path], nbytes=nbytes)

    def _encode(self, codec: codecs.CodecInfo, text: str) -> bytes:
        try:
            return codec.encode(text, "strict")[0]
        except UnicodeEncodeError:
            raise self._encoding_error(codec) from None

    async def _encode_pieces(self, codec: codecs.CodecInfo, text: str) -> AsyncIterator[bytes]:
        encoder = codec.incrementalencoder("strict")
        for start in range(0, len(text), _ENCODE_STEP):
            piece = text[start : start + _ENCODE_STEP]
            final = start + _ENCODE_STEP >= len(text)
            try:
                data = encoder.encode(piece, final)
            except UnicodeEncodeError:
                raise self._encoding_error(codec) from None
            if data:
                yield data
            await anyio.lowlevel.checkpoint()

    def _encoding_error(self, codec: codecs.CodecInfo) -> ContentEncodingError:
        return ContentEncodingError(
            f"the content cannot be encoded as {codec.name}",
            data={"error": "ENCODING_ERROR", "reason": "invalid_content", "path": self._path},
            method="files/write",
        )


async def _slices(view: memoryview, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(view), size):
        yield bytes(view[start : start + size])


async def _rechunk(pieces: AsyncIterable[bytes], size: int) -> AsyncIterator[bytes]:
    """Regroup *pieces* into chunks of exactly *size* bytes (the last one shorter)."""
    pending = bytearray()
    async for piece in pieces:
        pending += piece
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [data]
