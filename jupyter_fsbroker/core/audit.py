"""The audit trail: one record per ``files/*`` request.

An :class:`AuditRecord` says who asked for what, on which path, and what the
broker decided; it never holds file content. While a request runs, its
:class:`AuditNote` collects what the record will say. :class:`AuditLog` keeps
the newest records in memory for the notebook's views, keeps running totals
per server, tells subscribers about every new record, and appends each record
as one JSON line to a file when configured (PROTOCOL.md, "Audit").
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from .errors import ConfigError
from .observers import Listeners
from .resource import Closeable
from .rootpath import RootPath
from .timestamps import iso_utc

__all__ = ["AuditLog", "AuditNote", "AuditRecord"]

log = logging.getLogger(__name__)

#: Methods whose ``bytes`` count as read, and as written, in :meth:`AuditLog.totals`.
_READ_METHODS = frozenset({"files/read"})
_WRITE_METHODS = frozenset({"files/write", "files/create"})


@dataclass(frozen=True)
class AuditRecord:
    """What happened to one ``files/*`` request.

    Attributes
    ----------
    time
        :func:`time.time` when the request started.
    server
        The server's name.
    connection_id
        The connection the request came on.
    method
        The method, e.g. ``"files/read"``.
    path
        The path as the request wrote it (``None`` when it had none).
    canonical
        The canonical root-relative path, when it was resolved.
    root
        The name of the root the path fell in, when known.
    decision
        ``"allow"`` or ``"deny"``.
    error
        The PROTOCOL.md error name (``"PERMISSION_DENIED"`` ...), or
        ``"INVALID_PARAMS"``, ``"METHOD_NOT_FOUND"``, ``"INTERNAL_ERROR"``.
    reason
        The error's snake_case reason.
    bytes
        Bytes read or written by the request.
    duration_ms
        How long the request took, in milliseconds.
    lock_id
        The lockId used or returned, if any.
    cause
        Why a grant was missing or a consent granted nothing, when known
        (``consent_denied``, ``consent_timeout``, ``revoked`` ...).
    """

    time: float
    server: str
    connection_id: str
    method: str
    path: str | None
    canonical: str | None
    root: str | None
    decision: str
    error: str | None = None
    reason: str | None = None
    bytes: int = 0
    duration_ms: float = 0.0
    lock_id: str | None = None
    cause: str | None = None

    @property
    def curable(self) -> bool:
        """A refusal for want of a grant, which a consent may cure (the server may ask next)."""
        return self.decision == "deny" and self.reason == "not_granted"

    def to_json(self) -> dict[str, Any]:
        """Return the record as a JSON-ready dict with camelCase keys.

        ``time`` is ISO 8601 UTC with milliseconds (``"2026-11-29T12:30:00.123Z"``).
        Every key is present (``cause`` only when known); unknown values are ``None``.
        """
        out: dict[str, Any] = {
            "time": iso_utc(self.time),
            "server": self.server,
            "connectionId": self.connection_id,
            "method": self.method,
            "path": self.path,
            "canonical": self.canonical,
            "root": self.root,
            "decision": self.decision,
            "error": self.error,
            "reason": self.reason,
            "bytes": self.bytes,
            "durationMs": round(self.duration_ms, 3),
            "lockId": self.lock_id,
        }
        if self.cause is not None:
            out["cause"] = self.cause
        return out


@dataclass
class AuditNote:
    """What one request's :class:`AuditRecord` will say, filled in as the request goes.

    The request dispatch creates one per request and turns it into the record
    when the request ends; the handlers add what they learn on the way.

    Attributes
    ----------
    method
        The method asked for.
    started, clock
        :func:`time.time` and :func:`time.perf_counter` when the request arrived.
    path, canonical, root, bytes, lock_id
        As in :class:`AuditRecord`.
    refused
        A refusal that is an answer rather than an error (a consent that was
        not given): the record then says ``deny`` with this reason.
    cause
        As in :class:`AuditRecord`.
    """

    method: str
    started: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.perf_counter)
    path: str | None = None
    canonical: str | None = None
    root: str | None = None
    bytes: int = 0
    lock_id: str | None = None
    refused: str | None = None
    cause: str | None = None

    def locate(self, location: RootPath) -> None:
        """Record where the request's path resolved to."""
        self.canonical = location.rel
        self.root = location.root.name


class _Totals:
    __slots__ = ("allowed", "denied", "read", "written")

    def __init__(self) -> None:
        self.read = 0
        self.written = 0
        self.allowed = 0
        self.denied = 0

    def as_dict(self) -> dict[str, int]:
        return {"read": self.read, "written": self.written, "allowed": self.allowed, "denied": self.denied}


class AuditLog(Closeable):
    """Thread-safe, observable store of audit records.

    Parameters
    ----------
    capacity
        How many of the newest records are kept in memory.
    path
        When given, every record is also appended to this file as one JSON
        line. The file is opened in append mode and, when it is created, with
        mode ``0o600``. A failing write is logged, never raised.

    Raises
    ------
    ConfigError
        *capacity* is not a positive integer, or the file cannot be opened.

    Notes
    -----
    After :meth:`close` the log keeps recording in memory (late requests of a
    closing broker are still shown) but no longer writes to the file.
    """

    def __init__(self, *, capacity: int = 2000, path: str | os.PathLike[str] | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ConfigError(f"the audit capacity must be a positive integer, not {capacity!r}")
        self._lock = threading.Lock()
        self._ring: collections.deque[AuditRecord] = collections.deque(maxlen=capacity)
        self._totals: dict[str, _Totals] = {}
        self._listeners: Listeners[[AuditRecord]] = Listeners()
        self._file: IO[str] | None = None
        self._write_failing = False
        self._path = os.fspath(path) if path is not None else None
        if self._path is not None:
            try:
                fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise ConfigError(f"cannot open the audit file {self._path!r}: {exc.strerror}") from exc
            self._file = os.fdopen(fd, "a", encoding="utf-8", newline="\n")

    @property
    def capacity(self) -> int:
        """How many records are kept in memory."""
        maxlen = self._ring.maxlen
        assert maxlen is not None
        return maxlen

    @property
    def path(self) -> str | None:
        """The JSON Lines file, if any."""
        return self._path

    def append(self, record: AuditRecord) -> None:
        """Add *record*: to the ring, the totals, the file, then tell the subscribers.

        Parameters
        ----------
        record
            The record to add.
        """
        with self._lock:
            self._ring.append(record)
            totals = self._totals.get(record.server)
            if totals is None:
                totals = self._totals[record.server] = _Totals()
            if record.decision == "allow":
                totals.allowed += 1
            else:
                totals.denied += 1
            if record.method in _READ_METHODS:
                totals.read += record.bytes
            elif record.method in _WRITE_METHODS:
                totals.written += record.bytes
            if self._file is not None:
                self._write(record)
        self._listeners.notify(record)

    def _write(self, record: AuditRecord) -> None:
        assert self._file is not None
        try:
            self._file.write(json.dumps(record.to_json(), separators=(",", ":")) + "\n")
            self._file.flush()
        except (OSError, ValueError) as exc:
            # Log the first failure of a series in full, later ones quietly.
            if not self._write_failing:
                self._write_failing = True
                log.warning("cannot write to the audit file %s: %s", self._path, exc)
            else:
                log.debug("cannot write to the audit file %s: %s", self._path, exc)
        else:
            if self._write_failing:
                self._write_failing = False
                log.warning("writing to the audit file %s works again", self._path)

    def records(self, *, server: str | None = None, limit: int | None = None) -> tuple[AuditRecord, ...]:
        """The records kept in memory, newest last.

        Parameters
        ----------
        server
            Only this server's records.
        limit
            At most this many (the newest).

        Raises
        ------
        ValueError
            *limit* is negative.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must not be negative, not {limit}")
        with self._lock:
            found = [r for r in self._ring if server is None or r.server == server]
        if limit is not None:
            found = found[len(found) - limit :] if limit else []
        return tuple(found)

    def subscribe(self, listener: Callable[[AuditRecord], None]) -> Callable[[], None]:
        """Call *listener* with every record appended from now on.

        The listener runs on the appending thread, outside the log's lock;
        its exceptions are logged and otherwise ignored.

        Returns
        -------
        Callable[[], None]
            Unsubscribes; calling it again does nothing.
        """
        return self._listeners.add(listener)

    def totals(self) -> dict[str, dict[str, int]]:
        """Per server, the totals over every record ever appended.

        Returns
        -------
        dict[str, dict[str, int]]
            ``{server: {"read": bytes, "written": bytes, "allowed": n, "denied": n}}``;
            read bytes come from ``files/read``, written bytes from
            ``files/write`` and ``files/create``.
        """
        with self._lock:
            return {server: t.as_dict() for server, t in self._totals.items()}

    def close(self) -> None:
        """Close the file, if any. Idempotent; the in-memory log keeps working."""
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                log.warning("cannot close the audit file %s: %s", self._path, exc)
