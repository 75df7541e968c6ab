"""A server that closes a call's event stream before answering, as SEP-1699 allows, and expects a resumption.

Built on mcp's own server-side resumability: an event store (in memory, here) and a
``retry`` interval make mcp prime each stream with an event that has an id and empty data;
the tool ``answer_after_closing`` calls ``ctx.close_sse_stream()``, so the POST's stream
ends without the answer, and the answer reaches the client only if it resumes the stream
(GET with ``Last-Event-ID``). ``notify`` sends log notifications outside any request (they
travel on the GET stream), and ``drop_get_stream_then_notify`` closes that stream first, so
the ones it sends reach the client only if it resumes the GET stream. ``replays`` lists the
``Last-Event-ID`` values it was asked to replay after. Run with ``--http --fd N``
(:mod:`tests.support.handover`).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

import anyio
from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

from tests.support.handover import run_server, serve_on_inherited
from tests.support.ports import LOOPBACK

#: The reconnection delay the server asks for, in milliseconds (``RESUMING_RETRY_MS`` overrides it).
RETRY_MS = 300


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, with the ids asked for by resumptions."""

    def __init__(self) -> None:
        self.events: list[tuple[StreamId, JSONRPCMessage | None]] = []
        self.replayed_after: list[str] = []

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self.events.append((stream_id, message))
        return str(len(self.events))

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        self.replayed_after.append(last_event_id)
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream_id = self.events[int(last_event_id) - 1][0]
        for index, (stream, message) in enumerate(self.events[int(last_event_id) :], int(last_event_id) + 1):
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, str(index)))
        return stream_id


def build_server(store: MemoryEventStore) -> MCPServer[Any]:
    # Log notifications are the plainest server→client message outside a request (SEP-2577
    # deprecates the capability, not the wire message).
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    server: MCPServer[Any] = MCPServer("fsbroker-resuming-test", version="1", log_level="WARNING")

    @server.tool()
    async def answer_after_closing(ctx: Context) -> str:
        """Close this call's event stream, then answer (on the resumed stream only)."""
        await ctx.close_sse_stream()
        await anyio.sleep(0.05)
        return "answered after the stream closed"

    @server.tool()
    async def notify(texts: list[str], ctx: Context) -> int:
        """Send each text as a log notification on the GET stream (related to no request)."""
        for text in texts:
            await ctx.session.send_log_message("info", text)
        return len(texts)

    @server.tool()
    async def drop_get_stream_then_notify(texts: list[str], ctx: Context) -> int:
        """Close the GET stream (not the session), then send the texts, which wait in the event store."""
        await ctx.close_standalone_sse_stream()
        for text in texts:
            await ctx.session.send_log_message("info", text)
        return len(texts)

    @server.tool()
    async def replays() -> list[str]:
        """The ``Last-Event-ID`` of each resumption so far."""
        return list(store.replayed_after)

    return server


def main() -> None:
    def http(fd: int) -> None:
        store = MemoryEventStore()
        retry_ms = int(os.environ.get("RESUMING_RETRY_MS", RETRY_MS))
        app = build_server(store).streamable_http_app(
            host=LOOPBACK, event_store=store, retry_interval=retry_ms
        )
        serve_on_inherited(app, fd)

    def stdio() -> None:
        raise SystemExit("this server runs over HTTP only (--http --fd N)")

    run_server(stdio, http)


if __name__ == "__main__":
    main()
