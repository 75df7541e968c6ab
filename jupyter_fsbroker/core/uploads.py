"""Staged uploads: a large write sent in chunks and committed atomically.

A chunked ``files/write`` (one with ``offset``) stages its content in a
temporary file beside the target. The target is untouched, and locked for the
uploading connection, until the chunk with ``final: true`` commits the whole
file with one rename. An upload abandoned by disconnect or by silence is
discarded, temporary file and lock with it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from . import ops
from .errors import PermissionDenied

__all__ = ["Upload", "Uploads"]


@dataclass
class Upload:
    """One staged upload (mutable: it grows chunk by chunk).

    A chunk being written, a commit taking the descriptors over and a discard
    (disconnect, silence) may come from different threads: ``_guard`` makes
    them take turns, and once discarded or committed the upload refuses more.
    """

    key: str
    rel: str
    name: str
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
                ops.discard_temp(self.dir_fd, self.temp)
                os.close(self.dir_fd)

    def detach(self) -> tuple[int, int]:
        """Hand the descriptors over for a commit: ``(dir_fd, fd)``; the caller closes them."""
        with self._guard:
            self._check_open()
            self._state = "committed"
            return self.dir_fd, self.fd

    def _check_open(self) -> None:
        if self._state != "open":
            raise PermissionDenied(
                "the upload was discarded (disconnect or silence)", reason="upload_discarded", path=self.rel
            )


class Uploads:
    """The staged uploads of one connection, by canonical key. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Upload] = {}

    def get(self, key: str) -> Upload | None:
        with self._lock:
            return self._items.get(key)

    def put(self, upload: Upload) -> None:
        with self._lock:
            self._items[upload.key] = upload

    def pop(self, key: str) -> Upload | None:
        with self._lock:
            return self._items.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def pop_idle(self, idle: float) -> list[Upload]:
        """Remove and return uploads silent for more than *idle* seconds."""
        limit = time.monotonic() - idle
        with self._lock:
            gone = [u for u in self._items.values() if u.last_activity < limit]
            for u in gone:
                del self._items[u.key]
        return gone

    def pop_all(self) -> list[Upload]:
        with self._lock:
            gone = list(self._items.values())
            self._items.clear()
        return gone
