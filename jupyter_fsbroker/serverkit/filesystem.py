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
import tempfile
import threading
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, ParamSpec, TypeVar

import fsspec  # type: ignore[import-untyped]
from fsspec.spec import AbstractBufferedFile  # type: ignore[import-untyped]

from ..wire.caps import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MiB
from ..wire.timestamps import parse_iso
from .answers import Entry, FileStat
from .exceptions import AlreadyExistsError, WrongTypeError

if TYPE_CHECKING:
    from .files_client import FilesClient

__all__ = ["BrokeredFile", "BrokeredFileSystem", "LoopThreadError"]

P = ParamSpec("P")
T = TypeVar("T")

#: Read-ahead of an opened file beyond each read. Small: pyarrow and DuckDB read whole column
#: chunks at once and seek between them, so a large one moves bytes no one asked for (a column
#: of a Parquet file would cost several of its neighbours). A large read is still one request
#: per wire chunk, all in flight at once; a stream passes a larger ``block_size``.
BLOCK_BYTES = 4 * 1024
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
        #: ``(path, version) -> (start, bytes)``: the kept tails (:data:`TAIL_BYTES`).
        self._tails: dict[tuple[str, str], tuple[int, bytes]] = {}
        # Held while a tail is read, so that threads opening the same file at once read it once.
        # Reentrant: DuckDB, joining a CSV and a Parquet file, reads again on the thread that holds
        # it (a plain lock hung there); the inner read then reads for itself.
        self._tail_lock = threading.RLock()

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

        async def run() -> T:
            return await func(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

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
        return b"".join(parts)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """Bytes ``[start, end)`` of *path* (negative positions count from the end; default all)."""
        path = self._strip_protocol(path)
        if start is None or start < 0 or end is None or end < 0:
            size = self.info(path)["size"]
            start = 0 if start is None else (max(size + start, 0) if start < 0 else start)
            end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
        return self._call(self._read_range, path, start, end)

    def _read_tail(self, path: str, version: str, size: int, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` from the kept tail of *path*, read and kept if a tail; else None."""
        if size - start > TAIL_BYTES:
            return None
        key = (path, version)
        with self._tail_lock:
            kept = self._tails.get(key)
            if kept is None or start < kept[0]:
                if end < size:
                    return None  # not a tail read: read as usual
                data = self._call(self._read_range, path, start, size)
                self._tails.pop(key, None)
                self._tails[key] = kept = (start, data)
                while len(self._tails) > TAIL_FILES:
                    del self._tails[next(iter(self._tails))]
        first, data = kept
        return data[start - first : end - first]

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
        file = BrokeredFile(
            self,
            path,
            mode,
            block_size=block_size or BLOCK_BYTES,
            autocommit=autocommit,
            cache_type=kwargs.pop("cache_type", "readahead"),
            cache_options=cache_options,
            size=size,
        )
        file.version = version
        return file

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

    Written content is held (in memory, then a temporary file) and written with
    one atomic staged write when the file is closed; an exception inside its
    ``with`` block discards it, leaving the file as it was.
    """

    fs: BrokeredFileSystem
    #: The file's etag (or mtime and size) when opened: the key of its kept tail.
    version: str = ""

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
