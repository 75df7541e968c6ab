"""A ``files/watch`` subscription as an async iterator of change events.

:class:`Watch` sends ``files/watch`` and ``files/unwatch`` through the functions
its :class:`~.files_client.FilesClient` gives it, and receives its events from the
connection's :class:`~.peers.ConnectionFiles`, where the middleware routes
``notifications/files/changed`` (on the 2026-07-28 wire, which has no notifications, it asks
``files/changes`` instead). It never blocks the connection: a consumer too
slow for its buffer loses events (counted), never the connection.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..wire.methods import WATCH_EVENTS
from ..wire.modern import CHANGES, CHANGES_FEATURE, EXTENSION_ID
from .answers import ChangeEvent
from .exceptions import ClientDisconnectedError, ClientInternalError, FilesUnavailableError, NotFoundError
from .lenient import compact_params, get_opt_str
from .peers import ConnectionFiles
from .replay import current_step
from .requester import Requester, check_names

__all__ = ["CHANGES_WAIT_MS", "Watch"]

#: How long one ``files/changes`` of the 2026-07-28 wire waits for an event (its ``waitMs``).
CHANGES_WAIT_MS = 10_000

#: Why a watch cannot be served to a 2026-07-28 client that does not list ``changes``.
NO_CHANGES_MESSAGE = (
    f"this tool watches files, and this client speaks MCP 2026-07-28 without the {CHANGES_FEATURE!r}"
    f" feature of the {EXTENSION_ID} extension, so watch events cannot reach it; use a client that"
    " lists that feature, or connect in the handshake era"
)


class Watch:
    """A ``files/watch`` subscription as an async iterator of :class:`ChangeEvent`.

    Made by :meth:`FilesClient.watch`; use ``async with``.

    Attributes
    ----------
    watch_id
        The client's ``watchId`` once started.
    """

    def __init__(
        self,
        requester: Requester,
        connection: ConnectionFiles,
        path: str,
        recursive: bool,
        events: Sequence[str] | None,
        buffer: int,
        *,
        on_close: Callable[[Watch], None] | None = None,
    ) -> None:
        if events is not None:
            check_names("event", events, WATCH_EVENTS)
        self.path = path
        self.recursive = recursive
        self.events = None if events is None else tuple(events)
        self.watch_id: str | None = None
        self._requester = requester
        self._conn = connection
        self._on_close = on_close
        send, receive = anyio.create_memory_object_stream[ChangeEvent](max(1, buffer))
        self._send: MemoryObjectSendStream[ChangeEvent] = send
        self._receive: MemoryObjectReceiveStream[ChangeEvent] = receive
        self._closed = False
        self._cursor: str | None = None
        self._pending: deque[ChangeEvent] = deque()

    @property
    def dropped(self) -> int:
        """Events dropped on this connection because a consumer was too slow."""
        return self._conn.dropped

    async def start(self) -> Watch:
        """Send ``files/watch`` (once) and start receiving its events."""
        if self.watch_id is not None or self._closed:
            return self
        if current_step() is not None and CHANGES_FEATURE not in self._conn.features:
            # Without files/changes the events could never reach the tool: fail before watching.
            raise FilesUnavailableError(NO_CHANGES_MESSAGE, modern_reason="no_changes")
        request = compact_params(
            path=self.path,
            recursive=self.recursive,
            events=None if self.events is None else list(self.events),
        )
        result = await self._requester.op("files/watch", request, op="watch", paths=[self.path])
        watch_id = get_opt_str(result, "watchId")
        if watch_id is None:
            raise ClientInternalError("files/watch answered without a watchId", method="files/watch")
        self.watch_id = watch_id
        self._conn.subscribe(watch_id, self._send)
        return self

    async def __aenter__(self) -> Watch:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> ChangeEvent:
        if self.watch_id is None and not self._closed:
            await self.start()
        if current_step() is not None and self.watch_id is not None and not self._closed:
            return await self._next_change(self.watch_id)
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def _next_change(self, watch_id: str) -> ChangeEvent:
        """The 2026-07-28 wire has no notifications: ask ``files/changes`` until an event comes."""
        while not self._pending:
            params = compact_params(watchId=watch_id, cursor=self._cursor, waitMs=CHANGES_WAIT_MS)
            result = await self._requester.request(CHANGES, params)
            self._cursor = get_opt_str(result, "cursor") or self._cursor
            if result.get("dropped") is True:
                self._conn.dropped += 1
            raw = result.get("events")
            for item in raw if isinstance(raw, list) else []:
                event = ChangeEvent.from_params(item if isinstance(item, dict) else None)
                if event is not None:
                    self._pending.append(event)
        return self._pending.popleft()

    async def aclose(self) -> None:
        """Stop receiving and send ``files/unwatch``; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        watch_id = self.watch_id
        if watch_id is not None:
            self._conn.unsubscribe(watch_id)
        self._send.close()
        self._receive.close()
        if watch_id is None:
            return
        # NotFoundError / ClientDisconnectedError: gone already (closed by the client, or the
        # connection ended).
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self._requester.timeouts.base),
            contextlib.suppress(NotFoundError, ClientDisconnectedError),
        ):
            await self._requester.request("files/unwatch", {"watchId": watch_id})
