"""A hostile server's malformed messages, over real transports: each request gets exactly one answer.

The server (``servers/hostile.py``) writes the bytes itself: lines that are
not JSON, JSON that is not a valid request (params that are an array or a
string, lone surrogates, ids of the wrong type, nesting deeper than any
parser allows, invalid UTF-8), and valid requests with bad params (wrong
types, huge and negative numbers, 1 MB strings, NUL and control characters,
bogus lock, watch and cursor ids). PROTOCOL.md's Errors: ``-32700`` with
``id: null`` for what is not JSON, ``-32600`` with the request's id whenever
one can be read, a ``files/*`` error for bad params, never ``-32603``; the
connection goes on, and nothing outside the roots changes.
"""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import open_connection
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.handover import HandedOverServer

HOSTILE = str(Path(__file__).resolve().parent / "servers" / "hostile.py")
NULL = None


@dataclass(frozen=True)
class Case:
    """One message the server sends, and the answer PROTOCOL.md wants for it."""

    raw: bytes
    code: int | str | None  # None: a result; "any": a result or any error but -32603
    answer_id: Any = NULL  # the id the answer must carry
    http: bool = True  # whether it can travel as a server-sent event


def request_line(request_id: Any, method: str, params: Any = None, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


CASES = [
    # Not JSON: -32700 with a null id.
    Case(b"not json at all", -32700),
    Case(b'{"jsonrpc":"2.0","id":1,"method":"files/stat","params":{"path":"data"}', -32700),
    Case(b"\x00\x01\x02", -32700),
    # JSON, but not a valid request: -32600, with the id when it can be read.
    Case(request_line(101, "files/read", [1, 2]), -32600, 101),
    Case(request_line(102, "files/read", "data/hello.txt"), -32600, 102),
    Case(
        b'{"jsonrpc":"2.0","id":103,"method":"files/read","params":{"path":"data/\\ud800.txt"}}', -32600, 103
    ),
    Case(b'{"jsonrpc":"2.0","id":"s","method":"files/read","params":{"path":"\\udc80"}}', -32600, "s"),
    Case(b'{"jsonrpc":"2.0","id":104,"method":"files/\\udfff"}', -32600, 104),
    Case(
        b'{"jsonrpc":"2.0","id":105,"method":"files/read","params":{"path":"data/hello.txt","x":'
        + deep(300).encode()
        + b"}}",
        -32600,
        105,
    ),
    Case(
        b'{"jsonrpc":"2.0","method":"files/read","params":{"x":' + deep(100_000).encode() + b'},"id":106}',
        -32600,
        106,
    ),
    Case(
        b'{"jsonrpc":"2.0","id":107,"method":"files/stat","params":{"path":"data/\xff\xfe"}}',
        -32600,
        107,
        False,
    ),
    Case(request_line(True, "files/read", {"path": "data/hello.txt"}), -32600),
    Case(request_line(1.5, "files/stat", {"path": "data"}), -32600),
    Case(request_line(None, "files/stat", {"path": "data"}), -32600),
    Case(request_line({"an": "object"}, "files/stat", {"path": "data"}), -32600),
    Case(
        json.dumps(
            [{"jsonrpc": "2.0", "id": 108, "method": "files/stat", "params": {"path": "data"}}]
        ).encode(),
        -32600,
    ),
    Case(b'"just a string"', -32600),
    Case(b"{}", -32600),
    Case(request_line(109, "files/stat", {"path": "data"}, jsonrpc="1.0"), -32600, 109),
    Case(request_line(110, 42), -32600, 110),  # type: ignore[arg-type]
    Case(request_line(111, "roots/list", []), -32600, 111),
    Case(b'{"jsonrpc":"2.0","method":"notifications/whatever","params":[1]}', -32600),
    Case(request_line("abc", "files/read", []), -32600, "abc"),
    # A malformed answer to nothing the client asked: never answered.
    Case(b'{"jsonrpc":"2.0","id":999999,"result":[1]}', None, "no answer"),
    # Valid requests with bad params: the files/* errors, never -32603.
    Case(request_line(201, "files/read", {"path": 5}), -32602, 201),
    Case(request_line(202, "files/read", {}), -32602, 202),
    Case(request_line(203, "files/read", {"path": "data/hello.txt", "length": -1}), -32602, 203),
    Case(request_line(204, "files/read", {"path": "data/hello.txt", "offset": 10**30}), -32602, 204),
    Case(request_line(205, "files/read", {"path": "data/hello.txt", "offset": "0"}), -32602, 205),
    Case(
        request_line(206, "files/read", {"path": "data/hello.txt", "encoding": "no-such-codec"}), -32602, 206
    ),
    Case(request_line(207, "files/read", {"path": "data/hello.txt", "keepLocked": "yes"}), -32602, 207),
    Case(request_line(208, "files/read", {"path": "data/a\u0000b"}), -32101, 208),
    Case(request_line(209, "files/read", {"path": "data/\u0001\u001f\u007f"}), -32102, 209),
    Case(request_line(210, "files/read", {"path": "data/" + "a" * 1_000_000}), "any", 210),
    Case(request_line(211, "files/write", {"path": "data/../outside.txt", "content": "x"}), -32101, 211),
    Case(request_line(212, "files/write", {"path": "/etc/fsbroker-test", "content": "x"}), -32101, 212),
    Case(request_line(213, "files/unlock", {"lockId": "lock_" + "f" * 32}), -32102, 213),
    Case(request_line(214, "files/unlock", {"lockId": 5}), -32602, 214),
    Case(request_line(215, "files/unwatch", {"watchId": "w_bogus"}), -32102, 215),
    Case(request_line(216, "files/list", {"path": "data", "cursor": "garbage"}), -32602, 216),
    Case(request_line(217, "files/list", {"path": "data", "maxEntries": 10**20}), "any", 217),
    Case(request_line(218, "files/frobnicate", {"path": "data"}), -32601, 218),
    Case(
        request_line(219, "files/write", {"path": "data/x.txt", "content": ["not", "a", "string"]}),
        -32602,
        219,
    ),
    Case(request_line(220, "files/stat", {"path": "data/hello.txt", "extra": {"deep": deep(50)}}), None, 220),
    Case(request_line(221, "files/read", {"path": "data/hello.txt", "lockId": "lock_bogus"}), -32102, 221),
    # And one that is fine: the connection is still serving.
    Case(request_line(222, "files/read", {"path": "data/hello.txt"}), None, 222),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("hello\n")
    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


@pytest.fixture
def http_url() -> Iterator[str]:
    with HandedOverServer([sys.executable, HOSTILE]) as server:
        yield server.url


def check(cases: list[Case], answers: list[dict[str, Any]]) -> None:
    """Every request got exactly one answer, with the code and id PROTOCOL.md says."""
    by_id: dict[Any, list[dict[str, Any]]] = {}
    nulls: list[dict[str, Any]] = []
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0", answer
        assert "method" not in answer, answer
        assert ("result" in answer) != ("error" in answer), answer
        if answer["id"] is None:
            nulls.append(answer)
        else:
            by_id.setdefault(answer["id"], []).append(answer)
    duplicates = {key: len(got) for key, got in by_id.items() if len(got) != 1}
    assert duplicates == {}, f"answered more than once: {duplicates}"
    expected_ids = {case.answer_id for case in cases if case.answer_id not in (NULL, "no answer")}
    assert set(by_id) == expected_ids
    assert len(nulls) == sum(1 for case in cases if case.answer_id is NULL), nulls
    for case in cases:
        if case.answer_id in (NULL, "no answer"):
            continue
        [answer] = by_id[case.answer_id]
        if case.code is None:
            assert "result" in answer, (case.raw[:200], answer)
            continue
        if case.code == "any" and "result" in answer:
            continue
        assert "error" in answer, (case.raw[:200], answer)
        error = answer["error"]
        assert error["code"] != -32603, (case.raw[:200], error)
        if case.code != "any":
            assert error["code"] == case.code, (case.raw[:200], error)
        assert isinstance(error["message"], str) and error["message"]
        assert isinstance(error["data"]["reason"], str), error
    for answer in nulls:
        assert answer["error"]["code"] in (-32700, -32600), answer
    expected_codes = Counter(case.code for case in cases if case.answer_id is NULL)
    assert Counter(answer["error"]["code"] for answer in nulls) == expected_codes


async def attack(conn: Any, cases: list[Case], *, huge: int = 0) -> list[dict[str, Any]]:
    lines = [base64.b64encode(case.raw).decode() for case in cases]
    expect = sum(1 for case in cases if case.answer_id != "no answer") + (1 if huge else 0)
    result = await conn.call_tool("attack", {"lines": lines, "expect": expect, "huge": huge}, timeout=180)
    assert result["isError"] is False, result
    return json.loads(result["content"][0]["text"])["answers"]  # type: ignore[no-any-return]


async def answered_twice(conn: Any, cases: list[Case]) -> None:
    """Every case gets exactly one answer; then the connection survives, and answers again the same way."""
    check(cases, await attack(conn, cases))
    again = cases[:3] + cases[-1:]
    check(again, await attack(conn, again))
    assert conn.state == "open"


def assert_nothing_written(tmp_path: Path) -> None:
    """Nothing appeared beside the root, nor in it."""
    assert not (tmp_path / "outside.txt").exists()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["hello.txt"]


@pytest.mark.anyio
async def test_over_stdio_every_malformed_request_gets_exactly_one_answer(
    broker: Broker, tmp_path: Path
) -> None:
    async with open_connection(broker, "hostile", command=sys.executable, args=[HOSTILE]) as conn:
        await answered_twice(conn, CASES)
    assert_nothing_written(tmp_path)


@pytest.mark.anyio
async def test_over_http_every_malformed_event_gets_exactly_one_answer(
    broker: Broker, tmp_path: Path, http_url: str
) -> None:
    cases = [case for case in CASES if case.http]
    async with open_connection(broker, "hostile", url=http_url, keepalive=None) as conn:
        await answered_twice(conn, cases)
    assert_nothing_written(tmp_path)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_message_longer_than_any_is_dropped_and_answered(
    broker: Broker, transport: str, request: pytest.FixtureRequest
) -> None:
    from jupyter_fsbroker.protocol.framing import MAX_MESSAGE_BYTES

    # The server sends it first: a files/write (id 301) of more than MAX_MESSAGE_BYTES.
    dropped = Case(b"", -32600, 301)
    cases = [Case(request_line(302, "files/read", {"path": "data/hello.txt"}), None, 302)]
    where: dict[str, Any] = (
        {"command": sys.executable, "args": [HOSTILE]}
        if transport == "stdio"
        else {"url": request.getfixturevalue("http_url"), "keepalive": None}
    )
    async with open_connection(broker, "hostile", **where) as conn:
        check([dropped, *cases], await attack(conn, cases, huge=MAX_MESSAGE_BYTES))
        assert conn.state == "open"
