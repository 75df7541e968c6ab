"""Grants: who may do what, where, until when.

A :class:`Grant` is a value: a connection (or every connection, for the
notebook's pre-approvals), a path inside a root, a set of operations and an
optional expiry. A directory grant covers its descendants. :class:`GrantTable`
holds them, answers :meth:`GrantTable.find` on every operation, and revokes
them one at a time, by path, by connection or by root.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .errors import ConfigError, NotFound
from .observers import Listeners
from .rootpath import RootPath
from .roots import Root

__all__ = ["OPERATIONS", "Grant", "GrantTable", "normalize_operations"]

#: The four operations of PROTOCOL.md, in their canonical order.
OPERATIONS: tuple[str, ...] = ("read", "write", "delete", "watch")


def normalize_operations(ops: Iterable[str]) -> tuple[str, ...]:
    """Check *ops* and return them in canonical order without duplicates.

    Raises
    ------
    ConfigError
        An operation is not one of :data:`OPERATIONS`.
    """
    wanted = set(ops)
    unknown = wanted - set(OPERATIONS)
    if unknown:
        raise ConfigError(f"unknown operation(s) {', '.join(sorted(unknown))}: use {', '.join(OPERATIONS)}")
    return tuple(op for op in OPERATIONS if op in wanted)


@dataclass(frozen=True)
class Grant:
    """Permission for one connection (or all) to use one path for some operations.

    Attributes
    ----------
    id
        Unique id, ``g_`` + 16 hex characters.
    connection_id
        The connection it belongs to; ``None`` for a pre-approval that every
        connection of this broker shares.
    location
        The granted path; its root is that very addition (grants die with
        their root), and a location that is the root itself grants it whole.
    operations
        A subset of :data:`OPERATIONS`.
    expires_at
        ``time.time()`` after which it no longer counts; ``None`` for as long
        as the connection lasts.
    source
        ``"consent"``, ``"preapproval"`` or ``"config"``.
    include_sensitive
        Also covers sensitive names below it (only the notebook can say so).
    server
        The server name, for views (empty for pre-approvals).
    """

    id: str
    connection_id: str | None
    location: RootPath
    operations: tuple[str, ...]
    expires_at: float | None = None
    source: str = "consent"
    include_sensitive: bool = False
    server: str = ""
    created_at: float = field(default_factory=time.time)

    @property
    def path(self) -> str:
        """The root-relative path, ``data/raw``."""
        return self.location.rel

    def expired(self, now: float | None = None) -> bool:
        """Whether the grant has expired at *now* (default: the current time)."""
        return self.expires_at is not None and (time.time() if now is None else now) >= self.expires_at

    def covers(self, location: RootPath, operation: str) -> bool:
        """Whether the grant covers *operation* on *location* (expiry aside)."""
        return operation in self.operations and self.location.contains(location)


class GrantTable:
    """The broker's grants. Thread-safe and observable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grants: dict[str, Grant] = {}
        self._listeners: Listeners[[]] = Listeners()

    def add(
        self,
        connection_id: str | None,
        location: RootPath,
        operations: Iterable[str],
        *,
        expires_at: float | None = None,
        source: str = "consent",
        include_sensitive: bool = False,
        server: str = "",
    ) -> Grant:
        """Create, store and return a grant."""
        grant = Grant(
            id="g_" + secrets.token_hex(8),
            connection_id=connection_id,
            location=location,
            operations=normalize_operations(operations),
            expires_at=expires_at,
            source=source,
            include_sensitive=include_sensitive,
            server=server,
        )
        with self._lock:
            self._grants[grant.id] = grant
        self._changed()
        return grant

    def find(
        self,
        connection_id: str,
        location: RootPath,
        operation: str,
        *,
        sensitive: bool = False,
    ) -> Grant | None:
        """The live grant that lets *connection_id* do *operation* on *location*, or ``None``.

        A sensitive path is covered only by a grant with ``include_sensitive``.
        """
        now = time.time()
        with self._lock:
            for grant in self._grants.values():
                if (
                    grant.connection_id in (None, connection_id)
                    and grant.covers(location, operation)
                    and not grant.expired(now)
                    and (grant.include_sensitive or not sensitive)
                ):
                    return grant
        return None

    def grants(self, connection_id: str | None = None) -> tuple[Grant, ...]:
        """Live grants: all of them, or those a connection holds (its own and pre-approvals)."""
        now = time.time()
        with self._lock:
            return tuple(
                g
                for g in self._grants.values()
                if not g.expired(now) and (connection_id is None or g.connection_id in (None, connection_id))
            )

    def revoke(self, grant_id: str) -> Grant:
        """Revoke one grant by id.

        Raises
        ------
        NotFound
            No such grant.
        """
        with self._lock:
            grant = self._grants.pop(grant_id, None)
        if grant is None:
            raise NotFound(f"no grant {grant_id!r}", reason="unknown_grant")
        self._changed()
        return grant

    def revoke_where(self, predicate: Callable[[Grant], bool]) -> tuple[Grant, ...]:
        """Revoke every grant for which *predicate* is true; return them."""
        with self._lock:
            gone = tuple(g for g in self._grants.values() if predicate(g))
            for g in gone:
                del self._grants[g.id]
        if gone:
            self._changed()
        return gone

    def revoke_path(self, connection_id: str | None, location: RootPath) -> tuple[Grant, ...]:
        """Revoke a connection's grants (or pre-approvals, for ``None``) that overlap *location*.

        Grants on the path, below it, and above it all go: revoking part of a
        directory grant revokes the whole grant rather than keep more than the
        user wants.
        """
        return self.revoke_where(lambda g: g.connection_id == connection_id and g.location.overlaps(location))

    def revoke_connection(self, connection_id: str) -> tuple[Grant, ...]:
        """Revoke every grant of a connection (not the shared pre-approvals)."""
        return self.revoke_where(lambda g: g.connection_id == connection_id)

    def revoke_root(self, root: Root) -> tuple[Grant, ...]:
        """Revoke every grant made below *root*."""
        return self.revoke_where(lambda g: g.location.root.id == root.id)

    def purge_expired(self) -> tuple[Grant, ...]:
        """Drop expired grants; return them."""
        now = time.time()
        return self.revoke_where(lambda g: g.expired(now))

    def subscribe(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call *listener()* after every change; returns an unsubscribe function."""
        return self._listeners.add(listener)

    def _changed(self) -> None:
        self._listeners.notify()
