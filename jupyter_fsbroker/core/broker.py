"""The broker: one entry point that decides and performs every ``files/*`` request.

A :class:`Broker` owns the roots, grants, locks, watches, trash and audit log
of one notebook (or one CLI process). Each server connection gets a
:class:`~jupyter_fsbroker.core.connection.Connection` from :meth:`Broker.connect`;
a transport hands every ``files/*`` request of that server to
:meth:`Connection.handle <jupyter_fsbroker.core.connection.Connection.handle>`
(blocking; call it off the event loop, or use ``Connection.ahandle``) and
sends back the result or the :class:`~jupyter_fsbroker.core.errors.FilesError`
it raises.

The requests themselves go through the broker's dispatch
(:mod:`jupyter_fsbroker.core.dispatch`), which the broker makes once and hands
to every connection; this module is the state they share. The handlers check
every request twice against the grants: once before anything on disk is
touched, and again once its locks are held, just before the I/O, so a
revocation also stops requests that were already queued.

Settings that change while the broker runs go through :meth:`Broker.configure`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .audit import AuditLog
from .config import BrokerConfig, default_lock_dir, default_trash_dir
from .connection import Connection
from .consent import Consenter, DenyingConsenter
from .dispatch import Dispatch
from .errors import ClosedError, ConfigError, FilesError
from .grants import Grant, GrantTable, normalize_operations
from .listeners import Listeners
from .locks import LockManager
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
        self._dispatch = Dispatch(self, self.audit, self._transfers, self.executor)
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
            The path is outside every root, an operation is unknown, or it changes
            files (``write``, ``delete``) in a read-only root, where it could never
            take effect: nothing is approved then.
        """
        self._check_open()
        operations = normalize_operations(ops.split(",") if isinstance(ops, str) else ops)
        if not operations:
            raise ConfigError("name at least one operation")
        location = self._parse_for_user(path)
        changes = [op for op in operations if op in ("write", "delete")]
        if changes and location.root.read_only:
            # Said now rather than approved in silence: every such request would be refused anyway.
            kept = [op for op in operations if op not in changes]
            instead = f"allow {', '.join(kept)} only, or " if kept else ""
            raise ConfigError(
                f"{location.root.name} is shared read-only, so {' and '.join(changes)} on {path} cannot "
                f"take effect: {instead}share it read-write (add_root(..., read_only=False))"
            )
        return self.grants.add(
            None,
            location,
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
            conn = Connection(self, name, consenter or DenyingConsenter(), notify, self._dispatch)
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

    def force_unlock(self, lock_id: str) -> None:
        """Release any lock held in this broker, whoever holds it (the user's override)."""
        self.locks.force_release(lock_id)

    # -- lifetime --------------------------------------------------------------------------------

    def executor(self) -> RequestPool:
        """The thread pool that runs requests for :meth:`Connection.ahandle` (see :mod:`.pool`).

        Raises
        ------
        ClosedError
            The broker is closed.
        """
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
