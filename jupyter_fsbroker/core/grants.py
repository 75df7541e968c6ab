"""Grants: who may do what, where, until when.

A :class:`Grant` is a value: a connection (or every connection, for the
notebook's pre-approvals), a path inside a root, a set of operations and an
optional expiry. A directory grant covers its descendants. :class:`GrantTable`
holds them, answers :meth:`GrantTable.find` on every operation, and revokes
them one at a time, by path, by connection or by root.

The table keeps **one grant per holder and path and expiry**: a grant for a
path that already has one merges into it (same id, the union of the
operations); and for consents, a grant that an ancestor grant already covers
is not added, and a directory grant absorbs the narrower grants below it that
it covers (the notebook's own pre-approvals stay as the user wrote them). So
revoking a row of the dashboard takes away exactly what it shows. A new
expiry for operations already granted replaces theirs (the newer answer
counts), so no operation of a path is ever granted twice. The table also
remembers, for a while, which grants were taken away and why (:meth:`GrantTable.lost`),
so that a refusal can say "revoked" rather than "never granted".
"""

from __future__ import annotations

import collections
import dataclasses
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..wire.methods import OPERATIONS
from .errors import ConfigError, NotFound
from .listeners import Listeners
from .rootpath import RootPath
from .roots import Root

__all__ = ["OPERATIONS", "Grant", "GrantTable", "LostGrant", "normalize_operations"]


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

    def same_holder(self, other: Grant) -> bool:
        """Whether *other* belongs to the same connection with the same reach into sensitive names."""
        return self.connection_id == other.connection_id and self.include_sensitive == other.include_sensitive


@dataclass(frozen=True)
class LostGrant:
    """Operations a grant no longer gives, and why (see :meth:`GrantTable.lost`).

    Attributes
    ----------
    grant
        The grant as it was before.
    operations
        The operations taken away.
    why
        ``"revoked"`` (by the user or the notebook), ``"expired"`` or ``"root_removed"``.
    at
        :func:`time.time` when it happened.
    """

    grant: Grant
    operations: tuple[str, ...]
    why: str
    at: float


#: How many lost grants the table remembers (the newest), to explain refusals.
_LOST_KEPT = 256


def _later(a: float | None, b: float | None) -> bool:
    """Whether expiry *a* lasts at least as long as *b* (``None`` lasts forever)."""
    return a is None or (b is not None and a >= b)


class GrantTable:
    """The broker's grants. Thread-safe and observable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grants: dict[str, Grant] = {}
        self._lost: collections.deque[LostGrant] = collections.deque(maxlen=_LOST_KEPT)
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
        """Grant *operations* on *location*; return the grant that now gives them.

        The result is a new grant, or an existing one of the same holder and
        expiry that was widened (same id), or the existing grant of an
        ancestor that already covers everything asked (nothing changes then).
        Narrower grants of the same holder that the result covers are absorbed,
        and operations that another grant of the same path gave with another
        expiry move to the new one.
        """
        wanted = Grant(
            id="g_" + secrets.token_hex(8),
            connection_id=connection_id,
            location=location,
            operations=normalize_operations(operations),
            expires_at=expires_at,
            source=source,
            include_sensitive=include_sensitive,
            server=server,
        )
        now = time.time()
        with self._lock:
            result = self._merge_locked(wanted, now)
        self._changed()
        return result

    def _merge_locked(self, wanted: Grant, now: float) -> Grant:
        mine = [g for g in self._grants.values() if g.same_holder(wanted) and not g.expired(now)]
        nested = wanted.source == "consent"  # ancestors and descendants count for consents only
        for grant in mine:  # an ancestor (or the path itself) already gives all of it, as long
            if (
                (grant.location == wanted.location or nested)
                and grant.location.contains(wanted.location)
                and set(wanted.operations) <= set(grant.operations)
                and _later(grant.expires_at, wanted.expires_at)
                and (grant.location != wanted.location or grant.expires_at == wanted.expires_at)
            ):
                return grant
        result = wanted
        for grant in mine:
            if grant.location == wanted.location and grant.expires_at == wanted.expires_at:
                ops = normalize_operations((*grant.operations, *wanted.operations))
                result = dataclasses.replace(grant, operations=ops, server=grant.server or wanted.server)
                break
        self._grants[result.id] = result
        for grant in mine:
            if grant.id == result.id:
                continue
            if grant.location == result.location:
                # Another expiry for some of the same operations: the newer answer counts.
                rest = tuple(op for op in grant.operations if op not in result.operations)
                self._replace_locked(grant, rest)
            elif (
                nested
                and result.location.contains(grant.location)
                and set(grant.operations) <= set(result.operations)
                and _later(result.expires_at, grant.expires_at)
            ):
                del self._grants[grant.id]  # absorbed: the wider grant gives all of it
        return result

    def _replace_locked(self, grant: Grant, operations: tuple[str, ...]) -> None:
        if operations:
            self._grants[grant.id] = dataclasses.replace(grant, operations=operations)
        else:
            del self._grants[grant.id]

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

    def get(self, grant_id: str) -> Grant | None:
        """The grant with id *grant_id* as it is now, or ``None``."""
        with self._lock:
            return self._grants.get(grant_id)

    def revoke(self, grant_id: str, operations: Iterable[str] | None = None) -> Grant:
        """Revoke one grant by id (or only some of its *operations*); return it as it was.

        Raises
        ------
        NotFound
            No such grant.
        """
        drop = None if operations is None else set(normalize_operations(operations))
        with self._lock:
            grant = self._grants.get(grant_id)
            if grant is not None:
                self._take_locked(grant, drop, "revoked")
        if grant is None:
            raise NotFound(f"no grant {grant_id!r}", reason="unknown_grant")
        self._changed()
        return grant

    def _take_locked(self, grant: Grant, drop: set[str] | None, why: str) -> tuple[str, ...]:
        """Take *drop* (all when ``None``) away from *grant*; remember it; return what was taken."""
        taken = tuple(op for op in grant.operations if drop is None or op in drop)
        if taken:
            self._replace_locked(grant, tuple(op for op in grant.operations if op not in taken))
            self._lost.append(LostGrant(grant, taken, why, time.time()))
        return taken

    def revoke_where(
        self,
        predicate: Callable[[Grant], bool],
        *,
        operations: Iterable[str] | None = None,
        why: str = "revoked",
    ) -> tuple[Grant, ...]:
        """Revoke every grant for which *predicate* is true (or only its *operations*).

        Returns the grants touched, as they were before.
        """
        drop = None if operations is None else set(normalize_operations(operations))
        with self._lock:
            gone = tuple(g for g in self._grants.values() if predicate(g))
            gone = tuple(g for g in gone if self._take_locked(g, drop, why))
        if gone:
            self._changed()
        return gone

    def revoke_path(
        self, connection_id: str | None, location: RootPath, operations: Iterable[str] | None = None
    ) -> tuple[Grant, ...]:
        """Revoke a connection's grants (or pre-approvals, for ``None``) that overlap *location*.

        Grants on the path, below it, and above it all go: revoking part of a
        directory grant revokes the whole grant rather than keep more than the
        user wants. With *operations*, only those are taken away (a grant left
        with none goes).
        """
        return self.revoke_where(
            lambda g: g.connection_id == connection_id and g.location.overlaps(location),
            operations=operations,
        )

    def revoke_connection(self, connection_id: str) -> tuple[Grant, ...]:
        """Revoke every grant of a connection (not the shared pre-approvals)."""
        return self.revoke_where(lambda g: g.connection_id == connection_id, why="connection_closed")

    def revoke_root(self, root: Root) -> tuple[Grant, ...]:
        """Revoke every grant made below *root*."""
        return self.revoke_where(lambda g: g.location.root.id == root.id, why="root_removed")

    def purge_expired(self) -> tuple[Grant, ...]:
        """Drop expired grants; return them."""
        now = time.time()
        return self.revoke_where(lambda g: g.expired(now), why="expired")

    def lost(self, connection_id: str, location: RootPath, operation: str) -> LostGrant | None:
        """The newest grant this connection could have used for *operation* on *location* that was
        taken away (revoked, expired, its root removed), or ``None``: what a refusal should name."""
        now = time.time()
        with self._lock:
            for lost in reversed(self._lost):
                grant = lost.grant
                if (
                    grant.connection_id in (None, connection_id)
                    and operation in lost.operations
                    and grant.location.contains(location)
                ):
                    return lost
            for grant in self._grants.values():  # expired, and not purged yet
                mine = grant.connection_id in (None, connection_id)
                if mine and grant.covers(location, operation) and grant.expired(now):
                    return LostGrant(grant, (operation,), "expired", grant.expires_at or now)
        return None

    def subscribe(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call *listener()* after every change; returns an unsubscribe function."""
        return self._listeners.add(listener)

    def _changed(self) -> None:
        self._listeners.notify()
