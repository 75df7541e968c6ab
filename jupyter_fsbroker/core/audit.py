"""The audit trail: one record per ``files/*`` request, and per entry the user takes out of the trash.

An :class:`AuditRecord` says who asked for what, on which path, and what the
broker decided; it never holds file content. While a request runs, its
:class:`AuditNote` collects what the record will say. :class:`AuditLog` keeps
the newest records in memory for the notebook's views, keeps running totals
per server, tells subscribers about every new record, and appends each record
as one JSON line to a file when configured (PROTOCOL.md, "Audit").

Besides the servers' requests, the log records what happens to the trash's
entries outside a request: the user's restores and emptying (``actor``
``"user"``, ``server`` ``"(you)"``) and the retention's removals (``actor``
``"broker"``, ``server`` ``"(retention)"``), method ``trash/restore``,
``trash/empty`` or ``trash/expire``; and the sign-ins to servers that ask for authorization
(``actor`` ``"user"``, ``server`` the connection's name): method ``auth/signed_in``,
``auth/signed_out`` or ``auth/sign_in_failed`` (``reason``: why), with the ``issuer`` and
``resource`` only.

**Written first.** When the broker requires an audit
(:attr:`~jupyter_fsbroker.core.config.BrokerConfig.audit_required`), each
request is announced before it runs by :meth:`AuditLog.begin`: one line
``{"phase": "intent", "auditId": ..., "time", "server", "connectionId",
"method", "path"}``, written and flushed to the disk (``fdatasync``: the
broker's own writes reach the disk before they are answered, so a record
that only reached the page cache could be lost in a crash that keeps the
change). The request's record, written when it ends as always, carries the
same ``auditId``; a reader pairs the two by it, and counts only the lines
without ``phase`` as records. An intent without its record is a request whose
outcome was never written (the process died, or the file failed after the
intent): it may have happened. A record whose intent is missing is a request
refused because its intent could not be written. The in-memory log and the
views hold the records only, one per request.
"""

from __future__ import annotations

import collections
import errno
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..wire.timestamps import iso_utc
from .errors import ConfigError
from .listeners import Listeners
from .resource import Closeable
from .rootpath import RootPath

__all__ = ["BROKER_ACTOR", "USER_ACTOR", "AuditLog", "AuditNote", "AuditRecord", "new_audit_id"]

#: The ``server`` and ``actor`` of the records of the user's own actions (restoring from the trash ...).
USER_ACTOR = ("(you)", "user")
#: The ``server`` and ``actor`` of the records of what the broker does on its own (the trash's retention).
BROKER_ACTOR = ("(retention)", "broker")

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
        Why a consent granted nothing (``consent_denied``, ``consent_timeout``,
        ``consent_withdrawn`` ...), or why a grant was missing when the grant
        itself went (``revoked``, ``expired`` ...). A refusal for want of a
        grant never repeats an earlier consent's cause: that consent's record
        says it.
    actor
        Who acted: ``"server"`` (a ``files/*`` request), ``"user"`` or
        ``"broker"`` (see the module's docstring).
    audit_id
        The id that pairs the record with the line announcing its request,
        when the audit is required (see :meth:`AuditLog.begin`).
    issuer, resource
        A sign-in's authorization server and resource (methods ``auth/…``, see the
        module's docstring); never a token.
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
    actor: str = "server"
    audit_id: str | None = None
    issuer: str | None = None
    resource: str | None = None

    @property
    def curable(self) -> bool:
        """A refusal for want of a grant, which a consent may cure (the server may ask next)."""
        return self.decision == "deny" and self.reason == "not_granted"

    def to_json(self) -> dict[str, Any]:
        """Return the record as a JSON-ready dict with camelCase keys.

        ``time`` is ISO 8601 UTC with milliseconds (``"2026-11-29T12:30:00.123Z"``).
        Every key is present (``cause`` only when known, ``actor`` only when it is
        not a server, ``auditId`` only when set); unknown values are ``None``.
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
        if self.actor != "server":
            out["actor"] = self.actor
        if self.audit_id is not None:
            out["auditId"] = self.audit_id
        if self.resource is not None:
            out["issuer"] = self.issuer
            out["resource"] = self.resource
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
    cause, audit_id
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
    audit_id: str | None = None

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
        line, written whole with one ``write`` (a line cut short by a full disk
        is taken back where no other writer appended after it). The file is
        opened in append mode and, when it is created, with mode ``0o600``. A
        failing write of a record is logged, never raised; :meth:`begin`
        raises.

    Raises
    ------
    ConfigError
        *capacity* is not a positive integer, or the file cannot be opened.

    Notes
    -----
    After :meth:`close` the log keeps recording in memory (late requests of a
    closing broker are still shown) but no longer writes to the file, and
    :meth:`begin` fails.
    """

    def __init__(self, *, capacity: int = 2000, path: str | os.PathLike[str] | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ConfigError(f"the audit capacity must be a positive integer, not {capacity!r}")
        self._lock = threading.Lock()
        self._ring: collections.deque[AuditRecord] = collections.deque(maxlen=capacity)
        self._totals: dict[str, _Totals] = {}
        self._listeners: Listeners[[AuditRecord]] = Listeners()
        self._fd: int | None = None
        self._write_failing = False
        self._path = os.fspath(path) if path is not None else None
        if self._path is not None:
            try:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise ConfigError(f"cannot open the audit file {self._path!r}: {exc.strerror}") from exc

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

    def begin(
        self, audit_id: str, *, time: float, server: str, connection_id: str, method: str, path: str | None
    ) -> None:
        """Announce a request in the file before it runs, and return once the line is on the disk.

        The line is ``{"phase": "intent", "auditId": audit_id, ...}`` (see the
        module's docstring); the request's record must carry the same
        *audit_id*. Nothing is added to the in-memory log.

        Parameters
        ----------
        audit_id
            A new id (:func:`new_audit_id`).
        time, server, connection_id, method, path
            As in :class:`AuditRecord`.

        Raises
        ------
        OSError
            There is no file, it is closed, or the line could not be written
            whole or flushed to the disk: the request must not run. The
            failure is logged as a failing record's is.
        """
        intent = {
            "phase": "intent",
            "auditId": audit_id,
            "time": iso_utc(time),
            "server": server,
            "connectionId": connection_id,
            "method": method,
            "path": path,
        }
        line = (json.dumps(intent, separators=(",", ":")) + "\n").encode()
        try:
            with self._lock:
                self._write_line(line)
                assert self._fd is not None
                # A descriptor of its own: the flush runs outside the lock (requests flush together),
                # and a close() meanwhile cannot hand this number to another file.
                fd = os.dup(self._fd)
            try:
                _flush_to_disk(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self._failed(exc)
            raise
        self._worked()

    def announce(self, note: AuditNote, *, server: str, connection_id: str) -> None:
        """:meth:`begin` for the request *note* describes, under a new id that its record will carry.

        Raises
        ------
        OSError
            As :meth:`begin`; *note* has its id all the same, so that the
            record of the refusal names it.
        """
        note.audit_id = new_audit_id()
        self.begin(
            note.audit_id,
            time=note.started,
            server=server,
            connection_id=connection_id,
            method=note.method,
            path=note.path,
        )

    def append(self, record: AuditRecord) -> None:
        """Add *record*: to the ring, the totals, the file, then tell the subscribers.

        Parameters
        ----------
        record
            The record to add.
        """
        with self._lock:
            self._ring.append(record)
            if record.actor == "server":
                self._count(record)
            if self._fd is not None:
                self._write(record)
        self._listeners.notify(record)

    def _count(self, record: AuditRecord) -> None:
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

    def _write(self, record: AuditRecord) -> None:
        try:
            self._write_line((json.dumps(record.to_json(), separators=(",", ":")) + "\n").encode())
        except OSError as exc:
            self._failed(exc)
        else:
            self._worked()

    def _failed(self, exc: OSError) -> None:
        # Log the first failure of a series in full, later ones quietly.
        if not self._write_failing:
            self._write_failing = True
            log.warning("cannot write to the audit file %s: %s", self._path, exc)
        else:
            log.debug("cannot write to the audit file %s: %s", self._path, exc)

    def _worked(self) -> None:
        if self._write_failing:
            self._write_failing = False
            log.warning("writing to the audit file %s works again", self._path)

    def _write_line(self, line: bytes) -> None:
        """Append *line* whole with one write, or raise (under the lock)."""
        fd = self._fd
        if fd is None:
            raise OSError(errno.EBADF, "no audit file is open")
        written = os.write(fd, line)
        if written != len(line):
            # Out of room mid-line (a full disk, a file size limit): take the fragment back
            # unless another writer of the file appended after it.
            end = os.lseek(fd, 0, os.SEEK_CUR)
            try:
                if os.fstat(fd).st_size == end:
                    os.ftruncate(fd, end - written)
            except OSError:
                pass
            raise OSError(errno.ENOSPC, f"an audit line was cut short ({written} of {len(line)} bytes)")

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
        """Per server, the totals over every record of its requests ever appended.

        Returns
        -------
        dict[str, dict[str, int]]
            ``{server: {"read": bytes, "written": bytes, "allowed": n, "denied": n}}``;
            read bytes come from ``files/read``, written bytes from
            ``files/write`` and ``files/create``. The records of the user's
            and the broker's own actions are not counted.
        """
        with self._lock:
            return {server: t.as_dict() for server, t in self._totals.items()}

    def close(self) -> None:
        """Close the file, if any. Idempotent; the in-memory log keeps working."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError as exc:
                log.warning("cannot close the audit file %s: %s", self._path, exc)


def new_audit_id() -> str:
    """A new id for :meth:`AuditLog.begin`: ``a_`` and 16 hex characters from a CSPRNG."""
    return "a_" + secrets.token_hex(8)


#: Flushes a file's data (and the size that reaches it) to the disk; macOS has no ``fdatasync``.
_flush_to_disk = getattr(os, "fdatasync", os.fsync)
