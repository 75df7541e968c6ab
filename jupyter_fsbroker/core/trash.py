"""A recoverable trash outside the roots.

``files/delete`` moves the object into a :class:`Trash` (a per-user directory
the broker chooses, outside every root) unless the notebook asked for
permanent deletion, which uses :func:`~jupyter_fsbroker.core.trees.remove_tree`.

Every operation on the deleted object is relative to a directory descriptor and
never follows a symbolic link: a link is moved, copied or deleted as a link,
and a directory swapped for a link while it is being removed cannot lead the
removal outside.

Layout of the trash directory::

    <trash>/<id>/payload     the deleted file, directory or link
    <trash>/<id>/item.json   its metadata (the fields of TrashItem)

The metadata is written last, so an item shows in :meth:`Trash.items` only
once it is complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .posix import DIR_READ_FLAGS
from .trees import check_name, copy_tree, remove_tree, tree_size

__all__ = ["Trash", "TrashItem"]

log = logging.getLogger(__name__)

_PAYLOAD = "payload"
_META = "item.json"
_META_TMP = "item.json.tmp"
_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$")
#: Item directories without metadata older than this (seconds) are leftovers of an interrupted move.
_ORPHAN_AGE = 3600.0
_META_MAX = 1024 * 1024


@dataclass(frozen=True)
class TrashItem:
    """One deleted object in the trash.

    Attributes
    ----------
    id
        Unique id, ``"<UTC time>-<8 hex>"`` such as ``"20261129T120000Z-1a2b3c4d"``.
    name
        The object's original file name.
    origin
        Its original absolute path, where :meth:`Trash.restore` puts it back.
    display
        The root-relative path it had, e.g. ``"data/x.csv"``.
    server
        The server that deleted it.
    deleted_at
        :func:`time.time` of the deletion.
    is_dir
        Whether it is a directory (a symbolic link to one is not).
    size
        Bytes of a file, or the sum of the files below a directory (0 for a link).
    """

    id: str
    name: str
    origin: str
    display: str
    server: str
    deleted_at: float
    is_dir: bool
    size: int


# -- the trash --------------------------------------------------------------------------------------


class Trash:
    """A recoverable trash in *directory*, outside every root.

    Parameters
    ----------
    directory
        Created (mode ``0o700``) if missing; made private if it is not.

    Raises
    ------
    ConfigError
        The directory cannot be created or opened, or is a symbolic link.

    Notes
    -----
    Methods are thread-safe within a process. Several processes may share one
    trash: ids are random, and every change is a rename or a removal of the
    item's own directory.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = os.path.abspath(os.fspath(directory))
        self._lock = threading.RLock()
        try:
            os.makedirs(self._directory, mode=0o700, exist_ok=True)
            fd = os.open(self._directory, DIR_READ_FLAGS)
        except OSError as exc:
            raise ConfigError(f"cannot use {self._directory!r} as the trash: {exc.strerror}") from exc
        try:
            mode = os.fstat(fd).st_mode
            if mode & 0o077:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)
        finally:
            os.close(fd)

    @property
    def directory(self) -> str:
        """The trash directory (absolute)."""
        return self._directory

    def _open(self) -> int:
        return os.open(self._directory, DIR_READ_FLAGS)

    # -- moving in -------------------------------------------------------------------------------

    def move_in(self, dir_fd: int, name: str, *, origin: str, display: str, server: str) -> TrashItem:
        """Move the entry *name* of the directory open as *dir_fd* into the trash.

        The entry is renamed into the trash relative to *dir_fd*, never by
        path and never following a link (a link is trashed as a link). When
        the trash is on another filesystem, the entry is copied in
        descriptor-relative, fsynced, and then removed with :func:`remove_tree`.

        Parameters
        ----------
        dir_fd
            A descriptor of the directory holding *name* (one that only names it is fine).
        name
            A single path component.
        origin
            The entry's absolute path, where :meth:`restore` puts it back.
        display
            Its root-relative path, for people.
        server
            The server that deleted it.

        Returns
        -------
        TrashItem
            The new item.

        Raises
        ------
        FileNotFoundError
            *name* does not exist.
        ValueError
            *name* is not a single component or *origin* is not absolute.
        OSError
            The move failed; the entry is where it was. After a successful
            cross-filesystem copy, an error removing the original is raised
            too, and the complete copy stays in the trash.
        """
        check_name(name)
        if not os.path.isabs(origin):
            raise ValueError(f"origin must be an absolute path, not {origin!r}")
        with self._lock:
            trash_fd = self._open()
            try:
                now = time.time()
                item_id, item_fd = _new_item_dir(trash_fd, now)
                try:
                    copied = self._fill(dir_fd, name, trash_fd, item_id, item_fd)
                    try:
                        st = os.stat(_PAYLOAD, dir_fd=item_fd, follow_symlinks=False)
                        item = TrashItem(
                            id=item_id,
                            name=name,
                            origin=origin,
                            display=display,
                            server=server,
                            deleted_at=now,
                            is_dir=stat.S_ISDIR(st.st_mode),
                            size=tree_size(item_fd, _PAYLOAD),
                        )
                        _write_meta(item_fd, item)
                    except BaseException:
                        self._undo(dir_fd, name, trash_fd, item_id, item_fd, copied)
                        raise
                finally:
                    os.close(item_fd)
            finally:
                os.close(trash_fd)
            if copied:
                remove_tree(dir_fd, name)
        return item

    def _fill(self, dir_fd: int, name: str, trash_fd: int, item_id: str, item_fd: int) -> bool:
        """Put the entry into the item directory; return whether it was copied (not renamed)."""
        try:
            try:
                os.rename(name, _PAYLOAD, src_dir_fd=dir_fd, dst_dir_fd=item_fd)
                return False
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            try:
                copy_tree(dir_fd, name, item_fd, _PAYLOAD)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    remove_tree(item_fd, _PAYLOAD, force=True)
                raise
            return True
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(item_id, dir_fd=trash_fd)
            raise

    @staticmethod
    def _undo(dir_fd: int, name: str, trash_fd: int, item_id: str, item_fd: int, copied: bool) -> None:
        """Take back a move whose metadata could not be written."""
        try:
            if copied:
                remove_tree(item_fd, _PAYLOAD, force=True)
            else:
                os.rename(_PAYLOAD, name, src_dir_fd=item_fd, dst_dir_fd=dir_fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_META_TMP, dir_fd=item_fd)
            os.rmdir(item_id, dir_fd=trash_fd)
        except OSError:
            log.exception("cannot take back the move of an entry into the trash (%s)", item_id)

    # -- listing ---------------------------------------------------------------------------------

    def items(self) -> tuple[TrashItem, ...]:
        """The complete items in the trash, oldest first (read from their metadata)."""
        trash_fd = self._open()
        try:
            found = [item for item_id in _item_dirs(trash_fd) if (item := _read_item(trash_fd, item_id))]
        finally:
            os.close(trash_fd)
        found.sort(key=lambda item: (item.deleted_at, item.id))
        return tuple(found)

    # -- restoring and purging -------------------------------------------------------------------

    def restore(self, item_id: str, *, overwrite: bool = False) -> str:
        """Move the item back to its origin and return the origin.

        Parameters
        ----------
        item_id
            The item's id.
        overwrite
            Replace whatever is at the origin now (a directory there is
            deleted permanently first).

        Returns
        -------
        str
            The origin path.

        Raises
        ------
        KeyError
            No such item.
        FileExistsError
            Something is at the origin and *overwrite* is false.
        FileNotFoundError
            The origin's parent directory no longer exists.
        """
        with self._lock:
            trash_fd = self._open()
            try:
                item = _read_item(trash_fd, item_id) if _ID_RE.match(item_id) else None
                if item is None:
                    raise KeyError(item_id)
                item_fd = os.open(item_id, DIR_READ_FLAGS, dir_fd=trash_fd)
                try:
                    parent, base = os.path.split(item.origin)
                    # The origin is the user's own path: its parents are followed as written.
                    parent_fd = os.open(parent or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    try:
                        _put_back(item_fd, parent_fd, base, item, overwrite)
                    finally:
                        os.close(parent_fd)
                    os.unlink(_META, dir_fd=item_fd)
                finally:
                    os.close(item_fd)
                remove_tree(trash_fd, item_id, force=True)
            finally:
                os.close(trash_fd)
        return item.origin

    def purge(self, item_id: str) -> None:
        """Delete the item permanently.

        Raises
        ------
        KeyError
            No such item.
        """
        if not _ID_RE.match(item_id):
            raise KeyError(item_id)
        with self._lock:
            trash_fd = self._open()
            try:
                try:
                    st = os.stat(item_id, dir_fd=trash_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise KeyError(item_id) from None
                if not stat.S_ISDIR(st.st_mode):
                    raise KeyError(item_id)
                _purge(trash_fd, item_id)
            finally:
                os.close(trash_fd)

    def empty(self, *, older_than: float | None = None) -> int:
        """Delete items permanently and return how many were deleted.

        Parameters
        ----------
        older_than
            Only items deleted more than this many seconds ago; ``None`` for all.
            Leftovers of interrupted moves (no metadata, over an hour old) are
            removed too, without being counted.

        Raises
        ------
        ValueError
            *older_than* is negative.
        """
        if older_than is not None and older_than < 0:
            raise ValueError(f"older_than must not be negative, not {older_than}")
        count = 0
        with self._lock:
            now = time.time()
            trash_fd = self._open()
            try:
                for item_id in _item_dirs(trash_fd):
                    item = _read_item(trash_fd, item_id)
                    try:
                        if item is None:
                            st = os.stat(item_id, dir_fd=trash_fd, follow_symlinks=False)
                            if now - st.st_mtime > _ORPHAN_AGE:
                                _purge(trash_fd, item_id)
                            continue
                        if older_than is not None and now - item.deleted_at <= older_than:
                            continue
                        _purge(trash_fd, item_id)
                    except (FileNotFoundError, KeyError):
                        continue
                    except OSError:
                        log.exception("cannot delete trash item %s", item_id)
                        continue
                    count += 1
            finally:
                os.close(trash_fd)
        return count


def _new_item_dir(trash_fd: int, now: float) -> tuple[str, int]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    while True:
        item_id = f"{stamp}-{secrets.token_hex(4)}"
        try:
            os.mkdir(item_id, 0o700, dir_fd=trash_fd)
        except FileExistsError:
            continue
        try:
            return item_id, os.open(item_id, DIR_READ_FLAGS, dir_fd=trash_fd)
        except BaseException:
            os.rmdir(item_id, dir_fd=trash_fd)
            raise


def _write_meta(item_fd: int, item: TrashItem) -> None:
    data = json.dumps({"version": 1, **dataclasses.asdict(item)}, indent=1).encode()
    fd = os.open(
        _META_TMP, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=item_fd
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(_META_TMP, _META, src_dir_fd=item_fd, dst_dir_fd=item_fd)
    os.fsync(item_fd)


def _item_dirs(trash_fd: int) -> list[str]:
    with os.scandir(trash_fd) as it:
        return [e.name for e in it if _ID_RE.match(e.name) and e.is_dir(follow_symlinks=False)]


def _read_item(trash_fd: int, item_id: str) -> TrashItem | None:
    """The item *item_id* if it is complete (metadata and payload), else ``None``."""
    try:
        item_fd = os.open(item_id, DIR_READ_FLAGS, dir_fd=trash_fd)
    except OSError:
        return None
    try:
        try:
            fd = os.open(_META, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=item_fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            raw = f.read(_META_MAX)
        try:
            os.stat(_PAYLOAD, dir_fd=item_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
    finally:
        os.close(item_fd)
    try:
        item = _item_from_json(json.loads(raw))
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring trash item %s with unreadable metadata: %s", item_id, exc)
        return None
    if item.id != item_id:
        log.warning("ignoring trash item %s whose metadata names %s", item_id, item.id)
        return None
    return item


def _item_from_json(data: Any) -> TrashItem:
    if not isinstance(data, dict):
        raise TypeError("metadata is not an object")
    strings = {k: data[k] for k in ("id", "name", "origin", "display", "server")}
    for key, value in strings.items():
        if not isinstance(value, str):
            raise TypeError(f"{key} is not a string")
    deleted_at, is_dir, size = data["deleted_at"], data["is_dir"], data["size"]
    if isinstance(deleted_at, bool) or not isinstance(deleted_at, int | float):
        raise TypeError("deleted_at is not a number")
    if not isinstance(is_dir, bool):
        raise TypeError("is_dir is not a boolean")
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError("size is not an integer")
    return TrashItem(**strings, deleted_at=float(deleted_at), is_dir=is_dir, size=size)


def _put_back(item_fd: int, parent_fd: int, base: str, item: TrashItem, overwrite: bool) -> None:
    try:
        existing: os.stat_result | None = os.stat(base, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if not overwrite:
            raise FileExistsError(errno.EEXIST, "something exists at the origin already", item.origin)
        if stat.S_ISDIR(existing.st_mode) or item.is_dir:
            # A rename cannot replace these: clear the way (a file or link is replaced atomically).
            remove_tree(parent_fd, base, force=False)
    try:
        os.rename(_PAYLOAD, base, src_dir_fd=item_fd, dst_dir_fd=parent_fd)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    # Another filesystem: copy beside the origin, then rename into place in one step.
    temp = f".fsbroker-restore-{secrets.token_hex(8)}"
    try:
        copy_tree(item_fd, _PAYLOAD, parent_fd, temp)
        os.rename(temp, base, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_tree(parent_fd, temp, force=False)
        raise
    remove_tree(item_fd, _PAYLOAD, force=True)


def _purge(trash_fd: int, item_id: str) -> None:
    """Remove the item directory, metadata first so that the item disappears at once."""
    try:
        item_fd = os.open(item_id, DIR_READ_FLAGS, dir_fd=trash_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise KeyError(item_id) from None
        raise
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_META, dir_fd=item_fd)
    finally:
        os.close(item_fd)
    remove_tree(trash_fd, item_id, force=True)
