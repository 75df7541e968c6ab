"""Server-sent events: the fields a resumption needs, and a call whose stream the server closed."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import open_connection
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
