"""A folder of names that are not valid UTF-8, served over the real transports (stdio and HTTP).

Before the fix, listing such a folder put a name no JSON encoder can write into
the reply: the transport failed to serialise it, the connection died, and every
later request failed. ``tests/core/test_undecodable.py`` checks the broker's
answers; this test sends the same requests from a real server process over both
transports and checks what arrives there: plain and recursive listings carrying
the names readable with ``undecodableName``, ``files/stat`` and ``files/read`` by
the path the listing gave (NOT_FOUND), a watch event for a new such file, and
the connection still serving afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import ServerConnection, open_connection
from tests.protocol.servers.harness import HttpServer, ok, payload, send, stdio_options
from tests.support.brokers import ALL_OPS, make_broker

pytestmark = pytest.mark.anyio

# Latin-1 "café" as a folder, a file inside it, and a Latin-1 "résumé.txt".
CAFE = b"caf\xe9"
RESUME = b"r\xe9sum\xe9.txt"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    raw = os.fsencode(folder)
    os.mkdir(os.path.join(raw, CAFE))
    with open(os.path.join(raw, CAFE, b"menu.txt"), "wb") as f:
        f.write(b"soup")
    with open(os.path.join(raw, RESUME), "wb") as f:
        f.write(b"odd")
    (folder / "plain.txt").write_text("plain\n")
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, coalesce=0.01) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


def entries(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["path"]: entry for entry in result["entries"]}


async def next_change(conn: ServerConnection) -> dict[str, Any]:
    method = "notifications/files/changed"
    got = payload(await conn.call_tool("next_notification", {"method": method, "timeout": 10}, timeout=30))
    assert "params" in got, "no change notification arrived"
    return got["params"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_undecodable_names_over_a_real_transport(
    broker: Broker, data: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    where = stdio_options() if transport == "stdio" else {"url": request.getfixturevalue("http").url}
    async with open_connection(broker, "odd-names", **where) as conn:
        plain = entries(await ok(conn, "files/list", {"path": "data"}))
        assert set(plain) == {"data/caf\ufffd", "data/r\ufffdsum\ufffd.txt", "data/plain.txt"}
        assert plain["data/caf\ufffd"]["undecodableName"] is True
        assert plain["data/caf\ufffd"]["type"] == "directory"
        assert plain["data/r\ufffdsum\ufffd.txt"]["undecodableName"] is True
        assert plain["data/r\ufffdsum\ufffd.txt"]["size"] == 3
        assert "undecodableName" not in plain["data/plain.txt"]

        deep = entries(await ok(conn, "files/list", {"path": "data", "recursive": True}))
        assert deep["data/caf\ufffd/menu.txt"]["undecodableName"] is True
        assert len(deep) == 4

        for path in ("data/r\ufffdsum\ufffd.txt", "data/caf\ufffd/menu.txt"):
            for method in ("files/stat", "files/read"):
                outcome = await send(conn, method, {"path": path})
                assert outcome["error"]["code"] == -32102, (method, path, outcome)
                assert outcome["error"]["data"]["error"] == "NOT_FOUND"

        await ok(conn, "files/watch", {"path": "data", "recursive": True})
        with open(os.path.join(os.fsencode(data), b"new\xff.bin"), "wb") as f:
            f.write(b"x")
        change = await next_change(conn)
        assert change["path"] == "data/new\ufffd.bin"
        assert change["undecodableName"] is True

        # Still serving, on the same connection.
        read = await ok(conn, "files/read", {"path": "data/plain.txt"})
        assert read["content"] == "plain\n"
        assert conn.state == "open"
