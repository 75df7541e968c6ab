"""An operation's lock on one key as its caller holds it (:class:`Hold`), and a lock as the views see it.

The lock manager (:mod:`jupyter_fsbroker.core.locks`) decides who may lock
what and makes the holds; this module holds the values it hands out: the
:class:`Hold` an operation keeps for the length of a ``with`` block (or turns
into a kept lock), and :class:`LockInfo`, one lock as the views and
``files/stat`` show it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .resource import Closeable

__all__ = ["Hold", "LockInfo", "LockMode", "LockRequest"]

#: The two lock modes.
LockMode = Literal["shared", "exclusive"]


@dataclass(frozen=True)
class LockInfo:
    """One lock held in this process, as the views and ``files/stat`` show it.

    Attributes
    ----------
    lock_id
        The ``lockId`` of a kept lock; ``None`` for an operation's transient lock.
    key
        The canonical absolute path of the locked object.
    path
        The root-relative display path, e.g. ``"data/x.csv"``.
    owner
        The id of the connection that holds the lock.
    owner_label
        The name of that connection's server, shown to others as ``lockedBy``.
    mode
        ``"shared"`` or ``"exclusive"``.
    kept
        Whether this is a kept lock (``keepLocked``).
    since
        When the lock was taken (or kept), as :func:`time.time`.
    """

    lock_id: str | None
    key: str
    path: str
    owner: str
    owner_label: str
    mode: str
    kept: bool
    since: float


@dataclass(frozen=True)
class LockRequest:
    """What a caller of :meth:`LockManager.hold <jupyter_fsbroker.core.locks.LockManager.hold>` asks for;
    a :class:`Hold` is made from it."""

    key: str
    mode: LockMode
    owner: str
    owner_label: str
    path: str


class Hold(Closeable):
    """An operation's lock on one key, returned by the lock manager's ``hold``.

    Use it as a context manager: leaving the ``with`` block releases the lock,
    unless :meth:`keep` turned it into a kept lock. A hold made by the owner of a
    kept lock on the same key is a no-op: the kept lock already covers it (so
    releasing the kept lock meanwhile leaves that operation unlocked).
    """

    __slots__ = (
        "_keep",
        "_release",
        "key",
        "mode",
        "noop",
        "owner",
        "owner_label",
        "path",
        "released",
        "since",
    )

    def __init__(
        self,
        request: LockRequest,
        *,
        noop: bool,
        keep: Callable[[Hold], str],
        release: Callable[[Hold], None],
    ) -> None:
        self._keep = keep
        self._release = release
        self.key = request.key
        self.mode: LockMode = request.mode
        self.owner = request.owner
        self.owner_label = request.owner_label
        self.path = request.path
        self.since = time.time()
        #: Whether the owner's kept lock covers this hold, which then holds nothing itself.
        self.noop = noop
        #: Whether the hold holds no lock of its own any more: released, kept, or its manager
        #: closed (the manager sets it, under its condition).
        self.released = noop

    @property
    def active(self) -> bool:
        """Whether this hold still holds a transient lock of its own."""
        return not self.released

    def info(self) -> LockInfo:
        """This hold as a :class:`LockInfo` (a transient lock)."""
        return LockInfo(
            lock_id=None,
            key=self.key,
            path=self.path,
            owner=self.owner,
            owner_label=self.owner_label,
            mode=self.mode,
            kept=False,
            since=self.since,
        )

    def keep(self) -> str:
        """Turn this exclusive hold into a kept lock and return its ``lockId``.

        Leaving the ``with`` block then does not release the lock; it lasts
        until the lock manager's ``release``, ``force_release``, ``release_owner``
        or ``close``.

        Returns
        -------
        str
            ``"lock_"`` and 32 hex digits; the existing ``lockId`` if the owner
            already keeps this key.

        Raises
        ------
        ValueError
            The hold is shared, or was released already.
        FileLocked
            A no-op hold whose owner's kept lock was released meanwhile, and
            the key cannot be locked again at once.
        ClosedError
            The manager was closed.
        """
        if self.mode != "exclusive":
            raise ValueError("only an exclusive hold can be kept")
        return self._keep(self)

    def release(self) -> None:
        """Release this hold's transient lock; idempotent, and a no-op once kept."""
        self._release(self)

    def close(self) -> None:
        """The same as :meth:`release`: what leaving the ``with`` block does."""
        self.release()

    def __repr__(self) -> str:
        state = "no-op" if self.noop else ("released" if self.released else "held")
        return f"Hold({self.path!r}, {self.mode}, owner={self.owner!r}, {state})"
