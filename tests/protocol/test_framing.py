"""Reading what a server sends: valid messages, malformed ones and the answers they are owed."""

from __future__ import annotations

import base64
import json
import os

import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from jupyter_fsbroker.core.buffers import BufferPool
from jupyter_fsbroker.protocol.framing import (
    MAX_MESSAGE_BYTES,
    LentMessage,
    MalformedMessage,
    encode_message,
    encode_outgoing,
    encode_response,
    parse_message,
    read_id,
    too_large,
)
from jupyter_fsbroker.protocol.transports.sse import EventStream


def malformed(data: bytes) -> MalformedMessage:
    item = parse_message(data)
    assert isinstance(item, MalformedMessage), item
    return item


def test_valid_messages_become_session_messages() -> None:
    request = parse_message(b'{"jsonrpc":"2.0","id":7,"method":"files/read","params":{"path":"data/x"}}')
    assert isinstance(request, SessionMessage) and isinstance(request.message, JSONRPCRequest)
    assert (request.message.id, request.message.params) == (7, {"path": "data/x"})
    note = parse_message(b'{"jsonrpc":"2.0","method":"notifications/x"}')
    assert isinstance(note, SessionMessage) and isinstance(note.message, JSONRPCNotification)
    answer = parse_message(b'{"jsonrpc":"2.0","id":"a","result":{"ok":true}}')
    assert isinstance(answer, SessionMessage) and isinstance(answer.message, JSONRPCResponse)
    error = parse_message(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}')
    assert isinstance(error, SessionMessage) and isinstance(error.message, JSONRPCError)
    # A surrogate pair is one character, not a lone surrogate.
    emoji = parse_message(b'{"jsonrpc":"2.0","id":8,"method":"m","params":{"p":"\\ud83d\\ude00"}}')
    assert isinstance(emoji, SessionMessage) and emoji.message.params == {"p": "\U0001f600"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("data", "code", "request_id", "reason"),
    [
        (b"nope", -32700, None, "not_json"),
        (b'{"id": 1, "method": "x"', -32700, None, "not_json"),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', -32600, 1, "params_not_object"),
        (b'{"jsonrpc":"2.0","id":"s","method":"x","params":"p"}', -32600, "s", "params_not_object"),
        (b'{"jsonrpc":"2.0","id":2,"method":"x","params":{"p":"\\ud800"}}', -32600, 2, "lone_surrogate"),
        (b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"p":"\xff"}}', -32600, 3, "invalid_utf8"),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600, None, "bad_id"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', -32600, None, "bad_id"),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', -32600, None, "bad_id"),
        (b'{"jsonrpc":"1.0","id":4,"method":"x"}', -32600, 4, "bad_version"),
        (b'{"jsonrpc":"2.0","id":5,"method":5}', -32600, 5, "bad_method"),
        (b"[]", -32600, None, "not_an_object"),
        (b"42", -32600, None, "not_an_object"),
        (b'{"jsonrpc":"2.0","id":6}', -32600, 6, "invalid_request"),
        (b'{"jsonrpc":"2.0","method":"notifications/x","params":[]}', -32600, None, "params_not_object"),
    ],
)
def test_what_is_not_a_valid_request_is_answered(
    data: bytes, code: int, request_id: object, reason: str
) -> None:
    item = malformed(data)
    assert (item.code, item.request_id, item.reason) == (code, request_id, reason)
    assert item.reply is not None
    reply = json.loads(item.reply.model_dump_json(by_alias=True, exclude_unset=True))
    assert reply == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": str(item), "data": {"reason": reason}},
    }


@pytest.mark.parametrize("depth", [300, 100_000])
def test_nesting_deeper_than_the_parser_allows_is_answered_with_the_id(depth: int) -> None:
    nested = "[" * depth + "]" * depth
    before = malformed(f'{{"jsonrpc":"2.0","id":9,"method":"x","params":{{"a":{nested}}}}}'.encode())
    assert (before.code, before.request_id, before.reason) == (-32600, 9, "too_deep")
    after = malformed(
        f'{{"jsonrpc":"2.0","method":"x","params":{{"a":{nested},"id":1}},"id":"late"}}'.encode()
    )
    assert (after.code, after.request_id) == (-32600, "late")


def test_a_broken_answer_fails_its_call_and_is_never_answered() -> None:
    failed = parse_message(b'{"jsonrpc":"2.0","id":11,"result":[1]}')
    assert isinstance(failed, SessionMessage) and isinstance(failed.message, JSONRPCError)
    assert (failed.message.id, failed.message.error.code) == (11, -32600)
    surrogate = parse_message(b'{"jsonrpc":"2.0","id":12,"result":{"text":"\\udc80"}}')
    assert isinstance(surrogate, SessionMessage) and isinstance(surrogate.message, JSONRPCError)
    assert surrogate.message.id == 12
    nobody = malformed(b'{"jsonrpc":"2.0","id":[1],"result":{}}')
    assert nobody.reply is None


def test_a_message_too_long_is_answered_from_its_beginning() -> None:
    head = b'{"jsonrpc":"2.0","id":21,"method":"files/write","params":{"content":"AAAA'
    item = too_large(head, MAX_MESSAGE_BYTES + 1)
    assert (item.code, item.request_id, item.reason) == (-32600, 21, "message_too_large")
    assert item.reply is not None
    assert too_large(b'{"jsonrpc":"2.0","id":22,"result":{"x":"AAA', MAX_MESSAGE_BYTES + 1).reply is None


def test_ids_and_encoding() -> None:
    assert [read_id(v) for v in (1, "a", True, 1.5, None, [1])] == [1, "a", None, None, None, None]
    assert (
        encode_message({"jsonrpc": "2.0", "id": 1, "result": {"é": "x"}})
        == '{"jsonrpc":"2.0","id":1,"result":{"é":"x"}}'.encode()
    )
    with pytest.raises(ValueError):
        encode_message({"jsonrpc": "2.0", "id": 1, "result": {"name": "\udc80"}})


def test_a_base64_read_is_spliced_in_and_reads_the_same() -> None:
    content = base64.b64encode(bytes(range(256)) * 64).decode()
    for body in (
        {"content": content, "encoding": "base64", "size": 1, "eof": True},
        {"content": content, "encoding": "base64"},
        {"content": "é" * 5000, "encoding": "utf-8"},
        {"content": content[:100], "encoding": "base64"},
    ):
        spliced = encode_response(3, "result", body)
        assert json.loads(spliced) == {"jsonrpc": "2.0", "id": 3, "result": body}
    error = {"code": -32102, "message": "no", "data": {"reason": "x"}}
    assert json.loads(encode_response("a", "error", error)) == {"jsonrpc": "2.0", "id": "a", "error": error}


def test_a_continuations_read_contents_are_spliced_in_and_the_message_reads_the_same() -> None:
    content = base64.b64encode(bytes(range(256)) * 64).decode()
    answers = [
        {"id": "0", "result": {"content": content, "encoding": "base64", "size": 1, "eof": True}},
        {"id": "1", "result": {"content": "é" * 5000, "encoding": "utf-8"}},
        {"id": "2", "error": {"code": -31102, "message": "no", "data": {"reason": "x"}}},
        {"id": "3", "result": {"content": content[::-1].replace("=", "A"), "encoding": "base64"}},
        {"id": "4", "result": {"content": 'x"}' * 3000, "encoding": "base64"}},  # not base64: escaped
    ]
    meta = {
        "io.github.jupyter-fsbroker/files": {"connection": "c_x", "continuation": "t", "answers": answers}
    }
    messages = [
        JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={"name": "t", "_meta": meta}),
        JSONRPCRequest(jsonrpc="2.0", id=8, method="tools/call", params={"name": "t", "arguments": {}}),
        JSONRPCRequest(jsonrpc="2.0", id=9, method="tools/list"),
        JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
    ]
    for message in messages:
        # Byte for byte what pydantic writes, whatever is spliced in.
        assert encode_outgoing(message) == message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    assert json.loads(encode_outgoing(messages[0]))["params"]["_meta"] == meta


def test_a_large_continuation_is_encoded_in_a_lent_buffer_the_next_one_reuses() -> None:
    content = base64.b64encode(os.urandom(768 * 1024)).decode()
    answers = [{"id": str(n), "result": {"content": content, "encoding": "base64"}} for n in range(2)]
    meta = {
        "io.github.jupyter-fsbroker/files": {"connection": "c_x", "continuation": "t", "answers": answers}
    }
    message = JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={"name": "t", "_meta": meta})
    pool = BufferPool()
    lent = encode_outgoing(message, buffers=pool)
    assert isinstance(lent, LentMessage)
    assert bytes(lent.view) == encode_outgoing(message)
    lent.release()
    again = encode_outgoing(message, buffers=pool)
    assert isinstance(again, LentMessage) and pool.made == 1, "the second continuation reused the buffer"
    again.release()
    # A continuation with nothing large in it is plain bytes, lent nothing.
    small = JSONRPCRequest(jsonrpc="2.0", id=8, method="tools/call", params={"name": "t", "arguments": {}})
    assert isinstance(encode_outgoing(small, buffers=pool), bytes)


def test_server_sent_events_are_split_on_any_line_ending_across_chunks() -> None:
    stream = EventStream()
    got: list[object] = []
    for chunk in (
        b"event: message\r",
        b'\ndata: {"a":',
        b"1}\r\n\r\n",
        b": comment\n",
        b"data: x\rdata: y\r\r",
        b"\n",  # completes the CR LF that ends the event
    ):
        got += stream.feed(chunk)
    assert got == [b'{"a":1}', b"x\ny"]
    # Events of another type are not messages.
    assert stream.feed(b"event: ping\ndata: 1\n\n") == []


def test_a_server_sent_event_too_long_is_dropped() -> None:
    stream = EventStream()
    head = b'data: {"jsonrpc":"2.0","id":5,"method":"files/write","params":{"content":"'
    got: list[object] = list(stream.feed(head))
    piece = b"A" * (1 << 20)
    for _ in range(MAX_MESSAGE_BYTES // len(piece) + 1):
        got += stream.feed(piece)
    got += stream.feed(b'"}}\n\ndata: {"ok":1}\n\n')
    [dropped, after] = got
    assert isinstance(dropped, MalformedMessage) and dropped.request_id == 5
    assert after == b'{"ok":1}'
