"""Server-sent events: the fields a resumption needs, and a call whose stream the server closed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp_types import LoggingMessageNotificationParams

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import open_connection
from jupyter_fsbroker.protocol.transports.http import open_session
from jupyter_fsbroker.protocol.transports.sse import EventStream
from tests.protocol.servers.harness import payload
from tests.support.handover import HandedOverServer

RESUMING_SERVER = str(Path(__file__).resolve().parent / "servers" / "resuming_server.py")


def feed_all(stream: EventStream, *chunks: bytes) -> list[object]:
    got: list[object] = []
    for chunk in chunks:
        got += stream.feed(chunk)
    return got


def test_a_priming_event_dispatches_nothing_and_sets_the_cursor() -> None:
    stream = EventStream()
    # What mcp's and the conformance suite's servers send first: an id, a retry, empty data.
    assert feed_all(stream, b"id: event-1\nretry: 500\ndata: \n\n") == []
    assert (stream.last_event_id, stream.retry_ms) == ("event-1", 500)
    assert feed_all(stream, b'id: event-2\ndata: {"a":1}\n\n') == [b'{"a":1}']
    assert stream.last_event_id == "event-2"


def test_the_cursor_moves_only_when_an_event_is_complete() -> None:
    stream = EventStream()
    feed_all(stream, b"id: 1\ndata: x\n\n")
    # The stream breaks inside event 2: a resumption must ask for it again.
    assert feed_all(stream, b"id: 2\ndata: {") == []
    assert stream.last_event_id == "1"


def test_fields_the_standard_ignores_are_ignored() -> None:
    stream = EventStream()
    feed_all(stream, b"id: 7\nretry: 250\n\n")
    feed_all(stream, b"id: a\x00b\nretry: soon\nretry: -5\n\n")
    assert (stream.last_event_id, stream.retry_ms) == ("7", 250)
    # An empty id resets the cursor: nothing to resume from.
    feed_all(stream, b"id\n\n")
    assert stream.last_event_id is None


def test_fields_split_across_chunks_and_line_endings() -> None:
    stream = EventStream()
    got = feed_all(stream, b"i", b"d: ev", b"ent-9\r", b"\nret", b"ry: 42\r\rdata: y\r\n\r\n")
    assert got == [b"y"]
    assert (stream.last_event_id, stream.retry_ms) == ("event-9", 42)


def test_a_reconnection_drops_the_event_cut_short_and_keeps_the_cursor() -> None:
    stream = EventStream()
    feed_all(stream, b"retry: 70\nid: 1\ndata: x\n\n", b'id: 2\ndata: {"cut')
    stream.reconnected()
    # The resumed stream begins at an event boundary: nothing of the cut event is joined to it.
    assert feed_all(stream, b"id: 2\ndata: whole\n\n") == [b"whole"]
    assert (stream.last_event_id, stream.retry_ms) == ("2", 70)


@pytest.fixture
def resuming_url() -> Iterator[str]:
    with HandedOverServer([sys.executable, RESUMING_SERVER]) as server:
        yield server.url


@pytest.mark.anyio
async def test_a_call_whose_stream_the_server_closed_is_answered_on_the_resumed_stream(
    broker: Broker, resuming_url: str
) -> None:
    async with open_connection(broker, "resuming", url=resuming_url) as conn:
        started = time.monotonic()
        result = await conn.call_tool("answer_after_closing")
        waited = time.monotonic() - started
        assert payload(result) == {"result": "answered after the stream closed"}
        replays = payload(await conn.call_tool("replays"))["result"]
    # One resumption, from the priming event's id (the only event before the close).
    assert len(replays) == 1 and replays[0].isdigit(), replays
    # The server's retry (300 ms) was waited for: the spec says the client must respect it.
    assert waited >= 0.25, waited


@pytest.mark.anyio
async def test_the_get_stream_resumes_after_drops_losing_and_repeating_nothing() -> None:
    # A delay longer than the client's own default (1 s), so that waiting it shows it was honoured.
    retry_ms = 1600
    env = {**os.environ, "RESUMING_RETRY_MS": str(retry_ms)}
    send, receive = anyio.create_memory_object_stream[str](100)

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        await send.send(str(params.data))

    async def take(count: int) -> list[str]:
        with anyio.fail_after(15):
            return [await receive.receive() for _ in range(count)]

    with HandedOverServer([sys.executable, RESUMING_SERVER], env=env) as server:
        async with (
            open_session(server.url, {}, timeout=httpx2.Timeout(10)) as (read_stream, write_stream),
            ClientSession(read_stream, write_stream, logging_callback=on_log) as session,
        ):
            await session.initialize()
            await session.call_tool("notify", {"texts": ["1", "2", "3"]})
            assert await take(3) == ["1", "2", "3"]
            # The first drop: the GET stream had no retry yet, so the client's default delay.
            await session.call_tool("drop_get_stream_then_notify", {"texts": ["4", "5"]})
            assert await take(2) == ["4", "5"]
            # The resumed stream carried the server's retry: the second drop waits that long.
            started = time.monotonic()
            await session.call_tool("drop_get_stream_then_notify", {"texts": ["6", "7"]})
            assert await take(2) == ["6", "7"]
            waited = time.monotonic() - started
            await session.call_tool("notify", {"texts": ["8"]})
            assert await take(1) == ["8"]
            replays = (await session.call_tool("replays")).structured_content
    send.close()
    # Nothing arrived twice (a repeat would have come before a later text, or be left here).
    assert [text async for text in receive] == []
    # Each drop was resumed from the last text the client had, not reopened from nothing.
    assert replays is not None and len(replays["result"]) == 2, replays
    assert waited >= retry_ms / 1000 * 0.95, waited
