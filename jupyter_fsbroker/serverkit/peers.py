"""What the helper keeps per client connection: the capability and features, watch routing, in-process locks.

One :class:`ConnectionFiles` lives in mcp's per-connection ``state`` from the
client's ``initialize`` on (the middleware puts it there); every
:class:`~.files_client.FilesClient` of that connection shares it. It only holds and
routes; it never sends anything to the client.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .answers import ChangeEvent

__all__ = ["ConnectionFiles", "LocalLocks"]

log = logging.getLogger(__name__)

# Events kept for a watchId whose iterator is not registered yet.
_EARLY_EVENTS = 256


class LocalLocks:
    """In-process locks per path, so concurrent tool calls of one connection take turns."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of *key* for the ``async with`` block (forgotten when no one waits)."""
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class KeptLockIds:
    """The lock ids the calls of one client connection hold in this process.

    The client hands a connection's kept lock to any request of that connection (the owner may
    use it without its ``lockId``), so a second call of the connection locking the same file gets
    the first call's lock. On one legacy session :class:`LocalLocks` keeps such calls apart; on
    the 2026-07-28 wire each call has its own :class:`ConnectionFiles`, and the calls of one
    connection in this process share this table instead: a call handed a ``lockId`` that another
    one holds here waits for it to let go, then asks again. Nothing here is held while no call
    holds a lock, so a call that another replica carried on, abandoned here, blocks no one once
    its lock is released.
    """

    def __init__(self) -> None:
        self._held: dict[str, anyio.Event] = {}

    def holder(self, lock_id: str) -> anyio.Event | None:
        """Set when the call holding *lock_id* here lets it go; ``None`` if no call holds it."""
        return self._held.get(lock_id)

    def take(self, lock_id: str) -> None:
        """Note that the calling call holds *lock_id*."""
        self._held[lock_id] = anyio.Event()

    def let_go(self, lock_id: str) -> None:
        """The holder of *lock_id* is done with it: wake the calls that wait for it."""
        done = self._held.pop(lock_id, None)
        if done is not None:
            done.set()


class ConnectionFiles:
    """The helper's state for one client connection.

    Parameters
    ----------
    brokering
        Whether the client advertised ``filesystemBrokering``.
    capabilities
        The client's raw ``capabilities`` from ``initialize``.
    features
        The optional parts of PROTOCOL.md the client said it implements
        (``filesystemBrokeringFeatures``, e.g. ``perPathConsent``).

    Attributes
    ----------
    dropped
        Watch events dropped because a consumer was too slow.
    local_locks
        See :class:`LocalLocks`.
    kept_lock_ids
        See :class:`KeptLockIds`; shared by the calls of one client connection (a new one if not
        given).
    """

    def __init__(
        self,
        brokering: bool,
        capabilities: Mapping[str, Any] | None,
        features: Iterable[str] = (),
        kept_lock_ids: KeptLockIds | None = None,
    ) -> None:
        self.brokering = brokering
        self.capabilities: dict[str, Any] = dict(capabilities or {})
        self.features = frozenset(features)
        self.dropped = 0
        self.local_locks = LocalLocks()
        self.kept_lock_ids = kept_lock_ids if kept_lock_ids is not None else KeptLockIds()
        self._watches: dict[str, MemoryObjectSendStream[ChangeEvent]] = {}
        self._early: deque[ChangeEvent] = deque(maxlen=_EARLY_EVENTS)

    def deliver(self, event: ChangeEvent) -> None:
        """Route *event* to its watch's iterator, never blocking the connection."""
        stream = self._watches.get(event.watch_id)
        if stream is None:
            # The notification may overtake the files/watch answer's consumer.
            self._early.append(event)
            return
        try:
            stream.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
            log.warning("watch %s: the consumer is too slow; dropped an event", event.watch_id)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._watches.pop(event.watch_id, None)

    def subscribe(self, watch_id: str, stream: MemoryObjectSendStream[ChangeEvent]) -> None:
        """Send the events of *watch_id* to *stream* from now on, those that came early first."""
        self._watches[watch_id] = stream
        for event in self._take_early(watch_id):
            self.deliver(event)

    def unsubscribe(self, watch_id: str) -> None:
        """Stop routing the events of *watch_id*."""
        self._watches.pop(watch_id, None)

    def _take_early(self, watch_id: str) -> list[ChangeEvent]:
        mine = [e for e in self._early if e.watch_id == watch_id]
        if mine:
            kept = [e for e in self._early if e.watch_id != watch_id]
            self._early.clear()
            self._early.extend(kept)
        return mine
