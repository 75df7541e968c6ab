"""The server helper reading its client's messages: lines off a pipe into a kept buffer, parsed."""

from __future__ import annotations

import asyncio
import base64
import fcntl
import os
import struct
import termios
import threading
import time
from collections.abc import Callable
from typing import Any

import pydantic_core
import pytest

from jupyter_fsbroker.serverkit import inbound
from jupyter_fsbroker.serverkit.inbound import LineReader, parse_line
from jupyter_fsbroker.serverkit.lenient import is_base64

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
def test_parse_line_gives_what_the_json_parser_gives(line: bytes) -> None:
    # Also where the line is a part of a larger buffer (the reader's), between other bytes.
    framed = bytearray(b'{"x":1}\n' + line + b"\n{}")
    try:
        expected: Any = pydantic_core.from_json(line)
    except ValueError:
        for args in ((line,), (framed, 8, 8 + len(line))):
            with pytest.raises(ValueError):
                parse_line(*args)
        return
    assert parse_line(line) == expected
    assert parse_line(framed, 8, 8 + len(line)) == expected


def test_the_content_of_a_large_read_is_the_same_string() -> None:
    parsed = parse_line(answer(READ))
    assert parsed["result"]["content"] == CONTENT
    assert type(parsed["result"]["content"]) is str
    assert parsed["result"]["bytesRead"] == 300_000 and parsed["id"] == 7


@pytest.mark.parametrize(
    "bad",
    [
        "QQ==" + "QUJD" * 20_000,
        "QUJD" * 16_383 + "QQ==" + "QUJD" * 10_000,
        "QUJD" * 20_000 + "QQ=",
        "QUJD" * 30_000 + "Q",
    ],
    ids=["padding-first", "padding-at-a-slice-end", "short", "one-extra"],
)
def test_base64_with_padding_inside_or_a_bad_length_is_not_spliced(bad: str) -> None:
    line = answer('{"content":"@"}', bad)
    assert parse_line(line) == pydantic_core.from_json(line)
    assert not is_base64(bad)


def test_an_answer_the_decoder_wants_gets_its_base64_content_as_bytes() -> None:
    wanted = [7]

    def decode(message: Any) -> bool:  # what DirectChannel.wants_bytes does
        return message.get("id") in wanted

    parsed = parse_line(answer(READ), decode=decode)["result"]
    assert parsed["content"] == base64.b64decode(CONTENT) and parsed["bytesRead"] == 300_000
    wanted.clear()
    assert parse_line(answer(READ), decode=decode) == pydantic_core.from_json(answer(READ))  # not asked: text
    wanted.append(7)
    # Content the answer says is text, or that is no base64: as the JSON parser gives it.
    for line in (answer('{"content":"@","encoding":"utf-8"}'), answer('{"content":"@"}', "QQ==" * 30_000)):
        assert parse_line(line, decode=decode) == pydantic_core.from_json(line)


# -- the reader ---------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    """Write *data* to the pipe *fd* (blocking) and close it: the client's side."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


async def _read_all(data: bytes, max_line: int = 64 << 20) -> list[Any]:
    """Everything a reader parses from a pipe a thread writes *data* into, up to the end."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    reader = LineReader(asyncio.get_running_loop(), read_fd, max_line)
    writer = threading.Thread(target=_write_all, args=(write_fd, data))
    writer.start()
    try:
        return [item if not isinstance(item, ValueError) else f"error: {item}" async for item in reader]
    finally:
        writer.join()
        reader.close()
        os.close(read_fd)


@pytest.mark.parametrize("piece", [1, 3, 7, 64, 10_000, 1 << 20])
def test_lines_are_framed_whatever_pieces_they_arrive_in(piece: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbound, "_READ_MAX", piece)  # each read takes at most this many bytes
    data = b'{"a":1}\n\n  \n{"b":"' + b"x" * 5000 + b'"}\n{"c":3}'  # blank lines skipped, last unended
    assert asyncio.run(_read_all(data)) == [{"a": 1}, {"b": "x" * 5000}, {"c": 3}]


@pytest.mark.parametrize("piece", [65_536, 1 << 20])
def test_large_answers_are_parsed_as_the_buffer_grows_and_is_reused(
    piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbound, "_READ_MAX", piece)
    # Read answers of 1.4 MB (1 MiB chunks) between small messages, more than the buffer holds at once.
    big = base64.b64encode(os.urandom(1 << 20)).decode("ascii")
    lines = [
        answer(READ, big).replace(b'"id":7', b'"id":%d' % i) if i % 3 else b'{"n":%d}' % i for i in range(30)
    ]
    expected = [pydantic_core.from_json(line) for line in lines]
    assert asyncio.run(_read_all(b"\n".join(lines) + b"\n")) == expected


@pytest.mark.parametrize("piece", [5, 40, 1000])
def test_a_line_over_the_limit_is_dropped_and_reported(piece: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbound, "_READ_MAX", piece)
    data = b'{"a":1}\n' + b"y" * 100 + b'\n{"b":2}\nnot json\n' + b"z" * 100
    dropped = "error: a message longer than 50 bytes was dropped"
    items = asyncio.run(_read_all(data, max_line=50))
    assert items[:3] == [{"a": 1}, dropped, {"b": 2}]
    assert len(items) == 4 and items[3].startswith("error: ")  # "not json": its parser's error


async def _until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await asyncio.sleep(0.005)


def test_reading_pauses_while_many_messages_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbound, "_READ_MAX", 8)  # one message per read

    async def run() -> tuple[int, int]:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        reader = LineReader(asyncio.get_running_loop(), read_fd, 1 << 20)
        try:
            os.write(write_fd, b'{"n":1}\n' * 100)
            await _until(lambda: reader.waiting == inbound._QUEUE_MESSAGES, "64 messages parsed")
            for _ in range(20):  # turns of the loop in which a reader that did not pause would read
                await asyncio.sleep(0)
            waiting = reader.waiting
            os.close(write_fd)
            taken = [item async for item in reader]
            return waiting, len(taken)
        finally:
            reader.close()
            os.close(read_fd)

    assert asyncio.run(run()) == (inbound._QUEUE_MESSAGES, 100)


def test_a_waiting_reader_wakes_for_a_line_and_for_the_end() -> None:
    async def run() -> list[Any]:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        reader = LineReader(asyncio.get_running_loop(), read_fd, 1 << 20)
        try:
            task = asyncio.ensure_future(_collect(reader))
            os.write(write_fd, b'{"a":')
            await _until(lambda: not _pipe_holds(read_fd), "the first piece read")
            os.write(write_fd, b"1}\n")
            await _until(lambda: not _pipe_holds(read_fd), "the second piece read")
            assert not task.done()
            os.close(write_fd)
            return await asyncio.wait_for(task, 10)
        finally:
            reader.close()
            os.close(read_fd)

    assert asyncio.run(run()) == [{"a": 1}]


async def _collect(reader: LineReader) -> list[Any]:
    return [item async for item in reader]


def _pipe_holds(fd: int) -> int:
    """Bytes written to the pipe and not yet read."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_the_buffer_is_kept_while_messages_come_and_given_back_once_they_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inbound, "_IDLE", 0.2)
    line = answer(READ) + b"\n"

    async def run() -> tuple[int, int, int]:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        reader = LineReader(asyncio.get_running_loop(), read_fd, 1 << 20)
        sizes = []
        try:
            for _ in range(3):
                writer = threading.Thread(target=os.write, args=(write_fd, line))  # larger than the pipe
                writer.start()
                assert (await anext(reader))["result"]["content"] == CONTENT
                writer.join()
                sizes.append(reader.buffer_size)
            await _until(lambda: reader.buffer_size == 0, "the buffer given back")
            writer = threading.Thread(target=os.write, args=(write_fd, line))
            writer.start()
            assert (await anext(reader))["result"]["content"] == CONTENT  # a new one for the next
            writer.join()
            return sizes[0], len(set(sizes)), reader.buffer_size
        finally:
            os.close(write_fd)
            reader.close()
            os.close(read_fd)

    first, distinct, again = asyncio.run(run())
    assert first >= len(line) and distinct == 1  # one buffer for every line of that size
    assert again >= len(line)
