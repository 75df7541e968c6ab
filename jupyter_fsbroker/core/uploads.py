"""Staged uploads: a large write sent in chunks and committed atomically.

A chunked ``files/write`` (one with ``offset``) stages its content in a
temporary file beside the target. The target is untouched, and locked for the
uploading connection, until the chunk with ``final: true`` commits the whole
file with one rename. A chunk that does not follow the staged bytes is refused
and changes nothing. An upload abandoned (disconnect, silence, a revoked
grant, a withdrawn root) is discarded, temporary file and lock with it, and so
is one whose chunk could not be written (a full disk).

:class:`Upload` is one staged file; :class:`StagedUploads` holds one
connection's uploads and walks them through their states. Nothing staged ever
becomes visible under the target's name before the commit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from . import ops, tempfiles
from .access import Access
from .audit import AuditNote
from .errors import AlreadyExists, FilesError, InvalidParams, NotFound, PermissionDenied, RateLimited
from .paths import parse
from .resolve import Resolved
from .rootpath import RootPath
from .roots import Root
from .transfers import Transfer

__all__ = ["StagedUploads", "Upload"]

log = logging.getLogger(__name__)


@dataclass
class Upload:
    """One staged upload (mutable: it grows chunk by chunk).

    A chunk being written, a commit taking the descriptors over and a discard
    (disconnect, silence) may come from different threads: ``_guard`` makes
    them take turns, and once discarded or committed the upload refuses more.
    """

    location: RootPath
    dir_fd: int
    temp: str
    fd: int
    lock_id: str
    exclusive: bool
    if_match: str | None
    size: int = 0
    last_activity: float = field(default_factory=time.monotonic)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _state: str = "open"

    def append(self, data: bytes) -> None:
        """Add *data* at the end of what is staged."""
        with self._guard:
            self._check_open()
            view = memoryview(data)
            offset = self.size
            while view:
                written = os.pwrite(self.fd, view, offset)
                view = view[written:]
                offset += written
            self.size = offset
            self.last_activity = time.monotonic()

    def discard(self) -> None:
        """Drop the staged content: close and remove the temporary file. Idempotent."""
        with self._guard:
            if self._state != "open":
                return
            self._state = "discarded"
            try:
                os.close(self.fd)
            finally:
                tempfiles.discard_temp(self.dir_fd, self.temp)
                os.close(self.dir_fd)

    def detach(self) -> tuple[int, int]:
        """Hand the descriptors over for a commit: ``(dir_fd, fd)``; the caller closes them."""
        with self._guard:
            self._check_open()
            self._state = "committed"
            return self.dir_fd, self.fd

    def _check_open(self) -> None:
        if self._state != "open":
            rel = self.location.rel
            raise PermissionDenied(
                "the upload was discarded (disconnect or silence)", reason="upload_discarded", path=rel
            )


class StagedUploads:
    """The staged uploads of one connection, by canonical path. Thread-safe.

    Parameters
    ----------
    access
        The connection's checks and locks: every chunk is checked as a write,
        and an upload holds an exclusive kept lock on its target until it
        ends.
    """

    def __init__(self, access: Access) -> None:
        self._access = access
        self._lock = threading.Lock()
        self._items: dict[str, Upload] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def write(
        self,
        raw: str,
        data: bytes,
        offset: int,
        *,
        final: bool,
        create: bool,
        exclusive: bool,
        if_match: str | None,
        keep: bool,
        note: AuditNote,
        progress: Callable[[Transfer], object],
    ) -> dict[str, Any]:
        """Stage one chunk of ``files/write`` at *offset*; commit the upload with *final*.

        Offset 0 starts a new upload (replacing one in progress for the same
        target); any other offset must be where the staged bytes end. Each
        chunk staged, and the commit, is reported to *progress*.

        Returns
        -------
        dict
            The ``files/write`` result: ``staged: true`` until the commit.

        Raises
        ------
        InvalidParams
            ``reason="bad_offset"`` with ``data.expectedOffset``: the chunk
            does not follow the staged bytes (the upload stays as it was).
        FilesError
            The checks of a write; a refused check ends the upload.
        """
        access = self._access
        try:
            res = access.resolve(raw, "write", note)
        except PermissionDenied:
            # A revoked grant ends the upload: nothing staged is kept.
            self._abandon(raw)
            raise
        with res:
            key = res.location.key
            upload = self._get(key)
            if offset == 0:
                if upload is not None:
                    self._drop(self._pop(key) or upload)
                upload = self._start(res, raw, create=create, exclusive=exclusive, if_match=if_match)
            elif upload is None or offset != upload.size:
                expected = 0 if upload is None else upload.size
                raise InvalidParams(
                    f"chunk at offset {offset} does not follow the staged {expected} bytes",
                    reason="bad_offset",
                    path=raw,
                    expectedOffset=expected,
                )
            try:
                upload.append(data)
            except OSError:
                # A chunk the disk does not take (full, over quota, past the file size limit)
                # ends the upload: its space is given back at once, nothing half-staged stays.
                self._drop(self._pop(key) or upload)
                raise
            progress(self._transfer(res, upload.size, None, False))
            if not final:
                # Nothing is committed yet: the target, and so its etag, is as it was.
                return {
                    "bytesWritten": len(data),
                    "size": upload.size,
                    "etag": "" if res.st is None else ops.etag(res.st),
                    "staged": True,
                }
            self._pop(key)
            result = self._commit(res, upload, raw, len(data), keep, note)
            progress(self._transfer(res, upload.size, upload.size, True))
            return result

    def discard_idle(self) -> None:
        """Discard the uploads silent for longer than ``upload_idle_timeout``."""
        limit = time.monotonic() - self._access.broker.config.limits.upload_idle_timeout
        with self._lock:
            gone = [u for u in self._items.values() if u.last_activity < limit]
            for upload in gone:
                del self._items[upload.location.key]
        self._drop_all(gone)

    def discard_root(self, root: Root) -> None:
        """Discard the uploads inside *root* (it is no longer shared)."""
        with self._lock:
            gone = [u for u in self._items.values() if u.location.root.id == root.id]
            for upload in gone:
                del self._items[upload.location.key]
        self._drop_all(gone)

    def close(self) -> None:
        """Discard every upload (the connection ended)."""
        with self._lock:
            gone = list(self._items.values())
            self._items.clear()
        self._drop_all(gone)

    # -- the states of one upload ----------------------------------------------------------------

    def _start(
        self, res: Resolved, raw: str, *, create: bool, exclusive: bool, if_match: str | None
    ) -> Upload:
        access = self._access
        limit = access.broker.config.limits.max_uploads
        if len(self) >= limit:
            raise RateLimited(
                f"at most {limit} uploads at once", reason="too_many_uploads", path=raw, retryAfterMs=1000
            )
        with access.hold_to_write(res, raw, create=create, exclusive=exclusive, if_match=if_match) as hold:
            lock_id = hold.keep()
        dir_fd = os.dup(res.dir_fd)
        try:
            access.broker.temp_files.sweep_due(dir_fd)
            temp, fd = tempfiles.new_temp(dir_fd)
        except BaseException:
            os.close(dir_fd)
            access.broker.locks.release(lock_id, owner=access.owner)
            raise
        upload = Upload(
            location=res.location,
            dir_fd=dir_fd,
            temp=temp,
            fd=fd,
            lock_id=lock_id,
            exclusive=exclusive,
            if_match=if_match,
        )
        with self._lock:
            self._items[res.location.key] = upload
        return upload

    def _commit(
        self, res: Resolved, upload: Upload, raw: str, chunk: int, keep: bool, note: AuditNote
    ) -> dict[str, Any]:
        access = self._access
        locks = access.broker.locks
        try:
            try:
                access.recheck(res, "write")
                previous = res.refresh()
                if upload.exclusive and previous is not None:
                    raise AlreadyExists(f"{raw} exists already", path=raw)
                ops.check_if_match(previous, upload.if_match, raw)
            except BaseException:
                upload.discard()
                raise
            dir_fd, fd = upload.detach()
            try:
                name = upload.location.name
                assert name is not None
                # commit_temp closes fd and removes the temporary file if it fails.
                st = ops.commit_temp(
                    dir_fd, upload.temp, fd, name, previous=previous, exclusive=upload.exclusive, shown=raw
                )
            finally:
                os.close(dir_fd)
        except BaseException:
            with suppress(NotFound):  # already gone if the connection closed meanwhile
                locks.release(upload.lock_id, owner=access.owner)
            raise
        result: dict[str, Any] = {"bytesWritten": chunk, "size": st.st_size, "etag": ops.etag(st)}
        if keep:
            note.lock_id = upload.lock_id
            result["lockId"] = upload.lock_id
        else:
            locks.release(upload.lock_id, owner=access.owner)
        return result

    def _drop(self, upload: Upload) -> None:
        try:
            upload.discard()
        finally:
            with suppress(NotFound):
                self._access.broker.locks.release(upload.lock_id, owner=self._access.owner)

    def _drop_all(self, uploads: list[Upload]) -> None:
        for upload in uploads:
            # One upload the OS will not let go of must not keep the others (or, on a close,
            # the connection's locks and watches) from being released.
            try:
                self._drop(upload)
            except OSError:
                log.warning("could not discard a staged upload of %s", upload.location.rel, exc_info=True)

    def _abandon(self, raw: str) -> None:
        try:
            target = parse(raw, self._access.broker.roots)
        except FilesError:
            return
        upload = self._pop(target.key)
        if upload is not None:
            self._drop(upload)

    def _get(self, key: str) -> Upload | None:
        with self._lock:
            return self._items.get(key)

    def _pop(self, key: str) -> Upload | None:
        with self._lock:
            return self._items.pop(key, None)

    def _transfer(self, res: Resolved, done: int, total: int | None, finished: bool) -> Transfer:
        access = self._access
        return Transfer(access.owner, access.label, res.rel, "write", done, total, finished)
