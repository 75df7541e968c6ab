"""The broker: one entry point that decides and performs every ``files/*`` request.

A :class:`Broker` owns the roots, grants, locks, watches, trash and audit log
of one notebook (or one CLI process). Each server connection gets a
:class:`Connection` from :meth:`Broker.connect`; a transport hands every
``files/*`` request of that server to :meth:`Connection.handle` (blocking; call
it off the event loop, or use :meth:`Connection.ahandle`) and sends back the
result or the :class:`~jupyter_fsbroker.core.errors.FilesError` it raises.

Every request is checked twice against the grants: once before anything on
disk is touched, and again once its locks are held, just before the I/O, so a
revocation also stops requests that were already queued.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import itertools
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import platformdirs

from . import ops
from .audit import AuditLog, AuditRecord
from .consent import ConsentDecision, Consenter, ConsentItem, ConsentRequest, DenyingConsenter
from .errors import (
    AlreadyExists,
    ClosedError,
    ConfigError,
    EncodingError,
    FileLocked,
    FilesError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    RateLimited,
    TooLarge,
    WrongType,
    from_os_error,
)
from .grants import OPERATIONS, Grant, GrantTable, normalize_operations
from .limits import Limits, RateLimiter
from .locks import Hold, LockManager
from .observers import Listeners
from .paths import Resolved, Target, parse, resolve
from .resource import Closeable
from .roots import Root, RootSet
from .sensitive import SensitiveNames
from .timestamps import iso_utc
from .trash import Trash, remove_tree
from .uploads import Upload, Uploads
from .watch import EVENTS, ChangeEvent, WatchManager

__all__ = ["Broker", "BrokerConfig", "Connection", "Transfer"]

log = logging.getLogger(__name__)
_connection_ids = itertools.count(1)
_MISSING: Any = object()


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of a :class:`Broker`; every field has a sane default.

    Attributes
    ----------
    limits
        Sizes, rates, timeouts.
    sensitive
        Names refused even inside a root unless explicitly allowed.
    permanent_delete
        Delete for good instead of moving to the trash.
    trash_dir, lock_dir
        Where deleted files and cross-process lock files go; both outside
        every root. Default: per-user folders from ``platformdirs``.
    audit_path
        Append audit records to this JSON Lines file.
    audit_capacity
        Records kept in memory for views.
    coalesce
        Seconds within which watch events on one path are merged.
    workers
        Threads that run requests for :meth:`Connection.ahandle`.
    advertise_read_only_roots
        List read-only roots in ``roots/list`` (marked ``_meta.readOnly``).
        Off by default: a server that reads the roots and opens files itself
        (the official filesystem server does) would get the operating
        system's access to them, writes included; ``files/*`` reaches them
        either way, under the same grants.
    """

    limits: Limits = field(default_factory=Limits)
    sensitive: SensitiveNames = field(default_factory=SensitiveNames)
    permanent_delete: bool = False
    trash_dir: str | None = None
    lock_dir: str | None = None
    audit_path: str | None = None
    audit_capacity: int = 2000
    coalesce: float = 0.05
    workers: int = 32
    advertise_read_only_roots: bool = False


@dataclass(frozen=True)
class Transfer:
    """Progress of a file moving in chunks, for views: one per chunk read or staged.

    Attributes
    ----------
    connection_id, server
        Who moves it.
    path
        The canonical root-relative path.
    direction
        ``"read"`` or ``"write"``.
    done
        Bytes moved so far (the end of this chunk).
    total
        The file's size for reads; ``None`` for writes (unknown until the last chunk).
    finished
        The last chunk: the read reached the end, or the upload was committed.
    """

    connection_id: str
    server: str
    path: str
    direction: str
    done: int
    total: int | None
    finished: bool
    time: float = field(default_factory=time.time)


def _default_lock_dir() -> str:
    # The per-user runtime folder when the session has one (it is cleared at logout, like
    # the locks); otherwise the per-user cache folder.
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return os.path.join(runtime, "jupyter_fsbroker", "locks")
    return str(platformdirs.user_cache_path("jupyter_fsbroker") / "locks")


class Broker(Closeable):
    """Roots, grants, locks, watches and audit of one notebook, and its server connections.

    Parameters
    ----------
    config
        Settings; see :class:`BrokerConfig`.

    Examples
    --------
    >>> with Broker() as broker:                                   # doctest: +SKIP
    ...     broker.add_root("~/data", name="data")
    ...     broker.allow("data/raw", ops=("read",))
    ...     conn = broker.connect("analysis")
    ...     conn.handle("files/read", {"path": "data/raw/sales.csv"})
    """

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.roots = RootSet()
        self.grants = GrantTable()
        self.locks = LockManager(
            self.config.lock_dir or _default_lock_dir(), wait=self.config.limits.lock_wait
        )
        self.watches = WatchManager(coalesce=self.config.coalesce)
        self.audit = AuditLog(capacity=self.config.audit_capacity, path=self.config.audit_path)
        trash_dir = self.config.trash_dir or str(platformdirs.user_data_path("jupyter_fsbroker") / "trash")
        self._trash_dir = trash_dir
        self._trash: Trash | None = None
        self._lock = threading.Lock()
        self._connections: dict[str, Connection] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self._stop = threading.Event()
        self._janitor = threading.Thread(target=self._tidy, name="fsbroker-janitor", daemon=True)
        self._janitor.start()
        self._changes: Listeners[[ChangeEvent, Connection]] = Listeners()
        self._connection_listeners: Listeners[[]] = Listeners()
        self._transfers: Listeners[[Transfer]] = Listeners()
        self.roots.subscribe(self._roots_changed)

    # -- roots and pre-approvals ---------------------------------------------------------------

    def add_root(
        self, path: str | os.PathLike[str], name: str | None = None, *, read_only: bool = False
    ) -> Root:
        """Offer the folder *path* to servers as root *name* (default: the folder's name).

        Raises
        ------
        ConfigError
            Missing folder, ``/``, the home directory itself, a name in use.
        """
        self._check_open()
        return self.roots.add(path, name, read_only=read_only)

    def remove_root(self, name: str) -> Root:
        """Withdraw a root; its grants, watches and staged uploads go with it."""
        root = self.roots.remove(name)
        self.grants.revoke_root(root)
        for conn in self.connections():
            conn._forget_root(root)
        return root

    def allow(
        self,
        path: str,
        ops: tuple[str, ...] | list[str] | str = ("read",),
        *,
        include_sensitive: bool = False,
        duration: float | None = None,
    ) -> Grant:
        """Pre-approve *path* for *ops* for every connection of this broker.

        Parameters
        ----------
        path
            Root-relative (``data/raw``), absolute, or a ``file://`` URI inside a root.
        ops
            Some of ``read``, ``write``, ``delete``, ``watch`` (a comma list or a sequence).
        include_sensitive
            Also allow sensitive names (``.env``, keys ...) below *path*.
        duration
            Seconds the pre-approval lasts; ``None``: until revoked.

        Raises
        ------
        ConfigError
            The path is outside every root, or an operation is unknown.
        """
        self._check_open()
        operations = normalize_operations(ops.split(",") if isinstance(ops, str) else ops)
        if not operations:
            raise ConfigError("name at least one operation")
        target = self._parse_for_user(path)
        return self.grants.add(
            None,
            target.root,
            target.parts,
            operations,
            expires_at=None if duration is None else time.time() + duration,
            source="preapproval",
            include_sensitive=include_sensitive,
        )

    def revoke(self, path: str | None = None, *, connection: Connection | None = None) -> tuple[Grant, ...]:
        """Revoke grants: of *connection* (or the pre-approvals), on *path* (or all of them)."""
        owner = None if connection is None else connection.id
        if path is None:
            return self.grants.revoke_where(lambda g: g.connection_id == owner)
        target = self._parse_for_user(path)
        return self.grants.revoke_path(owner, target.root, target.parts)

    def _parse_for_user(self, path: str) -> Target:
        try:
            return parse(path, self.roots)
        except FilesError as exc:
            raise ConfigError(f"{path!r} is not inside a root ({exc.reason})") from None

    # -- connections ---------------------------------------------------------------------------

    def connect(
        self,
        name: str,
        *,
        consenter: Consenter | None = None,
        notify: Callable[[ChangeEvent], None] | None = None,
    ) -> Connection:
        """Open the broker side of a server connection.

        Parameters
        ----------
        name
            The user's name for the connection (``analysis``): consent prompts,
            the audit log, and other servers' ``lockedBy`` show it.
        consenter
            Asks the user on ``files/consent``; default: refuse.
        notify
            Receives this connection's watch events (to send as
            ``notifications/files/changed``).
        """
        self._check_open()
        conn = Connection(self, name, consenter or DenyingConsenter(), notify)
        with self._lock:
            self._connections[conn.id] = conn
        self._connection_listeners.notify()
        return conn

    def connections(self) -> tuple[Connection, ...]:
        """The open connections."""
        with self._lock:
            return tuple(self._connections.values())

    def on_change(self, listener: Callable[[ChangeEvent, Connection], object]) -> Callable[[], None]:
        """Call *listener(event, connection)* for every watch event sent; returns an unsubscribe."""
        return self._changes.add(listener)

    def on_transfer(self, listener: Callable[[Transfer], object]) -> Callable[[], None]:
        """Call *listener(transfer)* after every chunk read or staged; returns an unsubscribe."""
        return self._transfers.add(listener)

    def on_connections(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call *listener()* when a connection opens or closes; returns an unsubscribe."""
        return self._connection_listeners.add(listener)

    def force_unlock(self, lock_id: str) -> None:
        """Release any lock held in this broker, whoever holds it (the user's override)."""
        self.locks.force_release(lock_id)

    @property
    def trash(self) -> Trash:
        """The trash deleted files go to (created on first use)."""
        with self._lock:
            if self._trash is None:
                self._trash = Trash(self._trash_dir)
            return self._trash

    def _forget_connection(self, conn: Connection) -> None:
        with self._lock:
            self._connections.pop(conn.id, None)
        self._connection_listeners.notify()

    def _roots_changed(self, generation: int) -> None:
        # Grants hold their root by identity; nothing to do but let views know.
        del generation

    # -- lifetime ------------------------------------------------------------------------------

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread pool that runs requests for :meth:`Connection.ahandle`."""
        with self._lock:
            self._check_open()
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self.config.workers, thread_name_prefix="fsbroker-io"
                )
            return self._executor

    def close(self) -> None:
        """Close every connection, stop watchers and threads, release locks. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for conn in self.connections():
            conn.close()
        self._stop.set()
        self._janitor.join()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self.watches.close()
        self.locks.close()
        self.roots.close()
        self.audit.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the broker is closed")

    def _tidy(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.grants.purge_expired()
                for conn in self.connections():
                    conn._discard_idle_uploads()
            except Exception:  # pragma: no cover - never let the janitor die
                log.exception("periodic clean-up failed")


# -- requests ----------------------------------------------------------------------------------


class _Params:
    """Typed access to a request's params; mistakes are -32602 with the field's name."""

    def __init__(self, raw: object) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams("params must be an object", reason="invalid_params")
        self.raw: dict[str, Any] = raw

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise InvalidParams(f"missing parameter {key!r}", reason="missing_param", param=key)
            return default
        # bool is an int in Python, never on the wire.
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise InvalidParams(f"parameter {key!r} has the wrong type", reason="wrong_param_type", param=key)
        return value

    def path(self, key: str = "path") -> str:
        return str(self.get(key, str))

    def flag(self, key: str, default: bool) -> bool:
        return bool(self.get(key, bool, default))

    def count(self, key: str, default: int | None, *, minimum: int = 0) -> int | None:
        value = self.get(key, int, default)
        if value is not None and value < minimum:
            raise InvalidParams(
                f"parameter {key!r} must be at least {minimum}", reason="bad_value", param=key
            )
        return value  # type: ignore[no-any-return]

    def strings(self, key: str, default: Any = _MISSING) -> list[str] | None:
        value = self.get(key, list, default)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise InvalidParams(
                f"parameter {key!r} must be a list of strings", reason="wrong_param_type", param=key
            )
        return value  # type: ignore[no-any-return]


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


@dataclass
class _Audit:
    """What one request's audit record will say; filled in as the request goes."""

    method: str
    started: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.perf_counter)
    path: str | None = None
    canonical: str | None = None
    root: str | None = None
    bytes: int = 0
    lock_id: str | None = None
    refused: str | None = None  # a refusal that is an answer, not an error (consent)

    def target(self, res: Resolved) -> None:
        self.canonical = res.rel
        self.root = res.root.name


class Connection(Closeable):
    """The broker side of one server connection: its grants, locks, watches and uploads.

    Created by :meth:`Broker.connect`. :meth:`close` is the kill switch: it
    ends every grant, lock, watch, staged upload and pending consent of the
    connection at once.
    """

    def __init__(
        self,
        broker: Broker,
        server: str,
        consenter: Consenter,
        notify: Callable[[ChangeEvent], None] | None,
    ) -> None:
        self.broker = broker
        self.server = server
        self.id = f"c{next(_connection_ids)}"
        self.consenter = consenter
        self.opened_at = time.time()
        self._notify = notify
        self._rate = RateLimiter(broker.config.limits)
        self._uploads = Uploads()
        self._pending_consents: set[concurrent.futures.Future[ConsentDecision]] = set()
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Connection {self.id} server={self.server!r} {state}>"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def limits(self) -> Limits:
        return self.broker.config.limits

    # -- entry points --------------------------------------------------------------------------

    def handle(self, method: str, params: object) -> dict[str, Any]:
        """Decide and perform one ``files/*`` request; return its result.

        Blocks while it does file I/O or waits for consent: call it off any
        event loop (see :meth:`ahandle`).

        Raises
        ------
        FilesError
            The answer to send as the JSON-RPC error (see ``to_jsonrpc_error``).
        """
        with self._request(method, params) as (handler, p, record):
            return handler(self, p, record)

    async def ahandle(self, method: str, params: object) -> dict[str, Any]:
        """:meth:`handle`, awaitable from any event loop.

        File I/O runs on the broker's worker threads; a consent is awaited on
        the loop itself, so prompts waiting for the user hold no thread.
        """
        loop = asyncio.get_running_loop()
        if method == "files/consent":
            with self._request(method, params) as (_, p, record):
                prepared = self._consent_request(p, record)
                if isinstance(prepared, dict):
                    return prepared
                request, targets = prepared
                decision = await self._aask(request)
                return await loop.run_in_executor(
                    self._executor(), self._consent_grant, request, targets, decision, record
                )
        return await loop.run_in_executor(self._executor(), self.handle, method, params)

    def _executor(self) -> concurrent.futures.Executor:
        try:
            return self.broker.executor()
        except ClosedError:
            raise PermissionDenied("the connection is closed", reason="connection_closed") from None

    @contextmanager
    def _request(self, method: str, params: object) -> Iterator[tuple[_Handler, _Params, _Audit]]:
        """Check one request's envelope, map what it raises to a FilesError, and audit it."""
        record = _Audit(method)
        error: FilesError | None = None
        try:
            handler = _HANDLERS.get(method)
            if handler is None:
                raise MethodNotFound(f"unknown method {method!r}", reason="unknown_method")
            p = _Params(params)
            raw_path = p.raw.get("path")
            record.path = raw_path if isinstance(raw_path, str) else None
            if self._closed:
                raise PermissionDenied("the connection is closed", reason="connection_closed")
            self._rate.take_op(path=record.path)
            yield handler, p, record
        except FilesError as exc:
            error = exc
            if record.path is not None and exc.path is None and not isinstance(exc, MethodNotFound):
                exc.path = record.path
            raise
        except OSError as exc:
            error = from_os_error(exc, record.path)
            raise error from None
        except Exception as exc:
            log.exception("unexpected error in %s for server %s", method, self.server)
            error = InternalError("the request failed unexpectedly", path=record.path)
            raise error from exc
        finally:
            self._record(record, error)

    def close(self) -> None:
        """End the connection: revoke its grants, release its locks, stop its watches,
        discard its staged uploads, deny its pending consents. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending_consents)
        for future in pending:
            future.cancel()
        self.broker.grants.revoke_connection(self.id)
        for upload in self._uploads.pop_all():
            self._drop_upload(upload)
        self.broker.watches.remove_owner(self.id)
        self.broker.locks.release_owner(self.id)
        self.broker._forget_connection(self)

    def revoke(self, path: str | None = None) -> tuple[Grant, ...]:
        """Revoke this connection's grants on *path* (or all of them)."""
        return self.broker.revoke(path, connection=self)

    def grants(self) -> tuple[Grant, ...]:
        """The live grants this connection can use (its own and the pre-approvals)."""
        return self.broker.grants.grants(self.id)

    # -- policy helpers ------------------------------------------------------------------------

    def _checker(self, operation: str) -> Callable[[Root, tuple[str, ...]], None]:
        broker = self.broker

        def check(root: Root, parts: tuple[str, ...]) -> None:
            if self._closed:
                raise PermissionDenied("the connection is closed", reason="connection_closed")
            if not broker.roots.is_current(root):
                raise PermissionDenied("the shared folder was removed", reason="root_removed")
            if operation in ("write", "delete") and root.read_only:
                raise PermissionDenied(f"the folder {root.name!r} is shared read-only", reason="read_only")
            sensitive = broker.config.sensitive.matches(parts)
            if broker.grants.find(self.id, root, parts, operation, sensitive=sensitive) is None:
                if sensitive:
                    raise PermissionDenied("sensitive files are not shared", reason="sensitive")
                raise PermissionDenied(f"no {operation} access has been granted here", reason="not_granted")

        return check

    def _resolve(
        self,
        raw: str,
        operation: str,
        record: _Audit | None = None,
        *,
        follow_last: bool = True,
        make_parents: bool = False,
    ) -> Resolved:
        target = parse(raw, self.broker.roots)
        if record is not None:
            record.root = target.root.name
        res = resolve(
            self.broker.roots,
            target,
            check=self._checker(operation),
            follow_last=follow_last,
            make_parents=make_parents,
            raw=raw,
        )
        if record is not None:
            record.target(res)
        return res

    def _recheck(self, res: Resolved, operation: str) -> None:
        """The last check, with the locks held, right before the I/O."""
        self._checker(operation)(res.root, res.parts)

    def _hold(self, res: Resolved, mode: Literal["shared", "exclusive"]) -> Hold:
        return self.broker.locks.hold(res.key, mode, owner=self.id, owner_label=self.server, path=res.rel)

    def _lock_arg(self, p: _Params) -> None:
        """An optional ``lockId``: the owner's own lock, or NOT_FOUND."""
        lock_id = p.get("lockId", str, None)
        if lock_id is not None and lock_id not in {
            info.lock_id for info in self.broker.locks.held() if info.owner == self.id
        }:
            raise NotFound("unknown lockId", reason="unknown_lock")

    # -- files/read ----------------------------------------------------------------------------

    def _read(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        encoding = p.get("encoding", str, "utf-8")
        offset = p.count("offset", 0) or 0
        length = p.count("length", self.limits.default_read_bytes)
        assert length is not None
        length = min(length, self.limits.max_chunk_bytes)
        keep = p.flag("keepLocked", False)
        self._lock_arg(p)
        with self._resolve(raw, "read", record) as res:
            if res.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            if res.is_root or stat.S_ISDIR(res.st.st_mode):
                raise WrongType(f"{raw} is a directory", reason="is_directory", path=raw)
            if offset > res.st.st_size:
                raise InvalidParams(
                    f"offset {offset} is past the end of {raw}",
                    reason="bad_offset",
                    path=raw,
                    size=res.st.st_size,
                )
            self._rate.take_bytes(min(length, res.st.st_size - offset), path=raw)
            with self._hold(res, "exclusive" if keep else "shared") as hold:
                self._recheck(res, "read")
                chunk = ops.read_chunk(res, offset=offset, length=length, encoding=encoding, shown=raw)
                lock_id = hold.keep() if keep else None
            record.bytes = chunk.bytes_read
            self._progress(res.rel, "read", chunk.offset + chunk.bytes_read, chunk.size, chunk.eof)
            record.lock_id = lock_id
            result: dict[str, Any] = {
                "content": chunk.content,
                "encoding": encoding,
                "size": chunk.size,
                "offset": chunk.offset,
                "bytesRead": chunk.bytes_read,
                "eof": chunk.eof,
                "mimeType": ops.mime_type(res.name or ""),
                "etag": chunk.etag,
            }
            if lock_id is not None:
                result["lockId"] = lock_id
            return result

    # -- files/write ---------------------------------------------------------------------------

    def _decode_content(self, p: _Params, raw: str, *, required: bool = True) -> bytes:
        content = p.get("content", str) if required else p.get("content", str, None)
        if content is None:
            return b""
        encoding = p.get("encoding", str, "utf-8")
        limit = self.limits.max_chunk_bytes
        # Refuse before decoding what cannot fit: every character is at least one
        # byte, and base64 carries 3 bytes in 4 characters.
        if len(content) > (4 * (limit // 3 + 1) if encoding == "base64" else limit):
            raise TooLarge(
                f"one request carries at most {limit} bytes; send chunks with offset",
                reason="request_too_large",
                path=raw,
                maxBytes=limit,
            )
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidParams("content is not valid base64", reason="bad_base64", path=raw) from None
        else:
            codec = ops.text_codec(encoding, raw)
            try:
                data = codec.encode(content, "strict")[0]
            except UnicodeEncodeError:
                raise EncodingError(
                    f"content cannot be encoded as {encoding}", reason="invalid_content", path=raw
                ) from None
        if len(data) > limit:
            raise TooLarge(
                f"one request carries at most {limit} bytes; send chunks with offset",
                reason="request_too_large",
                path=raw,
                maxBytes=limit,
            )
        return data

    def _write(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        data = self._decode_content(p, raw)
        create = p.flag("create", True)
        exclusive = p.flag("exclusive", False)
        if_match = p.get("ifMatch", str, None)
        offset = p.count("offset", None)
        final = p.flag("final", offset is None)
        keep = p.flag("keepLocked", False)
        self._lock_arg(p)
        self._rate.take_bytes(len(data), path=raw)
        record.bytes = len(data)
        if offset is not None:
            return self._write_chunk(raw, data, offset, final, create, exclusive, if_match, keep, record)
        with self._resolve(raw, "write", record) as res:
            self._check_writable_target(res, raw, create=create, exclusive=exclusive)
            with self._hold(res, "exclusive") as hold:
                self._recheck(res, "write")
                res.refresh()
                self._check_preconditions(res, raw, create=create, exclusive=exclusive, if_match=if_match)
                st = ops.write_atomic(res, data, exclusive=exclusive, shown=raw)
                lock_id = hold.keep() if keep else None
        record.lock_id = lock_id
        result: dict[str, Any] = {"bytesWritten": len(data), "size": st.st_size, "etag": ops.etag(st)}
        if lock_id is not None:
            result["lockId"] = lock_id
        return result

    @staticmethod
    def _check_writable_target(res: Resolved, raw: str, *, create: bool, exclusive: bool) -> None:
        if res.is_root or (res.st is not None and stat.S_ISDIR(res.st.st_mode)):
            raise WrongType(f"{raw} is a directory", reason="is_directory", path=raw)
        if res.st is None and not create:
            raise NotFound(f"{raw} does not exist", path=raw)
        if res.st is not None and exclusive:
            raise AlreadyExists(f"{raw} exists already", path=raw)

    def _check_preconditions(
        self, res: Resolved, raw: str, *, create: bool, exclusive: bool, if_match: str | None
    ) -> None:
        self._check_writable_target(res, raw, create=create, exclusive=exclusive)
        if if_match is not None and (res.st is None or ops.etag(res.st) != if_match):
            raise PreconditionFailed(f"{raw} changed since it was read", reason="etag_mismatch", path=raw)

    def _write_chunk(
        self,
        raw: str,
        data: bytes,
        offset: int,
        final: bool,
        create: bool,
        exclusive: bool,
        if_match: str | None,
        keep: bool,
        record: _Audit,
    ) -> dict[str, Any]:
        try:
            res = self._resolve(raw, "write", record)
        except PermissionDenied:
            # A revoked grant ends the upload: nothing staged is kept.
            self._abandon_upload_for(raw)
            raise
        with res:
            upload = self._uploads.get(res.key)
            if offset == 0:
                if upload is not None:
                    self._drop_upload(self._uploads.pop(res.key) or upload)
                upload = self._start_upload(res, raw, create=create, exclusive=exclusive, if_match=if_match)
            elif upload is None or offset != upload.size:
                expected = 0 if upload is None else upload.size
                raise InvalidParams(
                    f"chunk at offset {offset} does not follow the staged {expected} bytes",
                    reason="bad_offset",
                    path=raw,
                    expectedOffset=expected,
                )
            upload.append(data)
            self._progress(res.rel, "write", upload.size, None, False)
            if not final:
                # Nothing is committed yet: the target, and so its etag, is as it was.
                return {
                    "bytesWritten": len(data),
                    "size": upload.size,
                    "etag": "" if res.st is None else ops.etag(res.st),
                    "staged": True,
                }
            self._uploads.pop(res.key)
            result = self._commit_upload(res, upload, raw, len(data), keep, record)
            self._progress(res.rel, "write", upload.size, upload.size, True)
            return result

    def _start_upload(
        self, res: Resolved, raw: str, *, create: bool, exclusive: bool, if_match: str | None
    ) -> Upload:
        if len(self._uploads) >= self.limits.max_uploads:
            raise RateLimited(
                f"at most {self.limits.max_uploads} uploads at once",
                reason="too_many_uploads",
                path=raw,
                retryAfterMs=1000,
            )
        self._check_writable_target(res, raw, create=create, exclusive=exclusive)
        assert res.name is not None
        with self._hold(res, "exclusive") as hold:
            self._recheck(res, "write")
            res.refresh()
            self._check_preconditions(res, raw, create=create, exclusive=exclusive, if_match=if_match)
            lock_id = hold.keep()
        dir_fd = os.dup(res.dir_fd)
        try:
            temp, fd = ops.new_temp(dir_fd)
        except BaseException:
            os.close(dir_fd)
            self.broker.locks.release(lock_id, owner=self.id)
            raise
        upload = Upload(
            key=res.key,
            rel=res.rel,
            name=res.name,
            dir_fd=dir_fd,
            temp=temp,
            fd=fd,
            lock_id=lock_id,
            exclusive=exclusive,
            if_match=if_match,
        )
        self._uploads.put(upload)
        return upload

    def _commit_upload(
        self, res: Resolved, upload: Upload, raw: str, chunk: int, keep: bool, record: _Audit
    ) -> dict[str, Any]:
        try:
            try:
                self._recheck(res, "write")
                previous = res.refresh()
                if upload.exclusive and previous is not None:
                    raise AlreadyExists(f"{raw} exists already", path=raw)
                if upload.if_match is not None and (
                    previous is None or ops.etag(previous) != upload.if_match
                ):
                    raise PreconditionFailed(
                        f"{raw} changed since it was read", reason="etag_mismatch", path=raw
                    )
            except BaseException:
                upload.discard()
                raise
            dir_fd, fd = upload.detach()
            try:
                # commit_temp closes fd and removes the temporary file if it fails.
                st = ops.commit_temp(
                    dir_fd,
                    upload.temp,
                    fd,
                    upload.name,
                    previous=previous,
                    exclusive=upload.exclusive,
                    shown=raw,
                )
            finally:
                os.close(dir_fd)
        except BaseException:
            with suppress(NotFound):  # already gone if the connection closed meanwhile
                self.broker.locks.release(upload.lock_id, owner=self.id)
            raise
        result: dict[str, Any] = {"bytesWritten": chunk, "size": st.st_size, "etag": ops.etag(st)}
        if keep:
            record.lock_id = upload.lock_id
            result["lockId"] = upload.lock_id
        else:
            self.broker.locks.release(upload.lock_id, owner=self.id)
        return result

    def _progress(self, path: str, direction: str, done: int, total: int | None, finished: bool) -> None:
        self.broker._transfers.notify(Transfer(self.id, self.server, path, direction, done, total, finished))

    def _drop_upload(self, upload: Upload) -> None:
        try:
            upload.discard()
        finally:
            with suppress(NotFound):
                self.broker.locks.release(upload.lock_id, owner=self.id)

    def _abandon_upload_for(self, raw: str) -> None:
        try:
            target = parse(raw, self.broker.roots)
        except FilesError:
            return
        key = "/".join((target.root.path, *target.parts)) if target.parts else target.root.path
        upload = self._uploads.pop(key)
        if upload is not None:
            self._drop_upload(upload)

    def _discard_idle_uploads(self) -> None:
        for upload in self._uploads.pop_idle(self.limits.upload_idle_timeout):
            self._drop_upload(upload)

    def _forget_root(self, root: Root) -> None:
        for upload in self._uploads.pop_all():
            if upload.key == root.path or upload.key.startswith(root.path + "/"):
                self._drop_upload(upload)
            else:
                self._uploads.put(upload)
        for info in self.broker.watches.watches():
            if info.owner == self.id and info.path.split("/", 1)[0] == root.name:
                self.broker.watches.remove(info.watch_id, owner=self.id)

    # -- files/list, files/stat ----------------------------------------------------------------

    def _list(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        recursive = p.flag("recursive", False)
        include_hidden = p.flag("includeHidden", False)
        limit = p.count("maxEntries", self.limits.max_list_entries, minimum=1)
        assert limit is not None
        limit = min(limit, self.limits.max_list_entries)
        cursor = p.get("cursor", str, None)
        with self._resolve(raw, "read", record) as res:
            if res.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            if not stat.S_ISDIR(res.st.st_mode):
                raise WrongType(f"{raw} is not a directory", reason="not_a_directory", path=raw)
            after = _decode_cursor(cursor, res.rel, recursive, raw) if cursor else None
            sensitive = self.broker.config.sensitive
            grants = self.broker.grants
            root = res.root

            def accept(parts: tuple[str, ...]) -> bool:
                return not sensitive.matches(parts) or (
                    grants.find(self.id, root, parts, "read", sensitive=True) is not None
                )

            self._recheck(res, "read")
            entries, last = ops.list_entries(
                res,
                recursive=recursive,
                include_hidden=include_hidden,
                limit=limit,
                after=after,
                accept=accept,
                shown=raw,
            )
            result: dict[str, Any] = {"entries": entries}
            if last is not None:
                result["nextCursor"] = _encode_cursor(res.rel, recursive, last)
            return result

    def _stat(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        with self._resolve(raw, "read", record) as res:
            if res.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            info = ops.stat_info(res)
            info["locked"] = self.broker.locks.is_locked(res.key)
            return info

    # -- files/create, files/delete, files/rename ----------------------------------------------

    def _create(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        kind = p.get("type", str)
        if kind not in ("file", "directory"):
            raise InvalidParams(
                "type must be 'file' or 'directory'", reason="bad_value", param="type", path=raw
            )
        data = self._decode_content(p, raw, required=False)
        if kind == "directory" and data:
            raise InvalidParams("a directory has no content", reason="bad_value", param="content", path=raw)
        parents = p.flag("parents", False)
        keep = p.flag("keepLocked", False)
        with self._resolve(raw, "write", record, follow_last=False, make_parents=parents) as res:
            if res.is_root or res.st is not None:
                raise AlreadyExists(f"{raw} exists already", path=raw)
            with self._hold(res, "exclusive") as hold:
                self._recheck(res, "write")
                if res.refresh(allow_link=True) is not None:
                    raise AlreadyExists(f"{raw} exists already", path=raw)
                if kind == "directory":
                    ops.make_directory(res, raw)
                else:
                    ops.write_atomic(res, data, exclusive=True, shown=raw)
                lock_id = hold.keep() if keep else None
            record.bytes = len(data)
            record.lock_id = lock_id
            result: dict[str, Any] = {"path": res.rel, "type": kind}
            if lock_id is not None:
                result["lockId"] = lock_id
            return result

    def _delete(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        recursive = p.flag("recursive", False)
        if_match = p.get("ifMatch", str, None)
        with self._resolve(raw, "delete", record, follow_last=False) as res:
            if res.is_root:
                raise PermissionDenied(
                    "a shared folder itself cannot be deleted", reason="root_itself", path=raw
                )
            if res.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            with self._hold(res, "exclusive"):
                self._recheck(res, "delete")
                st = res.refresh(allow_link=True)
                if st is None:
                    raise NotFound(f"{raw} does not exist", path=raw)
                is_dir = stat.S_ISDIR(st.st_mode)
                if is_dir and not recursive:
                    raise WrongType(f"{raw} is a directory: pass recursive", reason="is_directory", path=raw)
                if is_dir:
                    self._check_no_locks_below(res, raw)
                if if_match is not None and ops.etag(st) != if_match:
                    raise PreconditionFailed(
                        f"{raw} changed since it was read", reason="etag_mismatch", path=raw
                    )
                assert res.name is not None
                if self.broker.config.permanent_delete:
                    remove_tree(res.dir_fd, res.name)
                    trashed = False
                else:
                    self.broker.trash.move_in(
                        res.dir_fd, res.name, origin=res.key, display=res.rel, server=self.server
                    )
                    trashed = True
            return {"path": res.rel, "trashed": trashed}

    def _check_no_locks_below(self, res: Resolved, raw: str) -> None:
        holder = self.broker.locks.conflicts_below(res.key, owner=self.id)
        if holder is not None:
            raise FileLocked(
                f"a file below {raw} is locked",
                reason="locked_below",
                path=raw,
                lockedBy=holder.owner_label,
                retryAfterMs=1000,
            )

    def _rename(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        raw_new = p.path("newPath")
        overwrite = p.flag("overwrite", False)
        if_match = p.get("ifMatch", str, None)
        with ExitStack() as stack:
            src = stack.enter_context(self._resolve(raw, "write", record, follow_last=False))
            dst = stack.enter_context(self._resolve(raw_new, "write", None, follow_last=False))
            if src.is_root or dst.is_root:
                raise PermissionDenied(
                    "a shared folder itself cannot be renamed", reason="root_itself", path=raw
                )
            if src.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            if src.key == dst.key:
                return {"path": dst.rel}
            if dst.st is not None and not overwrite:
                raise AlreadyExists(f"{raw_new} exists already", path=raw_new)
            first, second = sorted((src, dst), key=lambda r: r.key)
            stack.enter_context(self._hold(first, "exclusive"))
            stack.enter_context(self._hold(second, "exclusive"))
            self._recheck(src, "write")
            self._recheck(dst, "write")
            st = src.refresh(allow_link=True)
            if st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            dst.refresh(allow_link=True)
            if stat.S_ISDIR(st.st_mode):
                self._check_no_locks_below(src, raw)
            if if_match is not None and ops.etag(st) != if_match:
                raise PreconditionFailed(f"{raw} changed since it was read", reason="etag_mismatch", path=raw)
            ops.rename(src, dst, overwrite=overwrite, shown=raw_new)
            return {"path": dst.rel}

    # -- files/watch, files/unwatch, files/unlock ----------------------------------------------

    def _watch(self, p: _Params, record: _Audit) -> dict[str, Any]:
        raw = p.path()
        recursive = p.flag("recursive", False)
        wanted = p.strings("events", None)
        events = frozenset(EVENTS if wanted is None else wanted)
        if not events or not events <= EVENTS:
            raise InvalidParams(
                f"events must be some of {', '.join(sorted(EVENTS))}",
                reason="bad_value",
                param="events",
                path=raw,
            )
        if self.broker.watches.count(self.id) >= self.limits.max_watches:
            raise RateLimited(
                f"at most {self.limits.max_watches} watches at once",
                reason="too_many_watches",
                path=raw,
                retryAfterMs=1000,
            )
        with self._resolve(raw, "watch", record) as res:
            if res.st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            self._recheck(res, "watch")
            watch_id = self.broker.watches.add(
                owner=self.id,
                root=res.root,
                parts=res.parts,
                is_dir=stat.S_ISDIR(res.st.st_mode),
                recursive=recursive,
                events=events,
                sink=self._deliver,
                accept=self._may_see,
            )
        return {"watchId": watch_id}

    def _may_see(self, root: Root, parts: tuple[str, ...]) -> bool:
        if self._closed or not parts or ops.is_temp_name(parts[-1]):
            return False
        try:
            self._checker("watch")(root, parts)
        except PermissionDenied:
            return False
        return True

    def _deliver(self, event: ChangeEvent) -> None:
        if self._closed:
            return
        if self._notify is not None:
            self._notify(event)
        self.broker._changes.notify(event, self)

    def _unwatch(self, p: _Params, record: _Audit) -> dict[str, Any]:
        watch_id = p.get("watchId", str)
        self.broker.watches.remove(watch_id, owner=self.id)
        return {}

    def _unlock(self, p: _Params, record: _Audit) -> dict[str, Any]:
        lock_id = p.get("lockId", str)
        record.lock_id = lock_id
        self.broker.locks.release(lock_id, owner=self.id)
        return {"unlocked": True}

    # -- files/consent -------------------------------------------------------------------------

    def _consent(self, p: _Params, record: _Audit) -> dict[str, Any]:
        prepared = self._consent_request(p, record)
        if isinstance(prepared, dict):
            return prepared
        request, targets = prepared
        return self._consent_grant(request, targets, self._ask(request), record)

    def _consent_request(
        self, p: _Params, record: _Audit
    ) -> tuple[ConsentRequest, dict[str, Target]] | dict[str, Any]:
        """Check a consent request and build what the user sees; a refusal when nothing is approvable."""
        message = p.get("message", str, "")
        requested = p.strings("requestedPaths")
        assert requested is not None
        if not requested:
            raise InvalidParams("requestedPaths is empty", reason="bad_value", param="requestedPaths")
        wanted = p.strings("operations", None)
        try:
            operations = normalize_operations(OPERATIONS if wanted is None else wanted)
        except ConfigError as exc:
            raise InvalidParams(str(exc), reason="bad_value", param="operations") from None
        if not operations:
            raise InvalidParams("operations is empty", reason="bad_value", param="operations")
        record.path = requested[0]
        items, targets = self._consent_items(list(dict.fromkeys(requested)))
        request = ConsentRequest(
            server=self.server,
            connection_id=self.id,
            message=message,
            items=tuple(items),
            operations=operations,
            timeout=self.limits.consent_timeout,
        )
        if not request.approvable_paths:
            record.refused = "nothing_approvable"
            return _refusal()
        return request, targets

    def _consent_grant(
        self, request: ConsentRequest, targets: dict[str, Target], decision: ConsentDecision, record: _Audit
    ) -> dict[str, Any]:
        """Turn the user's decision, narrowed to what was asked, into grants and the result."""
        approved = [path for path in decision.approved_paths if path in targets]
        ops_ok = [op for op in request.operations if op in decision.operations]
        if not approved or not ops_ok or self._closed:
            record.refused = "consent_refused"
            return _refusal()
        expires = None if decision.duration is None else time.time() + decision.duration
        for path in approved:
            target = targets[path]
            granted_ops = [op for op in ops_ok if not (target.root.read_only and op in ("write", "delete"))]
            for parts in self._grant_spellings(target):
                self.broker.grants.add(
                    self.id,
                    target.root,
                    parts,
                    granted_ops,
                    expires_at=expires,
                    source="consent",
                    server=self.server,
                )
        result: dict[str, Any] = {
            "granted": True,
            "approvedPaths": [targets[path].rel for path in approved],
            "operations": ops_ok,
        }
        if expires is not None:
            result["expiresAt"] = iso_utc(expires)
        return result

    def _consent_items(self, requested: list[str]) -> tuple[list[ConsentItem], dict[str, Target]]:
        items: list[ConsentItem] = []
        targets: dict[str, Target] = {}
        sensitive = self.broker.config.sensitive
        for path in requested:
            try:
                target = parse(path, self.broker.roots)
            except FilesError as exc:
                items.append(ConsentItem(path, None, False, exc.reason))
                continue
            if sensitive.matches(target.parts):
                items.append(ConsentItem(path, target.rel, False, "sensitive", target.root.read_only))
                continue
            items.append(ConsentItem(path, target.rel, True, None, target.root.read_only))
            targets[path] = target
        return items, targets

    def _grant_spellings(self, target: Target) -> list[tuple[str, ...]]:
        """The approved path as written, and its canonical form when a symlink leads elsewhere in the root."""
        spellings = [target.parts]
        try:
            with resolve(self.broker.roots, target, check=lambda root, parts: None) as res:
                if res.root.id == target.root.id and res.parts != target.parts:
                    spellings.append(res.parts)
        except (FilesError, OSError):
            pass
        return spellings

    def _ask(self, request: ConsentRequest) -> ConsentDecision:
        """Ask the consenter and wait (blocking) for the answer; deny on timeout or close."""
        future = self._submit_consent(request)
        if future is None:
            return ConsentDecision.deny()
        try:
            return future.result(timeout=request.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ConsentDecision.deny()
        except concurrent.futures.CancelledError:
            return ConsentDecision.deny()
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny()
        finally:
            self._forget_consent(future)

    async def _aask(self, request: ConsentRequest) -> ConsentDecision:
        """:meth:`_ask` awaited on the event loop, holding no thread while the user thinks."""
        future = self._submit_consent(request)
        if future is None:
            return ConsentDecision.deny()
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), request.timeout)
        except TimeoutError:
            return ConsentDecision.deny()  # wait_for cancelled the future: the prompt withdraws
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the request itself was cancelled (server cancelled, connection closing)
            return ConsentDecision.deny()  # the consent was withdrawn (connection closed)
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny()
        finally:
            future.cancel()
            self._forget_consent(future)

    def _submit_consent(self, request: ConsentRequest) -> concurrent.futures.Future[ConsentDecision] | None:
        try:
            future = self.consenter.request_consent(request)
        except Exception:
            log.exception("the consenter failed; denying")
            return None
        with self._lock:
            if self._closed:
                future.cancel()
                return None
            self._pending_consents.add(future)
        return future

    def _forget_consent(self, future: concurrent.futures.Future[ConsentDecision]) -> None:
        with self._lock:
            self._pending_consents.discard(future)

    # -- audit ---------------------------------------------------------------------------------

    def _record(self, record: _Audit, error: FilesError | None) -> None:
        try:
            self.broker.audit.append(
                AuditRecord(
                    time=record.started,
                    server=self.server,
                    connection_id=self.id,
                    method=record.method,
                    path=record.path,
                    canonical=record.canonical,
                    root=record.root,
                    decision="deny"
                    if record.refused is not None or isinstance(error, _POLICY_REFUSALS)
                    else "allow",
                    error=None if error is None else _error_name(error),
                    reason=record.refused if error is None else error.reason,
                    bytes=record.bytes if error is None else 0,
                    duration_ms=(time.perf_counter() - record.clock) * 1000.0,
                    lock_id=record.lock_id,
                )
            )
        except Exception:  # pragma: no cover - the audit never breaks a request
            log.exception("could not record an audit entry")


def _refusal() -> dict[str, Any]:
    """The answer to a consent that was refused, timed out or withdrawn: not an error."""
    return {"granted": False, "approvedPaths": [], "operations": []}


#: Errors that are the broker's policy saying no; other errors happen to allowed requests.
_POLICY_REFUSALS = (PermissionDenied, RateLimited, TooLarge)


def _error_name(error: FilesError) -> str:
    if error.name is not None:
        return error.name
    return {-32602: "INVALID_PARAMS", -32601: "METHOD_NOT_FOUND"}.get(error.code, "INTERNAL_ERROR")


def _encode_cursor(listed: str, recursive: bool, last: tuple[str, ...]) -> str:
    payload = json.dumps({"p": listed, "r": recursive, "a": list(last)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str, listed: str, recursive: bool, raw: str) -> tuple[str, ...]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        after = tuple(payload["a"])
        ok = payload["p"] == listed and payload["r"] == recursive and all(isinstance(a, str) for a in after)
    except (ValueError, KeyError, TypeError, UnicodeError):
        ok = False
    if not ok:
        raise InvalidParams("the cursor does not belong to this listing", reason="bad_cursor", path=raw)
    return after


_Handler = Callable[[Connection, _Params, _Audit], dict[str, Any]]
_HANDLERS: dict[str, _Handler] = {
    "files/read": Connection._read,
    "files/write": Connection._write,
    "files/list": Connection._list,
    "files/stat": Connection._stat,
    "files/create": Connection._create,
    "files/delete": Connection._delete,
    "files/rename": Connection._rename,
    "files/watch": Connection._watch,
    "files/unwatch": Connection._unwatch,
    "files/unlock": Connection._unlock,
    "files/consent": Connection._consent,
}
