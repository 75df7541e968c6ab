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
    """

    def __init__(
        self,
        brokering: bool,
        capabilities: Mapping[str, Any] | None,
        features: Iterable[str] = (),
    ) -> None:
        self.brokering = brokering
        self.capabilities: dict[str, Any] = dict(capabilities or {})
        self.features = frozenset(features)
        self.dropped = 0
        self.local_locks = LocalLocks()
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
