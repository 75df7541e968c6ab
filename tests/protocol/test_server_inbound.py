"""The server helper reading its client's messages: lines off a pipe, and large read answers parsed."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import pydantic_core
import pytest

from jupyter_fsbroker.protocol.server.inbound import LineProtocol, loads

CONTENT = base64.b64encode(os.urandom(300_000)).decode("ascii")


def answer(result: str, content: str = CONTENT) -> bytes:
    """A response whose result is *result* with each ``@`` replaced by *content*."""
    return ('{"jsonrpc":"2.0","id":7,"result":' + result.replace("@", content) + "}").encode()


READ = '{"content":"@","encoding":"base64","size":300000,"offset":0,"bytesRead":300000,"eof":true}'


@pytest.mark.parametrize(
    "line",
    [
        answer(READ),  # the project's own client: content last
        answer('{"encoding":"base64","content":"@","size":1}'),  # content first
        answer('{"content":"@"}'),
        # Not spliced, and parsed all the same:
        answer('{"content":"@","mimeType":"a\\u0062c"}'),  # an escape after it
        answer('{"_meta":{"content":"x"},"content":"@"}'),  # two content tokens
        answer('{"\\u0063ontent":"","_meta":{"content":"@"}}'),  # the key spelled escaped
        answer('{"_meta":{"content":"@"},"content":""}'),
        answer('{"_meta":{"content":"@"}}'),  # not result's
        answer('{"content":"@"}', "x" * 100_000),  # not base64
        answer('{"content":"@=="}'),  # not valid base64
        answer('{"content":"@\\n"}'),  # text with an escape
        answer('{"content":"@"}', CONTENT[:1000]),  # small
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"content":"%s"}}' % CONTENT.encode(),
        b'["content":"%s"]' % CONTENT.encode(),  # not JSON
        answer('{"content":"@"'),  # not JSON (unclosed)
        answer('{"content":"@'),  # no closing quote
        answer('{"content":"@","size":01}'),  # not JSON after the content
        answer('{"content":"@","size":1}') + b"x",
    ],
    ids=lambda line: str(len(line)),
)
def test_loads_gives_what_the_json_parser_gives(line: bytes) -> None:
    try:
        expected: Any = pydantic_core.from_json(line)
    except ValueError:
        with pytest.raises(ValueError):
            loads(line)
        return
    assert loads(line) == expected


def test_the_content_of_a_large_read_is_the_same_string() -> None:
    parsed = loads(answer(READ))
    assert parsed["result"]["content"] == CONTENT
    assert type(parsed["result"]["content"]) is str
    assert parsed["result"]["bytesRead"] == 300_000 and parsed["id"] == 7


class _Transport(asyncio.ReadTransport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = 0
        self.resumed = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1


async def _lines(protocol: LineProtocol) -> list[bytes | str]:
    out: list[bytes | str] = []
    while (line := await protocol.next_line()) is not None:
        out.append(line if isinstance(line, bytes) else f"error: {line}")
    return out


@pytest.mark.parametrize("piece", [1, 3, 7, 64, 10_000])
def test_lines_are_framed_whatever_pieces_they_arrive_in(piece: int) -> None:
    data = b'{"a":1}\n\n  \n{"b":"' + b"x" * 5000 + b'"}\n{"c":3}'  # blank lines skipped, last unended

    async def run() -> list[bytes | str]:
        protocol = LineProtocol(1 << 20)
        protocol.connection_made(_Transport())
        for start in range(0, len(data), piece):
            protocol.data_received(data[start : start + piece])
        protocol.eof_received()
        return await _lines(protocol)

    assert asyncio.run(run()) == [b'{"a":1}', b'{"b":"' + b"x" * 5000 + b'"}', b'{"c":3}']


@pytest.mark.parametrize("piece", [5, 40, 1000])
def test_a_line_over_the_limit_is_dropped_and_reported(piece: int) -> None:
    data = b'{"a":1}\n' + b"y" * 100 + b'\n{"b":2}\n' + b"z" * 100

    async def run() -> list[bytes | str]:
        protocol = LineProtocol(50)
        protocol.connection_made(_Transport())
        for start in range(0, len(data), piece):
            protocol.data_received(data[start : start + piece])
        protocol.connection_lost(None)
        return await _lines(protocol)

    dropped = "error: a message longer than 50 bytes was dropped"
    assert asyncio.run(run()) == [b'{"a":1}', dropped, b'{"b":2}']


def test_reading_pauses_while_many_lines_wait() -> None:
    async def run() -> tuple[int, int, int]:
        protocol = LineProtocol(1 << 20)
        transport = _Transport()
        protocol.connection_made(transport)
        protocol.data_received(b'{"n":1}\n' * 100)
        paused = transport.paused
        for _ in range(100):
            assert await protocol.next_line() == b'{"n":1}'
        return paused, transport.paused, transport.resumed

    assert asyncio.run(run()) == (1, 1, 1)


def test_a_waiting_reader_wakes_for_a_line_and_for_the_end() -> None:
    async def run() -> list[bytes | str]:
        protocol = LineProtocol(1 << 20)
        protocol.connection_made(_Transport())
        task = asyncio.ensure_future(_lines(protocol))
        await asyncio.sleep(0)
        protocol.data_received(b'{"a":')
        await asyncio.sleep(0)
        protocol.data_received(b"1}\n")
        await asyncio.sleep(0)
        protocol.eof_received()
        return await task

    assert asyncio.run(run()) == [b'{"a":1}']
