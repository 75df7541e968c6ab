"""The answers of ``files/*`` requests as frozen values, read leniently from the raw results.

Each value is built by one ``from_result`` (or ``from_params``) from the client's
raw JSON; nothing here sends anything. :class:`ChangeEvent` is the wire's own
(:mod:`jupyter_fsbroker.wire.events`), the value the client's core sends.

Lenient in what is missing, strict about what is there: clients that follow the
SEP-1708 draft's examples rather than PROTOCOL.md leave members out (a consent
without ``operations``, a read with only ``content``, ``size`` and
``mimeType``); those are derived from what the request asked and what the
answer carries. A member that is present but cannot be true (a ``bytesRead``
that is not the content's length, an ``offset`` that was not asked for) raises
:class:`~.exceptions.IntegrityError`: a wrong number must never reach a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from ..wire.brokering import ROOTS_META
from ..wire.events import ChangeEvent
from ..wire.methods import OPERATIONS
from .exceptions import IntegrityError
from .lenient import byte_length, decode_base64, get_int, get_opt_str, get_str, get_strs

__all__ = [
    "ChangeEvent",
    "ConsentResult",
    "Created",
    "Deleted",
    "Entry",
    "FileStat",
    "PathConsentResult",
    "ReadBytes",
    "ReadChunk",
    "RootEntry",
    "WriteResult",
    "roots_from_result",
]


@dataclass(frozen=True)
class ConsentResult:
    """The user's answer to ``files/consent``.

    Attributes
    ----------
    granted
        Whether anything was approved.
    approved_paths
        The approved paths, root-relative.
    operations
        The approved operations.
    expires_at
        ISO 8601 expiry, or ``None`` for grants that last the connection.
    """

    granted: bool
    approved_paths: tuple[str, ...]
    operations: tuple[str, ...]
    expires_at: str | None = None

    @classmethod
    def from_result(
        cls,
        result: Mapping[str, Any],
        asked_paths: Sequence[str] = (),
        asked_operations: Sequence[str] | None = None,
    ) -> ConsentResult:
        """Read the raw ``files/consent`` result of a request for *asked_paths* and *asked_operations*.

        A grant without ``operations`` approves the operations asked for (all
        four when the request named none), and one without ``approvedPaths``
        the paths asked for: SEP-1708's own example answers
        ``{"granted": true, "approvedPaths": [...]}``. A refusal approves nothing.
        An answer that lists ``approved`` (PROTOCOL.md, "Per-path operations")
        is a :class:`PathConsentResult`.
        """
        granted = result.get("granted") is True
        if not granted:
            return cls(False, (), (), None)
        asked_ops = tuple(OPERATIONS if asked_operations is None else asked_operations)
        has_paths = isinstance(result.get("approvedPaths"), list)
        has_operations = isinstance(result.get("operations"), list)
        paths = get_strs(result, "approvedPaths") if has_paths else tuple(asked_paths)
        ops = get_strs(result, "operations") if has_operations else asked_ops
        expires = get_opt_str(result, "expiresAt")
        entries = result.get("approved")
        if isinstance(entries, list):
            approved = tuple(
                (str(entry["path"]), get_strs(entry, "operations"))
                for entry in entries
                if isinstance(entry, Mapping) and isinstance(entry.get("path"), str)
            )
            return PathConsentResult(True, paths, ops, expires, approved)
        return cls(True, paths, ops, expires)

    def operations_on(self, paths: Sequence[str]) -> tuple[str, ...]:
        """The operations granted on every one of *paths* (as far as the answer tells).

        A flat answer grants its :attr:`operations` on each approved path.
        """
        if not self.granted:
            return ()
        return self.operations


@dataclass(frozen=True)
class PathConsentResult(ConsentResult):
    """A ``files/consent`` answer that says what was approved on each path.

    See PROTOCOL.md, "Per-path operations".

    Attributes
    ----------
    approved
        ``((path, operations), ...)``, one entry per approved path (root-relative).
    """

    approved: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def merged(cls, answers: Sequence[ConsentResult]) -> PathConsentResult:
        """One answer from the answers to several flat requests of one consent (one per set of operations).

        Each path an answer approved is listed with the operations that
        answer approved on it. It is granted if any answer is, and expires
        when the first of the grants does (``None`` if none expires).
        """
        approved: dict[str, tuple[str, ...]] = {}
        for answer in answers:
            for path in answer.approved_paths:
                approved[path] = tuple(
                    dict.fromkeys((*approved.get(path, ()), *answer.operations_on([path])))
                )
        granted = [answer for answer in answers if answer.granted]
        union = tuple(dict.fromkeys(op for ops in approved.values() for op in ops))
        expiries = [answer.expires_at for answer in granted if answer.expires_at is not None]
        return cls(
            bool(granted),
            tuple(approved),
            union,
            min(expiries, key=_instant, default=None),
            tuple(approved.items()),
        )

    def operations_on(self, paths: Sequence[str]) -> tuple[str, ...]:
        """The operations granted on every one of *paths* (see :meth:`ConsentResult.operations_on`)."""
        by_path = dict(self.approved)
        found = [by_path[path] for path in paths if path in by_path]
        if len(found) < len(paths):  # spelled otherwise than approved: no better than the flat answer
            return super().operations_on(paths) if not found else tuple(found[0])
        return tuple(op for op in found[0] if all(op in ops for ops in found))


def _instant(expires_at: str) -> tuple[float, str]:
    """An ``expiresAt`` as a sortable instant (one that does not parse sorts by its text, last)."""
    try:
        return (datetime.fromisoformat(expires_at).timestamp(), expires_at)
    except (ValueError, OverflowError, OSError):
        return (float("inf"), expires_at)


@dataclass(frozen=True)
class ReadChunk:
    """One ``files/read`` answer.

    ``content`` is as on the wire: text, or base64 when ``encoding`` is
    ``"base64"`` (see :meth:`data`).
    """

    content: str
    encoding: str
    size: int
    offset: int
    bytes_read: int
    eof: bool
    mime_type: str | None = None
    etag: str | None = None
    lock_id: str | None = None

    @classmethod
    def from_result(cls, result: Mapping[str, Any], encoding: str, offset: int = 0) -> ReadChunk:
        """Read the raw ``files/read`` result of a request for *encoding* at *offset*.

        Missing ``offset``, ``bytesRead`` and ``eof`` are derived: the offset
        asked for, the byte length of ``content`` as it travels, and whether
        the chunk reaches ``size``.

        Raises
        ------
        IntegrityError
            No ``content`` or ``size``; an ``offset`` other than the one asked
            for; a ``bytesRead`` other than the content's byte length.
        """
        content = result.get("content")
        if not isinstance(content, str):
            raise _broken("files/read answered without content")
        wire_encoding = get_str(result, "encoding", encoding)
        size, claimed, eof = _read_figures(
            result,
            offset,
            byte_length(content, wire_encoding),
            wire_encoding,
            lambda: len(content.encode(wire_encoding, "replace")),
        )
        return cls(
            content=content,
            encoding=wire_encoding,
            size=size,
            offset=offset,
            bytes_read=claimed,
            eof=eof,
            mime_type=get_opt_str(result, "mimeType"),
            etag=get_opt_str(result, "etag"),
            lock_id=get_opt_str(result, "lockId"),
        )

    def data(self) -> bytes:
        """The content as bytes (base64-decoded, or encoded in its text encoding)."""
        if self.encoding == "base64":
            return decode_base64(self.content)
        return self.content.encode(self.encoding)


@dataclass(frozen=True)
class ReadBytes:
    """One ``files/read`` answer to a request for base64, its content decoded.

    What :meth:`FilesClient.iter_chunks <.client.FilesClient.iter_chunks>`
    reads a binary chunk as. On the helper's own stdio pipes the content
    arrives decoded already (see :mod:`.inbound`), so no base64 text is ever
    made for it; elsewhere it is decoded here. Checked as
    :meth:`ReadChunk.from_result` checks a chunk.
    """

    data: bytes
    size: int
    offset: int
    bytes_read: int
    eof: bool
    etag: str | None = None

    @classmethod
    def from_result(cls, result: Mapping[str, Any], offset: int = 0) -> ReadBytes:
        """Read the raw ``files/read`` result (``content`` as base64 text, or decoded) at *offset*.

        Raises
        ------
        IntegrityError
            As :meth:`ReadChunk.from_result`, and for content that is not base64.
        """
        content = result.get("content")
        if isinstance(content, bytes):
            measured: int | None = len(content)
        elif isinstance(content, str):
            measured = byte_length(content, "base64")
        else:
            raise _broken("files/read answered without content")
        size, claimed, eof = _read_figures(result, offset, measured, "base64", lambda: 0)
        data = content if isinstance(content, bytes) else decode_base64(content)
        return cls(
            data=data, size=size, offset=offset, bytes_read=claimed, eof=eof, etag=get_opt_str(result, "etag")
        )


@dataclass(frozen=True)
class WriteResult:
    """The answer to a (possibly staged) write.

    Attributes
    ----------
    bytes_written
        Bytes written in total (all chunks).
    size
        The file's size afterwards.
    etag
        The file's etag afterwards.
    lock_id
        The kept lock, with ``keep_locked=True``.
    chunks
        Requests the write took (1 unless staged).
    """

    bytes_written: int
    size: int
    etag: str
    lock_id: str | None = None
    chunks: int = 1

    @classmethod
    def from_result(cls, result: Mapping[str, Any], bytes_written: int, chunks: int) -> WriteResult:
        """Read the raw result of a write's last ``files/write``, which took *chunks* requests."""
        return cls(
            bytes_written=bytes_written,
            # The write replaced the whole content: without ``size`` it is what was written.
            size=get_int(result, "size", bytes_written),
            etag=get_str(result, "etag"),
            lock_id=get_opt_str(result, "lockId"),
            chunks=chunks,
        )


@dataclass(frozen=True)
class Entry:
    """One entry of ``files/list``."""

    name: str
    path: str
    type: str
    size: int
    mtime: str | None = None

    @classmethod
    def from_result(cls, entry: Mapping[str, Any]) -> Entry:
        """Read one raw item of ``entries``."""
        return cls(
            name=get_str(entry, "name"),
            path=get_str(entry, "path"),
            type=get_str(entry, "type", "other"),
            size=get_int(entry, "size"),
            mtime=get_opt_str(entry, "mtime"),
        )

    @classmethod
    def page(cls, result: Mapping[str, Any]) -> list[Entry]:
        """The entries of one raw ``files/list`` result; malformed items are skipped."""
        entries = result.get("entries")
        items = entries if isinstance(entries, list) else []
        return [
            cls.from_result(cast("Mapping[str, Any]", item)) for item in items if isinstance(item, Mapping)
        ]


@dataclass(frozen=True)
class FileStat:
    """The answer to ``files/stat``."""

    path: str
    type: str
    size: int
    mtime: str | None = None
    etag: str | None = None
    mime_type: str | None = None
    locked: bool = False

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> FileStat:
        """Read the raw ``files/stat`` result."""
        return cls(
            path=get_str(result, "path"),
            type=get_str(result, "type", "other"),
            size=get_int(result, "size"),
            mtime=get_opt_str(result, "mtime"),
            etag=get_opt_str(result, "etag"),
            mime_type=get_opt_str(result, "mimeType"),
            locked=result.get("locked") is True,
        )


@dataclass(frozen=True)
class Created:
    """The answer to ``files/create``."""

    path: str
    type: str
    lock_id: str | None = None

    @classmethod
    def from_result(cls, result: Mapping[str, Any], path: str, type: str) -> Created:
        """Read the raw ``files/create`` result of a request for *type* at *path* (the defaults)."""
        return cls(
            get_str(result, "path", path), get_str(result, "type", type), get_opt_str(result, "lockId")
        )


@dataclass(frozen=True)
class Deleted:
    """The answer to ``files/delete``; ``trashed`` says whether it went to the trash."""

    path: str
    trashed: bool

    @classmethod
    def from_result(cls, result: Mapping[str, Any], path: str) -> Deleted:
        """Read the raw ``files/delete`` result of a request for *path* (the default)."""
        return cls(get_str(result, "path", path), result.get("trashed") is True)


@dataclass(frozen=True)
class RootEntry:
    """One of the client's roots (``roots/list``), as :meth:`~.files_client.FilesClient.roots` returns it.

    A brokering client names every root, and hands over a root's location
    only where its user allows it (PROTOCOL.md): paths written root-relative
    (``data/sales.csv``) need the name only.

    Attributes
    ----------
    uri
        The ``file://`` URI, as the client sent it; ``None`` when the client
        gave the root's name only.
    name
        The root's name: the first segment of root-relative paths (``data`` in
        ``data/sales.csv``); ``None`` if the client gave none.
    path
        The folder on the client's machine, decoded from a ``file://`` URI with
        an empty or ``localhost`` host; ``None`` for anything else, and when no
        URI was given. A remote server cannot open it: it names the folder, for messages.
    read_only
        ``readOnly`` (PROTOCOL.md): the client refuses every write, create,
        delete and rename under this root.
    """

    uri: str | None = None
    name: str | None = None
    path: str | None = None
    read_only: bool = False

    @classmethod
    def from_result(cls, item: Mapping[str, Any]) -> RootEntry | None:
        """Read one raw item of ``roots``; ``None`` if it has no URI."""
        uri = item.get("uri")
        if not isinstance(uri, str) or not uri:
            return None
        meta = item.get("_meta")
        read_only = isinstance(meta, Mapping) and cast("Mapping[str, Any]", meta).get("readOnly") is True
        return cls(uri, get_opt_str(item, "name"), _local_path(uri), read_only)

    @classmethod
    def from_name(cls, entry: Mapping[str, Any]) -> RootEntry | None:
        """Read one raw entry of ``_meta.filesystemBrokering.roots``; ``None`` if it has no name."""
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            return None
        return cls(None, name, None, entry.get("readOnly") is True)


def roots_from_result(result: Mapping[str, Any]) -> tuple[RootEntry, ...]:
    """The roots of a raw ``roots/list`` result: its items and the names in its ``_meta``, merged by name.

    In the order of the names (the client's), then the items no name matched.
    An item and a name of the same root make one :class:`RootEntry` (read-only if
    either says so); malformed items and entries are skipped.
    """
    items = result.get("roots")
    located = [
        root
        for item in (items if isinstance(items, list) else ())
        if isinstance(item, Mapping) and (root := RootEntry.from_result(item)) is not None
    ]
    meta = result.get("_meta")
    ours = meta.get(ROOTS_META) if isinstance(meta, Mapping) else None
    entries = ours.get("roots") if isinstance(ours, Mapping) else None
    named = [
        root
        for entry in (entries if isinstance(entries, list) else ())
        if isinstance(entry, Mapping) and (root := RootEntry.from_name(entry)) is not None
    ]
    by_name: dict[str | None, RootEntry] = {root.name: root for root in located if root.name is not None}
    merged: list[RootEntry] = []
    for root in named:
        found = by_name.get(root.name)
        merged.append(root if found is None else replace(found, read_only=found.read_only or root.read_only))
    known = {root.name for root in named}
    return (*merged, *(root for root in located if root.name is None or root.name not in known))


def _local_path(uri: str) -> str | None:
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    try:
        return unquote(parts.path, errors="strict") or "/"
    except UnicodeDecodeError:
        return None


def _read_figures(
    result: Mapping[str, Any], offset: int, measured: int | None, encoding: str, otherwise: Callable[[], int]
) -> tuple[int, int, bool]:
    """``size``, ``bytesRead`` and ``eof`` of a read at *offset*, checked against the *measured* content.

    A missing ``bytesRead`` is the measured length (``otherwise()`` when it
    cannot be measured exactly), a missing ``eof`` whether the chunk reaches ``size``.
    """
    size = _opt_int(result, "size")
    if size is None or size < 0:
        raise _broken("files/read answered without the file's size")
    answered_offset = _opt_int(result, "offset")
    if answered_offset is not None and answered_offset != offset:
        raise _broken(f"files/read at offset {offset} was answered for offset {answered_offset}")
    claimed = _opt_int(result, "bytesRead")
    if claimed is not None and measured is not None and claimed != measured:
        raise _broken(
            f"files/read claims {claimed} bytes read but its content holds {measured}"
            f" (offset {offset}, encoding {encoding})"
        )
    if claimed is None:
        claimed = measured if measured is not None else otherwise()
    if claimed < 0:
        raise _broken(f"files/read claims {claimed} bytes read")
    eof = result.get("eof")
    return size, claimed, eof if isinstance(eof, bool) else offset + claimed >= size


def _opt_int(result: Mapping[str, Any], key: str) -> int | None:
    value = result.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _broken(message: str) -> IntegrityError:
    return IntegrityError(message, method="files/read")
