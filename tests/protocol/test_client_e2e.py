"""End to end over both real transports: an mcp 2.3 server (stdio subprocess, uvicorn) drives every method.

The server (``servers/fs_server.py``) sends raw ``files/*`` requests from its
tools and returns what it got back; the client under test answers them through
a real broker.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core import ops
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, Consenter, ConsentRequest
from jupyter_fsbroker.core.errors import FileLocked
from jupyter_fsbroker.protocol import ServerConnection, open_connection
from tests.protocol.servers.harness import (
    HeldConsenter,
    HttpServer,
    approve_all,
    ok,
    payload,
    send,
    stdio_options,
    temp_files,
)

MiB = 1024 * 1024
TRANSPORTS = ["stdio", "http"]


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


def options(transport: str, http: HttpServer) -> dict[str, Any]:
    return stdio_options() if transport == "stdio" else {"url": http.url}


@asynccontextmanager
async def connected(
    broker: Broker,
    transport: str,
    http: HttpServer,
    name: str = "analysis",
    consenter: Consenter | None = None,
) -> AsyncIterator[ServerConnection]:
    async with open_connection(
        broker, name, consenter=consenter or approve_all(), **options(transport, http)
    ) as conn:
        yield conn


async def fails(
    conn: ServerConnection, method: str, params: Any, code: int, name: str | None = None
) -> dict[str, Any]:
    outcome = await send(conn, method, params)
    assert "error" in outcome, outcome
    error = outcome["error"]
    assert error["code"] == code, error
    assert error["data"].get("error") == name, error
    return error  # type: ignore[no-any-return]


async def next_notification(conn: ServerConnection, method: str) -> Any:
    got = payload(await conn.call_tool("next_notification", {"method": method, "timeout": 10}, timeout=30))
    assert "params" in got, f"no {method} arrived"
    return got["params"]


@pytest.mark.anyio
async def test_the_handshake_advertises_brokering_and_names_both_sides(
    broker: Broker, transport: str, http: HttpServer
) -> None:
    async with connected(broker, transport, http, name="my analysis") as conn:
        assert conn.state == "open"
        assert conn.transport == transport
        assert conn.name == "my analysis"
        assert conn.server_info == {"name": "fs-test-server", "version": "1.2.3"}
        assert (conn.server_name, conn.server_version) == ("fs-test-server", "1.2.3")
        assert conn.protocol_version == "2025-11-25"
        assert "tools" in conn.server_capabilities
        assert {tool["name"] for tool in conn.tools} == {
            "request",
            "requests",
            "initialize_params",
            "next_notification",
            "info",
            "http_log",
        }
        assert all("inputSchema" in tool for tool in conn.tools)
        assert await conn.refresh_tools() == conn.tools
        # The core connection carries the user's name, not the server's.
        assert conn.connection.server == "my analysis"
        assert broker.connections() == (conn.connection,)
        # What the server read from the raw initialize params.
        init = payload(await conn.call_tool("initialize_params"))["params"]
        assert init["capabilities"]["roots"] == {
            "listChanged": True,
            "filesystemBrokering": True,
            "filesystemBrokeringFeatures": ["perPathConsent"],
        }
        assert init["protocolVersion"] == "2025-11-25"
        assert init["clientInfo"]["name"] == "jupyter_fsbroker"
        result = await conn.call_tool("info")
        assert set(result) == {"content", "structuredContent", "isError"}
        assert result["content"][0]["type"] == "text"
    assert conn.state == "closed"
    assert conn.close_reason == "closed by the user"
    assert conn.connection.closed
    assert broker.connections() == ()


@pytest.mark.anyio
async def test_every_method_end_to_end(broker: Broker, transport: str, http: HttpServer, data: Path) -> None:
    asked: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        return ConsentDecision.approve_all(request)

    big = bytes(range(256)) * (3 * MiB // 256) + b"tail"
    (data / "big.bin").write_bytes(big)
    text = "añb€c" * 1000
    (data / "text.txt").write_text(text, encoding="utf-8")
    async with connected(broker, transport, http, consenter=CallbackConsenter(decide)) as conn:
        # Nothing before consent.
        denied = await fails(conn, "files/read", {"path": "data/hello.txt"}, -32101, "PERMISSION_DENIED")
        assert denied["data"]["reason"] == "not_granted"
        granted = await ok(
            conn, "files/consent", {"message": "profile", "requestedPaths": ["data"], "operations": ["read"]}
        )
        assert granted == {"granted": True, "approvedPaths": ["data"], "operations": ["read"]}
        assert asked[0].server == "analysis" and asked[0].message == "profile"
        await fails(conn, "files/write", {"path": "data/x.txt", "content": "x"}, -32101, "PERMISSION_DENIED")
        await ok(
            conn,
            "files/consent",
            {
                "message": "all",
                "requestedPaths": ["data"],
                "operations": ["read", "write", "delete", "watch"],
            },
        )

        # Reads: text in chunks that never split a character, binary as base64 in 2 MiB chunks.
        pieces, offset = [], 0
        while True:
            chunk = await ok(conn, "files/read", {"path": "data/text.txt", "offset": offset, "length": 1000})
            pieces.append(chunk["content"])
            offset += chunk["bytesRead"]
            if chunk["eof"]:
                break
        assert "".join(pieces) == text and offset == len(text.encode())
        received, offset = b"", 0
        while offset < len(big):
            chunk = await ok(
                conn,
                "files/read",
                {"path": "data/big.bin", "encoding": "base64", "offset": offset, "length": 2 * MiB},
            )
            assert chunk["size"] == len(big)
            received += base64.b64decode(chunk["content"])
            offset += chunk["bytesRead"]
        assert hashlib.sha256(received).digest() == hashlib.sha256(big).digest()

        # Writes: whole, then a chunked upload committed by its final chunk.
        written = await ok(conn, "files/write", {"path": "data/notes.md", "content": "# notes\n"})
        assert written["bytesWritten"] == 8 and written["etag"]
        assert (data / "notes.md").read_text() == "# notes\n"
        upload = [b"a" * MiB, b"b" * MiB, b"c" * 10]
        at = 0
        for n, part in enumerate(upload):
            params = {
                "path": "data/upload.bin",
                "content": base64.b64encode(part).decode(),
                "encoding": "base64",
                "offset": at,
                "final": n == len(upload) - 1,
            }
            result = await ok(conn, "files/write", params)
            at += len(part)
            assert result["size"] == at
            if n < len(upload) - 1:
                assert not (data / "upload.bin").exists()
        assert (data / "upload.bin").read_bytes() == b"".join(upload)
        assert temp_files(data) == []

        listing = await ok(conn, "files/list", {"path": "data", "recursive": True})
        paths = {entry["path"] for entry in listing["entries"]}
        assert {"data/notes.md", "data/upload.bin", "data/sub", "data/sub/inner.txt"} <= paths
        st = await ok(conn, "files/stat", {"path": "data/notes.md"})
        assert (st["type"], st["size"], st["locked"]) == ("file", 8, False)

        created = await ok(
            conn, "files/create", {"path": "data/d1/d2/f.txt", "type": "file", "parents": True}
        )
        assert created == {"path": "data/d1/d2/f.txt", "type": "file"}
        await fails(conn, "files/create", {"path": "data/notes.md", "type": "file"}, -32103, "ALREADY_EXISTS")
        renamed = await ok(conn, "files/rename", {"path": "data/notes.md", "newPath": "data/d1/notes.md"})
        assert renamed == {"path": "data/d1/notes.md"}
        deleted = await ok(conn, "files/delete", {"path": "data/d1", "recursive": True})
        assert deleted == {"path": "data/d1", "trashed": True}
        assert not (data / "d1").exists()

        # Locks: keepLocked, then unlock; a second connection meanwhile is refused at once.
        kept = await ok(conn, "files/read", {"path": "data/hello.txt", "keepLocked": True})
        other = broker.connect("other")
        try:
            broker.allow("data/hello.txt", ops=("write",))
            with pytest.raises(FileLocked):
                other.handle("files/write", {"path": "data/hello.txt", "content": "x"})
        finally:
            other.close()
        assert (await ok(conn, "files/stat", {"path": "data/hello.txt"}))["locked"] is True
        assert await ok(conn, "files/unlock", {"lockId": kept["lockId"]}) == {"unlocked": True}
        await fails(conn, "files/unlock", {"lockId": kept["lockId"]}, -32102, "NOT_FOUND")

        # Watch: a change on disk arrives at the server as notifications/files/changed.
        watch_id = (await ok(conn, "files/watch", {"path": "data/sub", "recursive": True}))["watchId"]
        (data / "sub" / "fresh.csv").write_text("a,b\n")
        change = await next_notification(conn, "notifications/files/changed")
        assert change["watchId"] == watch_id
        assert change["path"] == "data/sub/fresh.csv"
        assert change["event"] in ("created", "modified")
        assert await ok(conn, "files/unwatch", {"watchId": watch_id}) == {}
        await fails(conn, "files/unwatch", {"watchId": watch_id}, -32102, "NOT_FOUND")

        # Errors keep their codes on the way through.
        await fails(conn, "files/read", {"path": "data/nothing"}, -32102, "NOT_FOUND")
        await fails(conn, "files/read", {"path": "/etc/passwd"}, -32101, "PERMISSION_DENIED")
        await fails(conn, "files/read", {"path": "data/sub"}, -32105, "WRONG_TYPE")
        await fails(conn, "files/read", {"path": "data/bad.txt"}, -32108, "ENCODING_ERROR")
        await fails(conn, "files/read", {}, -32602)
        await fails(conn, "files/teleport", {"path": "data/hello.txt"}, -32601)
        too_large = base64.b64encode(b"x" * (2 * MiB + 1)).decode()
        error = await fails(
            conn,
            "files/write",
            {"path": "data/y", "content": too_large, "encoding": "base64"},
            -32106,
            "TOO_LARGE",
        )
        assert error["data"]["maxBytes"] == 2 * MiB
        assert temp_files(data) == []


def names(*roots: str) -> dict[str, Any]:
    """The ``_meta`` of a ``roots/list`` result that names *roots* (read-write ones)."""
    return {"filesystemBrokering": {"roots": [{"name": root} for root in roots]}}


@pytest.mark.anyio
async def test_roots_list_names_the_roots_and_list_changed_follows(
    broker: Broker, transport: str, http: HttpServer, tmp_path: Path
) -> None:
    async with connected(broker, transport, http) as conn:
        assert await ok(conn, "roots/list") == {"roots": [], "_meta": names("data")}
        extra = tmp_path / "extra folder"
        extra.mkdir()

        # Roots may change on any thread.
        thread = threading.Thread(target=broker.add_root, args=(extra,), kwargs={"name": "extra"})
        thread.start()
        thread.join()
        assert await next_notification(conn, "notifications/roots/list_changed") in (None, {})
        assert await ok(conn, "roots/list") == {"roots": [], "_meta": names("data", "extra")}
        broker.remove_root("extra")
        await next_notification(conn, "notifications/roots/list_changed")
        assert await ok(conn, "roots/list") == {"roots": [], "_meta": names("data")}


@pytest.mark.anyio
async def test_the_locations_go_out_where_the_user_hands_them_over(
    broker: Broker, transport: str, http: HttpServer, data: Path, tmp_path: Path
) -> None:
    extra = tmp_path / "extra folder"
    extra.mkdir()
    broker.add_root(extra, name="extra")
    async with open_connection(broker, "analysis", advertise_roots=True, **options(transport, http)) as conn:
        roots = await ok(conn, "roots/list")
    assert roots == {
        "roots": [
            {"uri": data.resolve().as_uri(), "name": "data"},
            {"uri": extra.resolve().as_uri(), "name": "extra"},
        ],
        "_meta": names("data", "extra"),
    }
    assert "%20" in roots["roots"][1]["uri"]


@pytest.mark.anyio
async def test_a_server_that_uses_files_gets_no_notice_about_the_roots(
    broker: Broker, transport: str, http: HttpServer
) -> None:
    """A brokering server needs the names only: a notice shown meanwhile goes at its first request."""
    async with connected(broker, transport, http) as conn:
        await ok(conn, "roots/list")
        notice = conn.roots_offer.notice
        assert notice is not None and notice.withheld == ("data",)
        refused = await send(conn, "files/stat", {"path": "data/hello.txt"})  # even a refused one
        assert refused["error"]["data"]["reason"] == "not_granted"
        assert conn.roots_offer.notice is None
        await ok(conn, "roots/list")  # asking again, as a broker, brings none back
        assert conn.roots_offer.notice is None
    async with connected(broker, transport, http, name="first-files") as conn:
        await send(conn, "files/stat", {"path": "data/hello.txt"})
        await ok(conn, "roots/list")
        assert conn.roots_offer.notice is None


@pytest.mark.anyio
async def test_many_requests_in_flight_and_a_pending_consent_holds_up_nothing(
    broker: Broker, transport: str, http: HttpServer, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (data / "big.bin").write_bytes(b"\x01" * (2 * MiB))
    broker.allow("data", ops=("read",))
    held = HeldConsenter()

    # The 2 MiB read waits (in the core) until the small reads have been served:
    # if requests were answered one at a time, it would wait in vain.
    small_done = threading.Event()
    waited: list[bool] = []
    real_read_chunk = ops.read_chunk

    def gated_read_chunk(res: Any, **kwargs: Any) -> Any:
        if res.rel == "data/big.bin":
            waited.append(small_done.wait(10))
        chunk = real_read_chunk(res, **kwargs)
        if res.rel == "data/hello.txt":
            small_done.set()
        return chunk

    monkeypatch.setattr(ops, "read_chunk", gated_read_chunk)

    async with connected(broker, transport, http, consenter=held) as conn, anyio.create_task_group() as tg:
        consent_outcome: dict[str, Any] = {}
        consent_answered = anyio.Event()

        async def ask() -> None:
            params = {"message": "please", "requestedPaths": ["data/sub"], "operations": ["write"]}
            consent_outcome.update(await send(conn, "files/consent", params))
            consent_answered.set()

        tg.start_soon(ask)
        request, future = await held.next()
        assert request.server == "analysis"

        requests = [
            {
                "method": "files/read",
                "params": {"path": "data/big.bin", "encoding": "base64", "length": 2 * MiB},
            }
        ]
        requests += [{"method": "files/read", "params": {"path": "data/hello.txt"}} for _ in range(40)]
        requests += [{"method": "files/stat", "params": {"path": f"data/missing{n}"}} for n in range(20)]
        got = payload(await conn.call_tool("requests", {"requests": requests}, timeout=60))
        outcomes = got["outcomes"]
        assert waited == [True]
        assert len(base64.b64decode(outcomes[0]["result"]["content"])) == 2 * MiB
        assert all(o["result"]["content"] == "héllo wörld\n" for o in outcomes[1:41])
        assert all(o["error"]["code"] == -32102 for o in outcomes[41:])
        assert not future.done() and consent_outcome == {}  # the consent is still waiting

        future.set_result(ConsentDecision.approve_all(request))
        with anyio.fail_after(10):
            await consent_answered.wait()
        assert consent_outcome["result"]["granted"] is True
