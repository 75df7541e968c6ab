"""The client's brokered filesystem, used from one tool call: :class:`FilesClient`.

One method per ``files/*`` operation, returning the frozen values of
:mod:`.answers` and raising the typed errors of :mod:`.exceptions`. The methods
build params and read answers, or hand the work to the module whose concept it
is: the sending (timeouts, retries, consent) is the
:class:`~.requester.Requester`'s, reads are :mod:`.chunks`', staged writes
:mod:`.writing`', locks :mod:`.locking`' and watches :mod:`.subscription`'.
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack, overload

import mcp_types
from mcp.server.session import ServerSession

from ..wire.brokering import PER_PATH_CONSENT
from ..wire.caps import DEFAULT_CHUNK_BYTES
from .answers import (
    ConsentResult,
    Created,
    Deleted,
    Entry,
    FileStat,
    ReadChunk,
    RootEntry,
    WriteResult,
)
from .chunks import ChunkStream, collect, read_chunk
from .exceptions import NotFoundError
from .lenient import compact_params, get_opt_str, get_str
from .locking import hold_lock, unlock
from .peers import ConnectionFiles
from .requester import ConsentPaths, Requester
from .retry import RetryPolicy, Timeouts
from .subscription import Watch
from .writing import AtomicWrite, ContentCap, WriteOptions

if TYPE_CHECKING:
    from .filesystem import BrokeredFileSystem

__all__ = ["FilesClient", "ListKeywords", "WriteKeywords"]


class WriteKeywords(TypedDict, total=False):
    """The keyword parameters of :meth:`FilesClient.write_bytes` and :meth:`FilesClient.write_text`."""

    create: bool
    exclusive: bool
    if_match: str | None
    keep_locked: bool
    lock_id: str | None
    chunk_size: int


class ListKeywords(TypedDict, total=False):
    """The keyword parameters of :meth:`FilesClient.iter_dir` and :meth:`FilesClient.list_dir`."""

    recursive: bool
    include_hidden: bool
    page_size: int | None


class FilesClient:
    """The brokered filesystem of one client, used from one request (see :func:`files`).

    Paths are as PROTOCOL.md allows: root-relative (``data/sales.csv``), absolute inside a
    root, or ``file://`` URIs. Every method raises the :class:`FilesRequestError` subclass
    matching the client's answer, after repeating FILE_LOCKED and RATE_LIMITED refusals per
    the retry policy.

    Use it as an async context manager (``async with files(ctx) as fs``) to
    close any watch or chunk stream left open when the block ends.

    One class for every operation, as ``httpx.Client`` is: a tool holds one object, finds
    every operation on it, and its operations share one request's state (retry and timeout
    policies, consent asked so far, the client's content cap, the streams to close). The work
    lives in the kit's modules; each method here only binds that state to it.
    """

    def __init__(
        self,
        session: ServerSession,
        request_id: mcp_types.RequestId,
        connection: ConnectionFiles,
        *,
        consent_message: str | None = None,
        consent_operations: tuple[str, ...] = (),
        consent_paths: tuple[str, ...] = (),
        consent_access: Mapping[str, Sequence[str]] | None = None,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.started = time.time()  #: When the call began; a modern call's re-runs keep the first's.
        #: When refused requests are repeated (read at every request).
        self.retry = retry or RetryPolicy()
        #: How long answers are awaited (read at every request).
        self.timeouts = timeouts or Timeouts()
        self._requester = Requester(
            session,
            request_id,
            self,
            consent_message=consent_message,
            consent_operations=consent_operations,
            consent_paths=consent_paths,
            consent_access=consent_access,
            per_path_consent=PER_PATH_CONSENT in connection.features,
        )
        self._conn = connection
        self._open: set[Watch | ChunkStream[Any]] = set()
        self._cap = ContentCap()

    @property
    def consent_seconds(self) -> float:
        """Seconds this call has waited for the user's ``files/consent`` answers (not the tool's work)."""
        return self._requester.consent_seconds

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        """The client's raw ``capabilities`` from ``initialize``."""
        return self._conn.capabilities

    async def __aenter__(self) -> FilesClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the watches and chunk streams this client opened and left open."""
        for item in list(self._open):
            await item.aclose()

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        nbytes: int = 0,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> dict[str, Any]:
        """Send one ``files/*`` request and return its raw result.

        Parameters
        ----------
        method, params
            The JSON-RPC method and params, sent as given.
        nbytes
            Bytes the request moves, to extend its timeout.
        timeout
            Seconds; default from :attr:`timeouts`.
        retry
            Default :attr:`retry`.

        Raises
        ------
        FilesRequestError
            The typed error of the answer (after retries).
        """
        return await self._requester.request(method, params, nbytes=nbytes, timeout=timeout, retry=retry)

    async def roots(self) -> tuple[RootEntry, ...]:
        """The client's roots (``roots/list``), each with its name and ``read_only`` flag.

        A brokering client names its roots (the first segment of root-relative
        paths: ``data`` in ``data/sales.csv``) and hands over their locations
        (``uri``, ``path``) only where its user allows it; the names are all
        that ``files/*`` needs. The client's grants still decide what may be
        read or written there, and a read-only root refuses every change
        whatever was granted.

        Returns
        -------
        tuple of RootEntry
            In the client's order; ``uri`` and ``path`` are ``None`` for a root
            known by name only. Malformed items (no URI) and names are skipped.
        """
        return await self._requester.roots()

    async def consent(
        self, message: str, paths: ConsentPaths, operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """Ask the user for access (``files/consent``).

        Parameters
        ----------
        message
            Why, in words the user understands.
        paths
            Paths to ask for (a directory covers its descendants); or
            ``{path: operations}`` to ask for different operations on different
            paths, e.g. ``{"data/sales.csv": ["read"], "data/sales.report.md": ["write"]}``:
            one request with per-path items if the client lists
            ``perPathConsent``, otherwise one flat request per distinct set
            of operations (one prompt each), their answers merged.
        operations
            Some of ``read``, ``write``, ``delete``, ``watch``; all if ``None``
            (for the paths given without their own).

        Returns
        -------
        ConsentResult
            A refusal is ``granted=False``, not an error; an answer that says
            what was approved on each path is a :class:`PathConsentResult`
            (as is the merge of the flat answers).
        """
        return await self._requester.consent(message, paths, operations)

    async def require_consent(
        self, message: str, paths: ConsentPaths, operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """:meth:`consent`, raising :class:`PermissionDeniedError` (``consent_refused``) on a refusal."""
        return await self._requester.require_consent(message, paths, operations)

    async def read(
        self,
        path: str,
        *,
        offset: int = 0,
        length: int | None = None,
        encoding: str = "utf-8",
        keep_locked: bool = False,
        lock_id: str | None = None,
    ) -> ReadChunk:
        """One ``files/read`` request: up to *length* bytes (default 1 MiB, at most 2 MiB) at *offset*."""
        return await read_chunk(
            self._requester,
            path,
            offset=offset,
            length=length,
            encoding=encoding,
            keep_locked=keep_locked,
            lock_id=lock_id,
        )

    @overload
    def iter_chunks(  # type: ignore[overload-overlap]
        self,
        path: str,
        *,
        chunk_size: int = ...,
        concurrency: int = ...,
        encoding: Literal["base64"] = ...,
        lock_id: str | None = ...,
    ) -> ChunkStream[bytes]: ...

    @overload
    def iter_chunks(
        self,
        path: str,
        *,
        chunk_size: int = ...,
        concurrency: int = ...,
        encoding: str,
        lock_id: str | None = ...,
    ) -> ChunkStream[str]: ...

    def iter_chunks(
        self,
        path: str,
        *,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        encoding: str = "base64",
        lock_id: str | None = None,
    ) -> ChunkStream[bytes] | ChunkStream[str]:
        """The file's content as an async iterator of chunks, in order.

        Up to *concurrency* ``files/read`` requests are in flight at once, and
        at most that many chunks are held in memory, whatever the file's size.

        Parameters
        ----------
        path
            The file.
        chunk_size
            Bytes per request (at most 2 MiB).
        concurrency
            Requests in flight at once (1: strictly sequential).
        encoding
            ``"base64"`` yields ``bytes``; a text encoding yields ``str``.
            Text chunks end on character boundaries, so each next chunk starts
            at ``offset + bytesRead``. For UTF-8, ASCII and single-byte codecs
            the text travels as text and reads ahead are sent at planned
            offsets, each used only if the previous chunk ended exactly there
            (always for ASCII); at the first planned offset that falls inside a
            character, the rest of the file travels as bytes decoded here by
            one incremental decoder, which keeps every read useful. Other
            codecs (UTF-16/32 with a BOM, ISO-2022 ...) always travel as bytes:
            decoding chunks apart would garble them.
        lock_id
            A lock this connection holds on the file.

        Raises
        ------
        PreconditionFailedError
            ``reason="changed_during_read"``: the file's etag changed between chunks.
        """
        stream: ChunkStream[Any] = ChunkStream(
            self._requester,
            self._cap.limit,
            path,
            chunk_size=chunk_size,
            concurrency=concurrency,
            encoding=encoding,
            lock_id=lock_id,
            on_close=self._open.discard,
        )
        self._open.add(stream)
        return stream

    async def read_bytes(
        self,
        path: str,
        *,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        max_size: int | None = None,
    ) -> bytes:
        """The whole file as bytes (see :meth:`iter_chunks`).

        Raises
        ------
        TooLargeError
            The file is larger than *max_size* bytes (checked on the first chunk).
        """
        stream = self.iter_chunks(path, chunk_size=chunk_size, concurrency=concurrency, lock_id=lock_id)
        return b"".join(await collect(stream, max_size))

    async def read_text(
        self,
        path: str,
        encoding: str = "utf-8",
        *,
        lock_id: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_BYTES,
        concurrency: int = 4,
        max_size: int | None = None,
    ) -> str:
        """The whole file as text in *encoding* (see :meth:`iter_chunks`).

        Raises
        ------
        ContentEncodingError
            The content is not valid in *encoding*.
        TooLargeError
            The file is larger than *max_size* bytes.
        """
        if encoding == "base64":
            raise ValueError("read_text needs a text encoding; use read_bytes for binary content")
        stream = self.iter_chunks(
            path, chunk_size=chunk_size, concurrency=concurrency, encoding=encoding, lock_id=lock_id
        )
        return "".join(await collect(stream, max_size))

    async def write_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview | AsyncIterable[bytes],
        **options: Unpack[WriteKeywords],
    ) -> WriteResult:
        """Write *data* as the file's whole content, atomically.

        Content larger than *chunk_size* (or an async iterable of pieces, for
        content made on the fly) is staged in chunks with ``offset`` and
        committed by the ``final`` chunk: until then the file is untouched.

        Parameters
        ----------
        path
            The file.
        data
            The content, or an async iterable of its pieces in order.
        create
            Create the file if missing (else NOT_FOUND); default true.
        exclusive
            Fail with ALREADY_EXISTS if the file exists.
        if_match
            Fail with PRECONDITION_FAILED unless the file's etag is this.
        keep_locked
            Keep an exclusive lock afterwards (``WriteResult.lock_id``).
        lock_id
            A lock this connection holds on the file.
        chunk_size
            Bytes per request (at most 2 MiB; default 1 MiB).
        """
        write = AtomicWrite(self._requester, self._cap, path, WriteOptions.from_keywords(options))
        return await write.write_bytes(data, options.get("chunk_size", DEFAULT_CHUNK_BYTES))

    async def write_text(
        self, path: str, text: str, encoding: str = "utf-8", **options: Unpack[WriteKeywords]
    ) -> WriteResult:
        """Write *text* encoded in *encoding* as the file's whole content, atomically.

        Small text travels as text; larger text is encoded here and staged in
        chunks (see :meth:`write_bytes`). Keyword parameters as :meth:`write_bytes`.

        Raises
        ------
        ContentEncodingError
            *text* cannot be encoded in *encoding*.
        """
        write = AtomicWrite(self._requester, self._cap, path, WriteOptions.from_keywords(options))
        return await write.write_text(text, encoding, options.get("chunk_size", DEFAULT_CHUNK_BYTES))

    async def iter_dir(
        self,
        path: str,
        *,
        recursive: bool = False,
        include_hidden: bool = False,
        page_size: int | None = None,
    ) -> AsyncIterator[Entry]:
        """The entries of a directory, page by page (following ``nextCursor``).

        Parameters
        ----------
        path
            The directory.
        recursive
            Descend into subdirectories.
        include_hidden
            Include names starting with a dot.
        page_size
            ``maxEntries`` per request (the client's default if ``None``).
        """
        cursor: str | None = None
        while True:
            request = compact_params(
                path=path,
                recursive=recursive,
                includeHidden=include_hidden,
                maxEntries=page_size,
                cursor=cursor,
            )
            result = await self._requester.op("files/list", request, op="read", paths=[path])
            for entry in Entry.page(result):
                yield entry
            cursor = get_opt_str(result, "nextCursor")
            if not cursor:
                return

    async def list_dir(self, path: str, **options: Unpack[ListKeywords]) -> list[Entry]:
        """All entries of a directory (every page of ``files/list``); parameters as :meth:`iter_dir`."""
        return [entry async for entry in self.iter_dir(path, **options)]

    async def stat(self, path: str) -> FileStat:
        """``files/stat``: type, size, mtime, etag, MIME type, and whether it is locked."""
        result = await self._requester.op("files/stat", {"path": path}, op="read", paths=[path])
        return FileStat.from_result(result)

    async def exists(self, path: str) -> bool:
        """Whether *path* exists (a ``files/stat`` that may answer NOT_FOUND)."""
        try:
            await self.stat(path)
        except NotFoundError:
            return False
        return True

    async def create(
        self,
        path: str,
        type: Literal["file", "directory"] = "file",
        *,
        content: str | bytes | None = None,
        encoding: str = "utf-8",
        parents: bool = False,
        keep_locked: bool = False,
    ) -> Created:
        """``files/create``: a new file (optionally with small content) or directory.

        *type* is named after the wire's member (and :attr:`Entry.type`).

        Raises
        ------
        AlreadyExistsError
            Something exists at *path*.
        """
        if isinstance(content, bytes):
            content, encoding = base64.b64encode(content).decode("ascii"), "base64"
        request = compact_params(
            path=path,
            type=type,
            content=content,
            encoding=encoding if content is not None else None,
            parents=parents or None,
            keepLocked=keep_locked or None,
        )
        result = await self._requester.op(
            "files/create", request, op="write", paths=[path], nbytes=len(content or "")
        )
        return Created.from_result(result, path, type)

    async def delete(self, path: str, *, recursive: bool = False, if_match: str | None = None) -> Deleted:
        """``files/delete``: moves to the client's trash unless it deletes permanently."""
        request = compact_params(path=path, recursive=recursive or None, ifMatch=if_match)
        result = await self._requester.op("files/delete", request, op="delete", paths=[path])
        return Deleted.from_result(result, path)

    async def rename(
        self, path: str, new_path: str, *, overwrite: bool = False, if_match: str | None = None
    ) -> str:
        """``files/rename``; returns the new path (root-relative)."""
        request = compact_params(path=path, newPath=new_path, overwrite=overwrite or None, ifMatch=if_match)
        result = await self._requester.op("files/rename", request, op="write", paths=[path, new_path])
        return get_str(result, "path", new_path)

    def lock(
        self, path: str, *, create: bool = False, wait: float = 30.0
    ) -> AbstractAsyncContextManager[str]:
        """Hold an exclusive lock on *path* for the ``async with`` block; yields the ``lockId``.

        The lock is taken with a ``keepLocked`` read of zero bytes (or a
        ``keepLocked`` create of an empty file when *create* is true and the
        file is missing) and always released with ``files/unlock`` when the
        block ends, also on an exception or cancellation. Locks belong to the
        client connection, so concurrent tool calls of one connection on the
        same path (as written) also take turns in this process.

        Parameters
        ----------
        path
            The file.
        create
            Create an empty file if *path* does not exist.
        wait
            Seconds to keep retrying while another connection holds the lock.

        Raises
        ------
        FileLockedError
            Still locked by someone else after *wait* seconds.
        """
        return hold_lock(self._requester, self._conn, path, create=create, wait=wait)

    async def unlock(self, lock_id: str) -> None:
        """``files/unlock``.

        Raises
        ------
        NotFoundError
            No such lock of this connection (released already, or force-released by the user).
        """
        await unlock(self._requester, lock_id)

    def fsspec(self) -> BrokeredFileSystem:
        """These files as an fsspec filesystem on the running loop (the ``fsspec`` extra)."""
        from .filesystem import BrokeredFileSystem

        return BrokeredFileSystem(self)

    def watch(
        self,
        path: str,
        *,
        recursive: bool = False,
        events: Sequence[str] | None = None,
        buffer: int = 1024,
    ) -> Watch:
        """Watch *path*; an async iterator of :class:`ChangeEvent` to use with ``async with``.

        ``files/watch`` is sent when the block is entered (or on first iteration) and
        ``files/unwatch`` when it ends. Iteration ends only when the watch is closed: bound
        it with ``anyio.move_on_after``.

        Parameters
        ----------
        path
            A file or directory.
        recursive
            Also report changes below subdirectories.
        events
            Some of ``created``, ``modified``, ``deleted``, ``moved``; all if ``None``.
        buffer
            Events held for a slow consumer; further ones are dropped (counted
            in :attr:`Watch.dropped`).

        Raises
        ------
        ValueError
            *events* names an event kind that does not exist.
        """
        watch = Watch(
            self._requester, self._conn, path, recursive, events, buffer, on_close=self._open.discard
        )
        self._open.add(watch)
        return watch
