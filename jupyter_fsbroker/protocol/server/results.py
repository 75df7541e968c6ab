"""The answers of ``files/*`` requests as frozen values, read leniently from the raw results.

Each value is built by one ``from_result`` (or ``from_params``) from the client's
raw JSON; nothing here sends anything. :class:`ChangeEvent` mirrors the wire
shape of ``notifications/files/changed`` (a copy of the contract; a test keeps
it equal to the core's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InternalError
from .wire import decode_base64, get_int, get_opt_str, get_str, get_strs

__all__ = [
    "ChangeEvent",
    "ConsentResult",
    "Created",
    "Deleted",
    "Entry",
    "FileStat",
    "PathConsentResult",
    "ReadChunk",
    "WriteResult",
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
    def from_result(cls, result: Mapping[str, Any]) -> ConsentResult:
        """Read the raw ``files/consent`` result (a :class:`PathConsentResult` when it lists ``approved``)."""
        granted = result.get("granted") is True
        paths, ops = get_strs(result, "approvedPaths"), get_strs(result, "operations")
        expires = get_opt_str(result, "expiresAt")
        entries = result.get("approved")
        if isinstance(entries, list):
            approved = tuple(
                (str(entry["path"]), get_strs(entry, "operations"))
                for entry in entries
                if isinstance(entry, Mapping) and isinstance(entry.get("path"), str)
            )
            return PathConsentResult(granted, paths, ops, expires, approved)
        return cls(granted, paths, ops, expires)

    def operations_on(self, paths: Sequence[str]) -> tuple[str, ...]:
        """The operations granted on every one of *paths* (as far as the answer tells).

        A flat answer grants its :attr:`operations` on each approved path; the
        paths are compared as written and as approved (root-relative), so a
        path the client spelled differently counts as approved when anything was.
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

    def operations_on(self, paths: Sequence[str]) -> tuple[str, ...]:
        """The operations granted on every one of *paths* (see :meth:`ConsentResult.operations_on`)."""
        by_path = dict(self.approved)
        found = [by_path[path] for path in paths if path in by_path]
        if len(found) < len(paths):  # spelled otherwise than approved: no better than the flat answer
            return super().operations_on(paths) if not found else tuple(found[0])
        return tuple(op for op in found[0] if all(op in ops for ops in found))


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
    def from_result(cls, result: Mapping[str, Any], encoding: str) -> ReadChunk:
        """Read the raw ``files/read`` result of a request for *encoding*."""
        content = result.get("content")
        if not isinstance(content, str):
            raise InternalError("files/read answered without content", method="files/read")
        return cls(
            content=content,
            encoding=get_str(result, "encoding", encoding),
            size=get_int(result, "size"),
            offset=get_int(result, "offset"),
            bytes_read=get_int(result, "bytesRead"),
            eof=result.get("eof") is True,
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
            size=get_int(result, "size"),
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


@dataclass(frozen=True)
class Deleted:
    """The answer to ``files/delete``; ``trashed`` says whether it went to the trash."""

    path: str
    trashed: bool


@dataclass(frozen=True)
class ChangeEvent:
    """One ``notifications/files/changed`` event.

    Attributes
    ----------
    watch_id
        The watch that reports it.
    path
        The changed entry, root-relative.
    event
        ``created``, ``modified``, ``deleted`` or ``moved``.
    timestamp
        ISO 8601 UTC time of the change.
    old_path
        For ``moved``: the previous path.
    """

    watch_id: str
    path: str
    event: str
    timestamp: str
    old_path: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ChangeEvent | None:
        """Parse notification params; ``None`` if they are malformed."""
        if params is None:
            return None
        watch_id, path, event = params.get("watchId"), params.get("path"), params.get("event")
        if not (isinstance(watch_id, str) and isinstance(path, str) and isinstance(event, str)):
            return None
        return cls(watch_id, path, event, get_str(params, "timestamp"), get_opt_str(params, "oldPath"))
