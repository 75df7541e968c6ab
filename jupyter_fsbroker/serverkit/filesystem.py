"""The client's brokered files as an fsspec filesystem: :class:`BrokeredFileSystem`.

pandas, pyarrow, polars and DuckDB read and write through fsspec's blocking
interface, so they run in a worker thread (``await fs.run_sync(func, ...)``)
while every ``files/*`` request they cause is sent from the tool's event loop,
captured when the filesystem is made: the MCP session lives on that loop.
A blocking call made on the loop's own thread would wait for itself, so it
raises :class:`LoopThreadError` at once instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import tempfile
import threading
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, ParamSpec, TypeVar

import fsspec  # type: ignore[import-untyped]
from fsspec.spec import AbstractBufferedFile  # type: ignore[import-untyped]

from ..wire.caps import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MiB
from ..wire.timestamps import parse_iso
from .answers import Entry, FileStat
from .exceptions import AlreadyExistsError, WrongTypeError
from .readahead import ReadAhead

if TYPE_CHECKING:
    from .files_client import FilesClient

__all__ = ["BrokeredFile", "BrokeredFileSystem", "LoopThreadError"]

P = ParamSpec("P")
T = TypeVar("T")

#: What a read that jumps about fetches beyond its end. Small: pyarrow and DuckDB read whole
#: column chunks at once and seek between them, so a large one moves bytes no one asked for (a
#: column of a Parquet file would cost several of its neighbours). A large read is still one
#: request per wire chunk, all in flight at once, and a reader that reads on from where it
#: stopped is read ahead of in growing windows (:class:`~.readahead.ReadAhead`).
BLOCK_BYTES = 4 * 1024
#: Ranges of one :meth:`BrokeredFileSystem.cat_ranges` read at once (each its wire chunks at once):
#: as many requests as the kit's client keeps in flight by default.
RANGES_IN_FLIGHT = 16
#: A read that ends at a file's end and is at most this long is kept for the filesystem's life
#: (per file version): a Parquet reader reads the footer each time it opens a file, and Dask opens
#: the file once per partition, so without it every row group would cost the footer again.
TAIL_BYTES = 1 * MiB
#: Files whose tails are kept at once; the oldest is dropped beyond it (a dataset of many files).
TAIL_FILES = 64
#: Written content held in memory before it spills to a temporary file.
SPOOL_BYTES = 64 * MiB


class LoopThreadError(RuntimeError):
    """A blocking filesystem call was made on the event loop's own thread."""


def _mtime(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromtimestamp(parse_iso(text), UTC)
    except ValueError:
        return None


def _stat_info(stat: FileStat) -> dict[str, Any]:
    return {
        "name": stat.path,
        "size": stat.size,
        "type": "directory" if stat.type == "directory" else "file",
        "mtime": _mtime(stat.mtime),
        "ETag": stat.etag,
        "mimetype": stat.mime_type,
    }


def _entry_info(entry: Entry) -> dict[str, Any]:
    return {
        "name": entry.path,
        "size": entry.size,
        "type": "directory" if entry.type == "directory" else "file",
        "mtime": _mtime(entry.mtime),
    }


class BrokeredFileSystem(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """The files of one tool call's client, for libraries that take an fsspec filesystem.

    Obtain it with ``files(ctx).fsspec()`` inside the tool; paths are broker
    paths (``data/sales.csv``, root name first), ``fsbroker://data/sales.csv``
    too. Run the library's code with ``await fs.run_sync(func, *args)``.

    Parameters
    ----------
    client
        The tool call's :class:`FilesClient`.
    loop
        The loop the client's requests are sent from; default the running one.

    Raises
    ------
    LoopThreadError
        From every blocking method called on the loop's own thread.
    """

    protocol = "fsbroker"
    root_marker = ""
    #: Bound to one tool call's client: never shared through fsspec's instance cache.
    cachable = False

    def __init__(self, client: FilesClient, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__()
        self.client = client
        self.loop = loop or asyncio.get_running_loop()
        # The tool call's context: how its client's requests find their way (on the 2026-07-28
        # wire, the call's batches) from the tasks the worker threads start on the loop.
        self._context = contextvars.copy_context()
        #: Bytes of file content this filesystem has read over the wire (kept tails count once).
        self.bytes_read = 0
        #: ``(path, version) -> (start, bytes)``: the kept tails (:data:`TAIL_BYTES`).
        self._tails: dict[tuple[str, str], tuple[int, bytes]] = {}
        #: ``(path, version) -> (start, future)``: tails being read, which other threads wait for.
        self._tail_reads: dict[tuple[str, str], tuple[int, Future[tuple[int, bytes]]]] = {}
        # Guards both maps, never held across a request: threads opening different files at once
        # read their tails at once, and threads opening the same file wait for the one read of it.
        self._tail_lock = threading.Lock()

    # -- threads -------------------------------------------------------------------------------

    async def run_sync(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``func(*args, **kwargs)`` in a worker thread, where this filesystem may be used."""
        return await asyncio.to_thread(func, *args, **kwargs)

    def _call(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise LoopThreadError(
                "the fsspec filesystem blocks: call it from a worker thread with "
                "`await fs.run_sync(func, *args)`, not on the event loop"
            )

        return self._submit(func, *args, **kwargs).result()

    def _submit(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> Future[T]:
        """Start ``func(*args, **kwargs)`` on the loop; its future, to wait for on this thread."""

        async def run() -> T:
            return await func(*args, **kwargs)

        # The loop's callback, and the task it starts, copy the context current here: the call's.
        return self._context.copy().run(asyncio.run_coroutine_threadsafe, run(), self.loop)

    def _cached_info(self, path: str) -> dict[str, Any] | None:
        parent = self._parent(path)
        for entry in self.dircache.get(parent, ()):
            if entry["name"] == path:
                return dict(entry)
        return None

    # -- paths and metadata --------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        text = str(path)
        if text.startswith(cls.protocol + "://"):
            text = text[len(cls.protocol) + 3 :]
        return text.strip("/")

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """``files/stat`` of *path* as fsspec's details (name, size, type, mtime, ``ETag``)."""
        path = self._strip_protocol(path)
        if not path:
            return {"name": "", "size": 0, "type": "directory"}
        return _stat_info(self._call(self.client.stat, path))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """The entries of a directory (``files/list``), or the file itself; cached until a change here."""
        path = self._strip_protocol(path)
        entries = self.dircache.get(path) if kwargs.get("refresh") is not True else None
        if entries is None:
            try:
                entries = self._call(self._entries, path)
            except WrongTypeError:
                entries = None
            if entries is None:
                entries = [self.info(path)]
            else:
                self.dircache[path] = entries
        return entries if detail else [e["name"] for e in entries]

    async def _entries(self, path: str) -> list[dict[str, Any]] | None:
        if not path:
            return [{"name": r.name, "size": 0, "type": "directory"} for r in await self.client.roots()]
        if (await self.client.stat(path)).type != "directory":
            return None
        return [_entry_info(e) for e in await self.client.list_dir(path, include_hidden=True)]

    def modified(self, path: str) -> datetime:
        """When the file last changed (``files/stat``'s mtime); DuckDB asks it of every file it opens.

        Raises
        ------
        NotImplementedError
            The client gives no mtime for *path* (fsspec's answer for "unknown").
        """
        mtime = self.info(path).get("mtime")
        if mtime is None:
            raise NotImplementedError(f"the client gives no modification time for {path}")
        return mtime  # type: ignore[no-any-return]

    def checksum(self, path: str) -> int:
        """A number that changes when the file does (from its etag)."""
        return zlib.crc32(self.ukey(path).encode())

    def ukey(self, path: str) -> str:
        """The file's etag (its mtime and size if the client gives none)."""
        info = self.info(path)
        return str(info.get("ETag") or f"{info.get('mtime')}:{info['size']}")

    # -- reading -------------------------------------------------------------------------------

    async def _read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of *path*, in concurrent reads within the wire's chunk cap."""
        if end <= start:
            return b""
        offsets = range(start, end, MAX_CHUNK_BYTES)
        chunks = await asyncio.gather(
            *(
                self.client.read(path, offset=o, length=min(MAX_CHUNK_BYTES, end - o), encoding="base64")
                for o in offsets
            )
        )
        parts: list[bytes] = []
        for offset, chunk in zip(offsets, chunks, strict=True):
            data, want = chunk.data(), min(MAX_CHUNK_BYTES, end - offset)
            parts.append(data)
            # A client may answer fewer bytes than asked for: read on until the piece is whole.
            while len(data) < want and not chunk.eof:
                chunk = await self.client.read(
                    path, offset=offset + len(data), length=want - len(data), encoding="base64"
                )
                more = chunk.data()
                if not more:
                    break
                parts.append(more)
                data += more
        out = b"".join(parts)
        self.bytes_read += len(out)  # on the loop's thread only: no lock
        return out

    async def _cat(self, path: str, start: int | None, end: int | None) -> bytes:
        """Bytes ``[start, end)`` of *path*, positions as :meth:`cat_file` takes them."""
        if start is None or start < 0 or end is None or end < 0:
            size = (await self.client.stat(path)).size
            start = 0 if start is None else (max(size + start, 0) if start < 0 else start)
            end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
        return await self._read_range(path, start, end)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """Bytes ``[start, end)`` of *path* (negative positions count from the end; default all)."""
        return self._call(self._cat, self._strip_protocol(path), start, end)

    def cat_ranges(
        self,
        paths: list[str],
        starts: int | Sequence[int | None] | None,
        ends: int | Sequence[int | None] | None,
        max_gap: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[bytes | Exception]:
        """Byte ranges of one or more files, read at once (:data:`RANGES_IN_FLIGHT` at a time).

        Parameters
        ----------
        paths
            A path for each range.
        starts, ends
            A position for each range, or one for all; as :meth:`cat_file` takes them.
        max_gap
            Unused: ranges are never merged, so that no byte between them crosses the wire.
        on_error
            ``"return"``: a range that fails is its exception in the list; otherwise it raises.

        Returns
        -------
        list
            The bytes of each range (or its exception), in the order asked.
        """
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        count = len(paths)
        firsts = list(starts) if isinstance(starts, Sequence) else [starts] * count
        lasts = list(ends) if isinstance(ends, Sequence) else [ends] * count
        if len(firsts) != count or len(lasts) != count:
            raise ValueError("paths, starts and ends must be as long as one another")
        names = [self._strip_protocol(p) for p in paths]
        return self._call(self._cat_ranges, names, firsts, lasts, on_error == "return")

    async def _cat_ranges(
        self, paths: list[str], starts: list[int | None], ends: list[int | None], keep_errors: bool
    ) -> list[bytes | Exception]:
        gate = asyncio.Semaphore(RANGES_IN_FLIGHT)

        async def one(path: str, start: int | None, end: int | None) -> bytes | Exception:
            async with gate:
                try:
                    return await self._cat(path, start, end)
                except Exception as exc:
                    if keep_errors:
                        return exc
                    raise

        return list(await asyncio.gather(*map(one, paths, starts, ends)))

    def _read_tail(self, path: str, version: str, size: int, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` from the kept tail of *path*, read and kept if a tail; else None."""
        if size - start > TAIL_BYTES:
            return None
        key = (path, version)
        with self._tail_lock:
            kept = self._tails.get(key)
            if kept is not None and start >= kept[0]:
                return kept[1][start - kept[0] : end - kept[0]]
            reading = self._tail_reads.get(key)
            if reading is None or start < reading[0]:
                if end < size:
                    return None  # not a tail read: read as usual
                mine: Future[tuple[int, bytes]] = Future()
                self._tail_reads[key] = (start, mine)
                reading = None
        if reading is not None:  # another thread reads it: wait for its answer
            first, data = reading[1].result()
            return data[start - first : end - first]
        try:
            data = self._call(self._read_range, path, start, size)
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        finally:
            with self._tail_lock:
                if self._tail_reads.get(key, (0, None))[1] is mine:
                    del self._tail_reads[key]
        mine.set_result((start, data))
        with self._tail_lock:
            self._tails.pop(key, None)
            self._tails[key] = (start, data)
            while len(self._tails) > TAIL_FILES:
                del self._tails[next(iter(self._tails))]
        return data[: end - start]

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BrokeredFile:
        size, version = None, ""
        if "r" in mode:
            details = self.info(path)
            if details["type"] == "directory":
                raise IsADirectoryError(path)
            size = details["size"]
            version = str(details.get("ETag") or f"{details.get('mtime')}:{size}")
        return BrokeredFile(
            self,
            path,
            mode,
            block_size=block_size or BLOCK_BYTES,
            autocommit=autocommit,
            cache_type=kwargs.pop("cache_type", ReadAhead.name),
            cache_options=cache_options,
            size=size,
            version=version,
        )

    # -- changing ------------------------------------------------------------------------------

    def _changed(self, *paths: str) -> None:
        for path in paths:
            self.invalidate_cache(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        """Forget cached listings: all, or those of *path* and its parent."""
        with self._tail_lock:
            for key in [k for k in self._tails if path is None or k[0] == self._strip_protocol(path)]:
                del self._tails[key]
        if path is None:
            self.dircache.clear()
            return
        path = self._strip_protocol(path)
        self.dircache.pop(path, None)
        self.dircache.pop(self._parent(path), None)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Write *value* as the file's whole content, atomically."""
        path = self._strip_protocol(path)
        self._call(self.client.write_bytes, path, value, exclusive=mode == "create")
        self._changed(path)

    def rm_file(self, path: str) -> None:
        """Delete one file (``files/delete``)."""
        path = self._strip_protocol(path)
        self._call(self.client.delete, path)
        self._changed(path)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Delete *path* (a list of paths too); a directory with everything in it if *recursive*."""
        for item in path if isinstance(path, list) else [path]:
            item = self._strip_protocol(item)
            self._call(self.client.delete, item, recursive=recursive)
            self._changed(item)

    def mv(
        self, path1: str, path2: str, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        """Move or rename (``files/rename``), replacing what is at *path2*."""
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        self._call(self.client.rename, path1, path2, overwrite=True)
        self._changed(path1, path2)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Create a directory (``files/create``); its parents too unless *create_parents* is false."""
        path = self._strip_protocol(path)
        self._call(self.client.create, path, "directory", parents=create_parents)
        self._changed(path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Create a directory and its parents; an existing one is an error unless *exist_ok*."""
        try:
            self.mkdir(path, create_parents=True)
        except AlreadyExistsError:
            if not exist_ok or not self.isdir(path):
                raise


class BrokeredFile(AbstractBufferedFile):  # type: ignore[misc]
    """A file of :class:`BrokeredFileSystem`: ranged reads ahead, or a write committed on close.

    Read, it is read ahead of a reader that reads on where it stopped
    (:class:`~.readahead.ReadAhead`, the default ``cache_type``; fsspec's others
    are there too). Written content is held (in memory, then a temporary file)
    and written with one atomic staged write when the file is closed; an
    exception inside its ``with`` block discards it, leaving the file as it was.

    Threads may share a handle, as DuckDB's do: each thread has its own
    position, as if it had its own handle (a thread that has not moved it
    starts where the file was last left), so one thread's ``seek`` never moves
    another's ``read``; and each read, seek, write and close is whole before
    another thread's begins.
    """

    fs: BrokeredFileSystem

    def __init__(
        self,
        fs: BrokeredFileSystem,
        path: str,
        mode: str = "rb",
        *,
        cache_type: str = ReadAhead.name,
        cache_options: dict[str, Any] | None = None,
        version: str = "",
        **kwargs: Any,
    ) -> None:
        # Reentrant: fsspec's readline and readinto call read.
        self._lock = threading.RLock()
        # DuckDB seeks and then reads, two calls, from several threads on one handle: a position
        # shared by all would let one thread's seek land between another's seek and read.
        self._position = threading.local()
        self._left_at = 0
        #: The file's etag (or mtime and size) when opened: the key of its kept tail.
        self.version = version
        ours = cache_type == ReadAhead.name
        super().__init__(
            fs,
            path,
            mode,
            cache_type="none" if ours else cache_type,
            cache_options=None if ours else cache_options,
            **kwargs,
        )
        if ours and mode == "rb":
            self.cache = ReadAhead(
                self.blocksize, self._fetch_range, self.size, prefetch=self._prefetch, **(cache_options or {})
            )

    @property
    def loc(self) -> int:
        """The calling thread's position (fsspec's name for it)."""
        return getattr(self._position, "loc", self._left_at)

    @loc.setter
    def loc(self, value: int) -> None:
        self._position.loc = self._left_at = value

    def read(self, length: int = -1) -> bytes:
        with self._lock:
            return super().read(length)  # type: ignore[no-any-return]

    def readuntil(self, char: bytes = b"\n", blocks: int | None = None) -> bytes:
        with self._lock:
            return super().readuntil(char, blocks)  # type: ignore[no-any-return]

    def seek(self, loc: int, whence: int = 0) -> int:
        with self._lock:
            return super().seek(loc, whence)  # type: ignore[no-any-return]

    def write(self, data: Any) -> int:
        with self._lock:
            return super().write(data)  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            super().close()

    def _prefetch(self, start: int, end: int) -> Future[bytes]:
        return self.fs._submit(self.fs._read_range, self.path, start, end)

    def _fetch_range(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        tail = self.fs._read_tail(self.path, self.version, self.size, start, end)
        if tail is not None:
            return tail
        return self.fs._call(self.fs._read_range, self.path, start, end)

    def _initiate_upload(self) -> None:
        # Closed by the commit, or by an exception that discards the write (``__exit__``).
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115

    def _upload_chunk(self, final: bool = False) -> bool:
        self._spool.write(self.buffer.getbuffer())
        if final:
            try:
                self.fs._call(self.fs.client.write_bytes, self.path, self._pieces())
            finally:
                self._spool.close()
            self.fs._changed(self.path)
        return True

    async def _pieces(self) -> AsyncIterator[bytes]:
        self._spool.seek(0)
        while piece := self._spool.read(DEFAULT_CHUNK_BYTES):
            yield piece

    def __exit__(self, exc_type: type[BaseException] | None, *args: Any) -> None:
        if exc_type is not None and self.writable() and not self._closed:
            # Nothing of a write that failed half way reaches the file.
            self.closed = True
            spool = getattr(self, "_spool", None)
            if spool is not None:
                spool.close()
            return
        self.close()
