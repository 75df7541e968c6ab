"""One entry of the trash: its value (:class:`TrashEntry`) and its metadata file.

An entry's directory holds the deleted object as ``payload`` and its metadata as
``item.json``, the JSON of a :class:`TrashEntry` (``"version": 2``; version 1,
before roots and connections were recorded, is still read). The metadata is
written to a temporary name, flushed and renamed into place, so a reader finds
either none or all of it; it is read without following a link, and an entry
whose metadata is missing, unreadable, or names another id is no entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from .posix import DIR_READ_FLAGS

__all__ = ["META", "PAYLOAD", "TrashEntry", "read_entry", "write_meta"]

log = logging.getLogger(__name__)

#: The name of the deleted object in its entry directory.
PAYLOAD = "payload"
#: The name of the metadata file in an entry directory.
META = "item.json"
_META_TMP = "item.json.tmp"
_META_MAX = 1024 * 1024


@dataclass(frozen=True)
class TrashEntry:
    """One deleted object in the trash.

    Attributes
    ----------
    id
        Unique id, ``"<UTC time>-<8 hex>"`` such as ``"20261129T120000Z-1a2b3c4d"``.
    root
        The name of the root it was deleted from (``"data"``).
    path
        Its root-relative path then, as servers wrote it (``"data/sales/x.csv"``).
    origin
        Its absolute path then, where a restore puts it back: for the user's
        eyes only, never sent to a server.
    size
        Bytes of a file, or the sum of the files below a directory (0 for a link).
    deleted_at
        :func:`time.time` of the deletion.
    server
        The name of the connection that deleted it.
    connection_id
        The id of that connection (``""`` for entries of older versions).
    is_dir
        Whether it is a directory (a symbolic link to one is not).
    """

    id: str
    root: str
    path: str
    origin: str
    size: int
    deleted_at: float
    server: str
    connection_id: str
    is_dir: bool

    @property
    def name(self) -> str:
        """The object's own name (the last component of :attr:`path`)."""
        return self.path.rpartition("/")[2]


def write_meta(entry_fd: int, entry: TrashEntry) -> None:
    """Write *entry* as the metadata of the entry directory open as *entry_fd*, durably.

    Raises
    ------
    OSError
        It could not be written; no metadata (not even a partial one) is left.
    """
    data = json.dumps({"version": 2, **dataclasses.asdict(entry)}, indent=1).encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(_META_TMP, flags, 0o600, dir_fd=entry_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(_META_TMP, META, src_dir_fd=entry_fd, dst_dir_fd=entry_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(_META_TMP, dir_fd=entry_fd)
        raise
    os.fsync(entry_fd)


def read_entry(trash_fd: int, entry_id: str) -> TrashEntry | None:
    """The entry *entry_id* of the trash open as *trash_fd*, if complete (metadata, payload); else None."""
    try:
        entry_fd = os.open(entry_id, DIR_READ_FLAGS, dir_fd=trash_fd)
    except OSError:
        return None
    try:
        try:
            fd = os.open(META, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=entry_fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            raw = f.read(_META_MAX)
        try:
            os.stat(PAYLOAD, dir_fd=entry_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
    finally:
        os.close(entry_fd)
    try:
        entry = _entry_from_json(json.loads(raw))
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring trash entry %s with unreadable metadata: %s", entry_id, exc)
        return None
    if entry.id != entry_id:
        log.warning("ignoring trash entry %s whose metadata names %s", entry_id, entry.id)
        return None
    return entry


def _entry_from_json(data: Any) -> TrashEntry:
    if not isinstance(data, dict):
        raise TypeError("metadata is not an object")
    if data.get("version", 1) == 1:  # before roots and connections were recorded
        display = data["display"]
        root = display.partition("/")[0] if isinstance(display, str) else None
        data = {**data, "root": root, "path": display, "connection_id": ""}
    strings = {k: data[k] for k in ("id", "root", "path", "origin", "server", "connection_id")}
    for key, value in strings.items():
        if not isinstance(value, str):
            raise TypeError(f"{key} is not a string")
    deleted_at, is_dir, size = data["deleted_at"], data["is_dir"], data["size"]
    if isinstance(deleted_at, bool) or not isinstance(deleted_at, int | float):
        raise TypeError("deleted_at is not a number")
    if not isinstance(is_dir, bool):
        raise TypeError("is_dir is not a boolean")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise TypeError("size is not a non-negative integer")
    return TrashEntry(**strings, deleted_at=float(deleted_at), is_dir=is_dir, size=size)
