"""The broker: one entry point that decides and performs every ``files/*`` request.

A :class:`Broker` owns the roots, grants, locks, watches, trash and audit log
of one notebook (or one CLI process). Each server connection gets a
:class:`~jupyter_fsbroker.core.connection.Connection` from :meth:`Broker.connect`;
a transport hands every ``files/*`` request of that server to
:meth:`Connection.handle <jupyter_fsbroker.core.connection.Connection.handle>`
(blocking; call it off the event loop, or use ``Connection.ahandle``) and
sends back the result or the :class:`~jupyter_fsbroker.core.errors.FilesError`
it raises.

This module is also the request dispatch: it looks up the method's handler
(:mod:`jupyter_fsbroker.core.handlers`), reads the params, applies the
connection's operation rate, maps whatever the handler raises to a
``FilesError``, and writes one audit record per request (announced in the
audit file before the handler runs when the audit is required: a request
whose announcement cannot be written is refused, PERMISSION_DENIED
``audit_unavailable``). It refuses params
holding a lone surrogate (-32602: only a name that is not valid UTF-8 has one,
and none is ever created or echoed), and checks that JSON can carry every
answer before it leaves (:mod:`jupyter_fsbroker.core.names`). The handlers check
every request twice against the grants: once before anything on disk is
touched, and again once its locks are held, just before the I/O, so a
revocation also stops requests that were already queued.

Settings that change while the broker runs go through :meth:`Broker.configure`.
No request is ever answered without its audit record, and no record holds
file content.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .audit import AuditLog, AuditNote, AuditRecord
from .config import BrokerConfig, default_lock_dir, default_trash_dir
from .connection import Connection
from .consent import Consenter, DenyingConsenter
from .errors import (
    ClosedError,
    ConfigError,
    FilesError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    PermissionDenied,
    RateLimited,
    TooLarge,
    from_os_error,
)
from .grants import Grant, GrantTable, normalize_operations
from .handlers import (
    consent,
    create,
    delete,
    list_directory,
    read,
    rename_path,
    stat_path,
    unlock,
    unwatch,
    watch,
    write,
)
from .hop import off_loop
from .listeners import Listeners
from .locks import LockManager
from .names import find_surrogate, readable
from .params import Params
from .paths import parse
from .pool import RequestPool
from .resource import Closeable
from .rootpath import RootPath
from .roots import Root, RootSet
from .tempfiles import TempFiles
from .transfers import Transfer
from .trashcan import TrashCan
from .watch import ChangeEvent, WatchManager

__all__ = ["Broker"]

log = logging.getLogger(__name__)

#: Released lock files kept open for their connection's next lock of the same key (until it
#: closes): creating and removing one per operation costs more than a small read.
_IDLE_LOCK_FILES = 64

#: Seconds between two checks of the trash's retention while a broker runs (besides every delete).
_RETENTION_EVERY = 60

#: Settings a running broker keeps: they name folders and files it opened, or sized its pools.
_FIXED_SETTINGS = (
    "trash_dir",
    "lock_dir",
    "audit_path",
    "audit_required",
    "audit_capacity",
    "workers",
    "advertise_roots",
    "advertise_read_only_roots",
)


class Broker(Closeable):
    """Roots, grants, locks, watches and audit of one notebook, and its server connections.

    Parameters
    ----------
    config
        Settings; see :class:`~jupyter_fsbroker.core.config.BrokerConfig`.

    Examples
    --------
    >>> with Broker() as broker:                                   # doctest: +SKIP
    ...     broker.add_root("~/data", name="data")
    ...     broker.allow("data/raw", ops=("read",))
    ...     conn = broker.connect("analysis")
    ...     conn.handle("files/read", {"path": "data/raw/sales.csv"})
    """

    def __init__(self, config: BrokerConfig | None = None) -> None:
        config = config or BrokerConfig()
        self._config = config
        self.roots = RootSet()
        self.grants = GrantTable()
        self.locks = LockManager(
            config.lock_dir or default_lock_dir(), wait=config.limits.lock_wait, idle_files=_IDLE_LOCK_FILES
        )
        self.watches = WatchManager(coalesce=config.coalesce)
        self.audit = AuditLog(capacity=config.audit_capacity, path=config.audit_path)
        self.temp_files = TempFiles(config.stale_temp_age)
        self.trash = TrashCan(
            config.trash_dir or default_trash_dir(), audit=self.audit, config=lambda: self._config
        )
        self._lock = threading.Lock()
        self._configuring = threading.Lock()
        self._connections: dict[str, Connection] = {}
        self._executor: RequestPool | None = None
        self._closed = False
        self._changes: Listeners[[ChangeEvent, Connection]] = Listeners()
        self._connection_listeners: Listeners[[]] = Listeners()
        self._transfers: Listeners[[Transfer]] = Listeners()
        self._stop = threading.Event()
        self._janitor = threading.Thread(target=self._tidy, name="fsbroker-janitor", daemon=True)
        self._janitor.start()

    # -- settings --------------------------------------------------------------------------------

    @property
    def config(self) -> BrokerConfig:
        """The settings in force; change them with :meth:`configure`."""
        return self._config

    def configure(self, **changes: Any) -> BrokerConfig:
        """Change settings while the broker runs; every part that reads them follows at once.

        The lock wait applies to every lock taken afterwards, the rates to the
        next request of every connection (open ones included), the sizes,
        counts and timeouts to every request that starts afterwards, the
        delete policy, the trash's retention and the sensitive names to the
        next operation, the coalescing window to the next burst of watch
        events, the age of stale temporary files to the next sweep.

        Parameters
        ----------
        **changes
            ``limits`` (a :class:`~jupyter_fsbroker.core.limits.Limits`),
            ``permanent_delete``, ``trash_max_age``, ``trash_max_bytes``,
            ``sensitive``, ``coalesce``, ``stale_temp_age``, and any
            :class:`~jupyter_fsbroker.core.limits.Limits` field by name
            (``lock_wait=0.5``, ``ops_per_second=100``), applied on top of
            ``limits``.

        Returns
        -------
        BrokerConfig
            The settings now in force.

        Raises
        ------
        ConfigError
            An unknown name, an invalid value, or a setting a running broker
            keeps (folders, the audit file, whether it is required, its
            capacity, the worker count).
            Nothing changes then.
        ClosedError
            The broker is closed.

        Examples
        --------
        >>> broker.configure(lock_wait=0, permanent_delete=True)    # doctest: +SKIP
        """
        with self._configuring:
            self._check_open()
            old = self._config
            new = old.replace(**changes)
            fixed = [name for name in _FIXED_SETTINGS if getattr(new, name) != getattr(old, name)]
            if fixed:
                raise ConfigError(
                    f"{', '.join(fixed)} cannot change while the broker runs; create a new broker instead"
                )
            self.locks.wait = new.limits.lock_wait
            self.watches.coalesce = new.coalesce
            self.temp_files.stale_age = new.stale_temp_age
            with self._lock:
                self._config = new
                connections = tuple(self._connections.values())
            for conn in connections:
                conn.rate.update(new.limits)
            return new

    # -- roots and pre-approvals -----------------------------------------------------------------

    def add_root(
        self, path: str | os.PathLike[str], name: str | None = None, *, read_only: bool = False
    ) -> Root:
        """Offer the folder *path* to servers as root *name* (default: the folder's name).

        The temporary files that writers which died left in the root's own
        folder are removed (see :mod:`~jupyter_fsbroker.core.tempfiles`);
        deeper folders are swept when they are next written.

        Raises
        ------
        ConfigError
            Missing folder, ``/``, the home directory itself, a name in use.
        """
        self._check_open()
        root = self.roots.add(path, name, read_only=read_only)
        if not read_only:
            self._sweep_root(root)
        return root

    def _sweep_root(self, root: Root) -> None:
        try:
            fd = self.roots.open_fd(root)
        except KeyError:  # removed meanwhile
            return
        try:
            self.temp_files.sweep(fd)
        finally:
            os.close(fd)

    def remove_root(self, name: str) -> Root:
        """Withdraw a root; its grants, watches and staged uploads go with it."""
        root = self.roots.remove(name)
        self.grants.revoke_root(root)
        for conn in self.connections():
            conn.uploads.discard_root(root)
        self.watches.remove_root(root)
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
        return self.grants.add(
            None,
            self._parse_for_user(path),
            operations,
            expires_at=None if duration is None else time.time() + duration,
            source="preapproval",
            include_sensitive=include_sensitive,
        )

    def revoke(
        self,
        path: str | None = None,
        *,
        connection: Connection | None = None,
        operations: tuple[str, ...] | list[str] | None = None,
    ) -> tuple[Grant, ...]:
        """Revoke grants: of *connection* (or the pre-approvals), on *path* (or all of them).

        With *operations*, only those are taken away; a grant left with none goes.

        Returns
        -------
        tuple of Grant
            The grants touched, as they were before.
        """
        owner = None if connection is None else connection.id
        if path is None:
            return self.grants.revoke_where(lambda g: g.connection_id == owner, operations=operations)
        return self.grants.revoke_path(owner, self._parse_for_user(path), operations)

    def _parse_for_user(self, path: str) -> RootPath:
        try:
            return parse(path, self.roots)
        except FilesError as exc:
            raise ConfigError(f"{path!r} is not inside a root ({exc.reason})") from None

    # -- connections -----------------------------------------------------------------------------

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
        with self._lock:
            self._check_open()
            # Made under the lock, so that configure() never misses a connection's rates.
            conn = Connection(self, name, consenter or DenyingConsenter(), notify)
            self._connections[conn.id] = conn
        self._connection_listeners.notify()
        return conn

    def connections(self) -> tuple[Connection, ...]:
        """The open connections."""
        with self._lock:
            return tuple(self._connections.values())

    def connection_closed(self, connection: Connection) -> None:
        """Forget *connection*; called by :meth:`Connection.close` once it has let go of everything."""
        with self._lock:
            self._connections.pop(connection.id, None)
        self._connection_listeners.notify()

    def on_change(self, listener: Callable[[ChangeEvent, Connection], object]) -> Callable[[], None]:
        """Call *listener(event, connection)* for every watch event sent; returns an unsubscribe."""
        return self._changes.add(listener)

    def on_transfer(self, listener: Callable[[Transfer], object]) -> Callable[[], None]:
        """Call *listener(transfer)* after every chunk read or staged; returns an unsubscribe."""
        return self._transfers.add(listener)

    def on_connections(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call *listener()* when a connection opens or closes; returns an unsubscribe."""
        return self._connection_listeners.add(listener)

    def report_change(self, event: ChangeEvent, connection: Connection) -> None:
        """Tell the :meth:`on_change` listeners that *event* was sent to *connection*."""
        self._changes.notify(event, connection)

    def report_transfer(self, transfer: Transfer) -> None:
        """Tell the :meth:`on_transfer` listeners about a chunk read or staged."""
        self._transfers.notify(transfer)

    def force_unlock(self, lock_id: str) -> None:
        """Release any lock held in this broker, whoever holds it (the user's override)."""
        self.locks.force_release(lock_id)

    # -- the request dispatch --------------------------------------------------------------------

    def handle(self, connection: Connection, method: str, params: object) -> dict[str, Any]:
        """Decide and perform one ``files/*`` request of *connection* (what :meth:`Connection.handle` does).

        Raises
        ------
        FilesError
            The answer to send as the JSON-RPC error.
        """
        with self._request(connection, method, params) as (handler, p, note):
            return _wire_safe(method, handler(connection, p, note))

    async def ahandle(self, connection: Connection, method: str, params: object) -> dict[str, Any]:
        """:meth:`handle`, awaitable: file I/O on the worker threads, consent prompts on the loop."""
        if method == "files/consent":
            with self._request(connection, method, params) as (_, p, note):
                flow = connection.consent
                prepared = flow.prepare(p, note)
                if isinstance(prepared, dict):
                    return _wire_safe(method, prepared)
                request, targets = prepared
                decision = await flow.aask(request)
                granted = await off_loop(
                    self._request_executor(), flow.grant, request, targets, decision, note
                )
                return _wire_safe(method, granted)
        return await off_loop(self._request_executor(), self.handle, connection, method, params)

    def _request_executor(self) -> concurrent.futures.Executor:
        try:
            return self.executor()
        except ClosedError:
            raise PermissionDenied("the connection is closed", reason="connection_closed") from None

    @contextmanager
    def _request(
        self, connection: Connection, method: str, params: object
    ) -> Iterator[tuple[_Handler, Params, AuditNote]]:
        """Check one request's envelope, map what it raises to a FilesError, and audit it."""
        note = AuditNote(method)
        error: FilesError | None = None
        try:
            handler = _HANDLERS.get(method)
            if handler is None:
                raise MethodNotFound(f"unknown method {method!r}", reason="unknown_method")
            p = Params(params)
            raw_path = p.raw.get("path")
            note.path = readable(raw_path) if isinstance(raw_path, str) else None
            bad = find_surrogate(p.raw, skip=_CODEC_DECIDES)
            if bad is not None:
                # Only a name that is not valid UTF-8 on disk has one: never create it, never echo it.
                raise InvalidParams(
                    f"parameter {bad!r} holds a lone surrogate, which names no character",
                    reason="lone_surrogate",
                    param=bad,
                )
            if connection.closed:
                raise PermissionDenied(connection.access.close_reason, reason="connection_closed")
            connection.rate.take_op(path=note.path)
            if self._config.audit_required:
                try:
                    self.audit.announce(note, server=connection.server, connection_id=connection.id)
                except OSError:  # logged by the audit log
                    # The server learns that the notebook's audit failed, not where the audit file is.
                    raise PermissionDenied(
                        "the notebook requires an audit record before any access, and cannot write one now",
                        reason="audit_unavailable",
                    ) from None
            yield handler, p, note
        except FilesError as exc:
            error = exc
            if note.path is not None and exc.path is None and not isinstance(exc, MethodNotFound):
                exc.path = note.path
            raise
        except OSError as exc:
            error = from_os_error(exc, note.path)
            raise error from None
        except Exception as exc:
            log.exception("unexpected error in %s for server %s", method, connection.server)
            error = InternalError("the request failed unexpectedly", path=note.path)
            raise error from exc
        finally:
            self._record(connection, note, error)

    def _record(self, connection: Connection, note: AuditNote, error: FilesError | None) -> None:
        try:
            self.audit.append(
                AuditRecord(
                    time=note.started,
                    server=connection.server,
                    connection_id=connection.id,
                    method=note.method,
                    path=note.path,
                    canonical=note.canonical,
                    root=note.root,
                    decision="deny"
                    if note.refused is not None or isinstance(error, _POLICY_REFUSALS)
                    else "allow",
                    error=None if error is None else _error_name(error),
                    reason=note.refused if error is None else error.reason,
                    bytes=note.bytes if error is None else 0,
                    duration_ms=(time.perf_counter() - note.clock) * 1000.0,
                    lock_id=note.lock_id,
                    cause=note.cause if error is None else error.data.get("cause", note.cause),
                    audit_id=note.audit_id,
                )
            )
        except Exception:  # pragma: no cover - the audit never breaks a request
            log.exception("could not record an audit entry")

    # -- lifetime --------------------------------------------------------------------------------

    def executor(self) -> RequestPool:
        """The thread pool that runs requests for :meth:`Connection.ahandle` (see :mod:`.pool`)."""
        executor = self._executor
        if executor is not None and not self._closed:
            return executor
        with self._lock:
            self._check_open()
            if self._executor is None:
                self._executor = RequestPool(self._config.workers, thread_name_prefix="fsbroker-io")
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
        """Whether :meth:`close` was called."""
        return self._closed

    def _enforce_retention(self) -> None:
        try:
            self.trash.enforce()
        except Exception:
            log.exception("could not apply the trash's retention")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the broker is closed")

    def _tidy(self) -> None:
        # When a broker starts, and every minute while it runs, the trash loses what its retention
        # no longer keeps (here, not in the constructor: a trash of many entries would slow
        # %load_ext down; and entries grow old without any delete).
        self._enforce_retention()
        ticks = 0
        while not self._stop.wait(1.0):
            ticks += 1
            if ticks % _RETENTION_EVERY == 0:
                self._enforce_retention()
            try:
                self.grants.purge_expired()
                for conn in self.connections():
                    conn.uploads.discard_idle()
                    conn.listings.discard_idle()
                    conn.buffers.discard_idle()
            except Exception:  # pragma: no cover - never let the janitor die
                log.exception("periodic clean-up failed")


#: Parameters whose lone surrogates their codec judges (ENCODING_ERROR), not the dispatch.
_CODEC_DECIDES = frozenset({"content"})

#: Results whose bulk is made wire-safe where it is made: ``files/list`` names (sent readable,
#: ``undecodableName``), ``files/read`` content (a lone surrogate in decoded text is ENCODING_ERROR).
_SAFE_AT_SOURCE = {"files/list": frozenset({"entries"}), "files/read": frozenset({"content"})}


def _wire_safe(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """*result*, once sure JSON can carry it; else an error that says so, rather than a dead connection.

    The causes are fixed where names and text are made; this is the last line.
    """
    bad = find_surrogate(result, skip=_SAFE_AT_SOURCE.get(method, frozenset()))
    if bad is not None:
        log.error("the answer to %s holds text JSON cannot carry (at %s)", method, bad)
        raise InternalError(f"the answer to {method} cannot be sent", reason="unencodable_reply")
    return result


#: Errors that are the broker's policy saying no; other errors happen to allowed requests.
_POLICY_REFUSALS = (PermissionDenied, RateLimited, TooLarge)


def _error_name(error: FilesError) -> str:
    if error.name is not None:
        return error.name
    return {-32602: "INVALID_PARAMS", -32601: "METHOD_NOT_FOUND"}.get(error.code, "INTERNAL_ERROR")


_Handler = Callable[[Connection, Params, AuditNote], dict[str, Any]]
_HANDLERS: dict[str, _Handler] = {
    "files/read": read,
    "files/write": write,
    "files/list": list_directory,
    "files/stat": stat_path,
    "files/create": create,
    "files/delete": delete,
    "files/rename": rename_path,
    "files/watch": watch,
    "files/unwatch": unwatch,
    "files/unlock": unlock,
    "files/consent": consent,
}
