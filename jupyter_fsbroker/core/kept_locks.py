"""Kept locks: the exclusive locks that outlive their operation (``keepLocked``), by key and by ``lockId``.

A ``files/*`` request with ``keepLocked`` turns its exclusive lock into a kept
lock, named by a ``lockId`` that only its owner (a connection) may use: the
owner's later operations on the key go through it, everyone else is refused at
once, until ``files/unlock``, the user's force release, or the owner's end.

:class:`KeptLocks` is the table of one :class:`~jupyter_fsbroker.core.locks.LockManager`;
the manager uses it under its own condition (it is not thread-safe by itself) and
keeps the OS lock of the key (:mod:`jupyter_fsbroker.core.lockfiles`) in step.
A ``lockId`` is 128 random bits, never derived from the key, and a lookup that
names another owner's lock answers as one that names no lock, so that no
``lockId`` is ever confirmed to anyone but its owner.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from .errors import NotFound

__all__ = ["KeptLock", "KeptLocks"]


@dataclass(frozen=True, slots=True)
class KeptLock:
    """One kept lock.

    Attributes
    ----------
    lock_id
        ``"lock_"`` and 32 hex digits.
    key
        The canonical absolute path of the locked object.
    owner
        The id of the connection that keeps it.
    owner_label
        That connection's server name, shown to others as ``lockedBy``.
    path
        The root-relative display path.
    since
        When it was kept, as :func:`time.time`.
    """

    lock_id: str
    key: str
    owner: str
    owner_label: str
    path: str
    since: float


class KeptLocks:
    """The kept locks of one lock manager, by key and by ``lockId`` (at most one per key)."""

    __slots__ = ("_by_id", "_by_key")

    def __init__(self) -> None:
        self._by_key: dict[str, KeptLock] = {}
        self._by_id: dict[str, str] = {}  # lockId -> key

    def __len__(self) -> int:
        return len(self._by_key)

    def on(self, key: str) -> KeptLock | None:
        """The kept lock on *key*, or ``None``."""
        return self._by_key.get(key)

    def find(self, lock_id: str, owner: str | None) -> KeptLock:
        """The kept lock *lock_id* of *owner* (of anyone, when ``None``).

        Raises
        ------
        NotFound
            ``reason="unknown_lock"``: no such lock, or another owner's (the same answer).
        """
        key = self._by_id.get(lock_id)
        kept = None if key is None else self._by_key.get(key)
        if kept is None or (owner is not None and kept.owner != owner):
            raise NotFound("no such lock", reason="unknown_lock")
        return kept

    def keep(self, key: str, *, owner: str, owner_label: str, path: str) -> KeptLock:
        """Record a new kept lock on *key* (which has none) under a fresh ``lockId``."""
        lock_id = "lock_" + secrets.token_hex(16)
        while lock_id in self._by_id:  # pragma: no cover - 128 random bits
            lock_id = "lock_" + secrets.token_hex(16)
        kept = KeptLock(lock_id, key, owner, owner_label, path, time.time())
        self._by_key[key] = kept
        self._by_id[lock_id] = key
        return kept

    def drop(self, kept: KeptLock) -> None:
        """Forget *kept* (released)."""
        self._by_id.pop(kept.lock_id, None)
        if self._by_key.get(kept.key) is kept:
            del self._by_key[kept.key]

    def of_owner(self, owner: str) -> list[KeptLock]:
        """The kept locks of *owner*."""
        return [kept for kept in self._by_key.values() if kept.owner == owner]

    def clear(self) -> None:
        """Forget every kept lock (the manager closed)."""
        self._by_key.clear()
        self._by_id.clear()
