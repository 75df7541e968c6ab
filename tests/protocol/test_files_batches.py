"""The 2026-07-28 era, client side: a real server of the batch shape over stdio and stateless HTTP.

The server (``servers/batch_server.py``) answers ``tools/call`` with the batches the test gives
it, then with the answers it was sent; the client under test performs them through a real broker.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision, Consenter
from jupyter_fsbroker.protocol import (
    ConnectionClosedError,
    ProtocolVersionError,
    ServerConnection,
    open_connection,
)
from tests.protocol.servers.harness import RAW_SERVER, HeldConsenter, approve_all, payload
from tests.support.handover import HandedOverServer

BATCH_SERVER = str(Path(__file__).resolve().parent / "servers" / "batch_server.py")
TRANSPORTS = ["stdio", "http"]

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def batch_http() -> Iterator[HandedOverServer]:
    with HandedOverServer([sys.executable, BATCH_SERVER]) as server:
        yield server


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


def where(transport: str, http: HandedOverServer | None = None) -> dict[str, Any]:
    if transport == "stdio":
        return {"command": sys.executable, "args": [BATCH_SERVER]}
    assert http is not None
    return {"url": http.url}


@asynccontextmanager
async def connected(
    broker: Broker, options: dict[str, Any], consenter: Consenter | None = None, **extra: Any
) -> AsyncIterator[ServerConnection]:
    # The default (auto) over HTTP; over stdio auto asks for the handshake era first, so the
    # batches there are asked for by name.
    extra.setdefault("era", "auto" if "url" in options else "modern")
    async with open_connection(
        broker, "analysis", consenter=consenter or approve_all(), **options, **extra
    ) as conn:
        yield conn


def op(op_id: str, method: str, **params: Any) -> dict[str, Any]:
    return {"id": op_id, "method": method, "params": params}


def consent(op_id: str, path: str, *operations: str) -> dict[str, Any]:
    return op(op_id, "files/consent", message="analyse", requestedPaths=[path], operations=list(operations))


async def run(conn: ServerConnection, *steps: list[dict[str, Any]]) -> dict[str, Any]:
    return payload(await conn.call_tool("batches", {"steps": list(steps)}, timeout=30))  # type: ignore[no-any-return]


async def test_read_write_consent_once_and_one_audit_record_per_operation(
    broker: Broker, data: Path, transport: str, batch_http: HandedOverServer
) -> None:
    held = HeldConsenter()
    async with connected(broker, where(transport, batch_http), consenter=held) as conn:
        assert conn.era == "modern"
        assert conn.protocol_version == "2026-07-28"
        call = conn.call_tool(
            "batches",
            {
                "steps": [
                    [consent("c", "data", "read", "write")],
                    [op("r", "files/read", path="data/hello.txt"), op("s", "files/stat", path="data/sub")],
                    [op("w", "files/write", path="data/out.txt", content="written", encoding="utf-8")],
                    [op("r2", "files/read", path="data/out.txt")],
                ]
            },
            timeout=30,
        )
        async with anyio.create_task_group() as tg:
            results: list[dict[str, Any]] = []

            async def calling() -> None:
                results.append(payload(await call))

            tg.start_soon(calling)
            request, future = await held.next()
            assert [item.path for item in request.items] == ["data"]
            future.set_result(ConsentDecision.approve_all(request))
        answers = results[0]["answers"]
    assert answers[0][0]["result"]["granted"] is True
    read, stat = answers[1]
    assert read["result"]["content"] == "héllo wörld\n"
    assert stat["result"]["type"] == "directory"
    assert answers[2][0]["result"]["bytesWritten"] == len("written")
    assert answers[3][0]["result"]["content"] == "written"
    assert (data / "out.txt").read_text() == "written"
    # every request of the call carried the same connection id
    connections = results[0]["connections"]
    assert len(connections) == 5 and len(set(connections)) == 1 and connections[0].startswith("c_")
    methods = [r.method for r in broker.audit.records()]
    # the read and the stat of one batch run concurrently: their records come in either order
    assert methods[0] == "files/consent" and methods[3:] == ["files/write", "files/read"]
    assert sorted(methods[1:3]) == ["files/read", "files/stat"]


async def test_errors_carry_the_modern_codes_and_the_legacy_names(
    broker: Broker, transport: str, batch_http: HandedOverServer
) -> None:
    async with connected(broker, where(transport, batch_http)) as conn:
        done = await run(
            conn,
            [op("denied", "files/read", path="data/hello.txt")],
            [
                consent("c", "data", "read"),
                op("missing", "files/stat", path="data/nope"),
                op("x", "tools/list"),
            ],
        )
    denied = done["answers"][0][0]["error"]
    assert (denied["code"], denied["data"]["error"], denied["data"]["reason"]) == (
        -31101,
        "PERMISSION_DENIED",
        "not_granted",
    )
    granted, missing, other = done["answers"][1]
    assert granted["result"]["granted"] is True
    assert (missing["error"]["code"], missing["error"]["data"]["error"]) == (-31102, "NOT_FOUND")
    assert other["error"]["code"] == -32601  # a plain JSON-RPC error keeps its code


async def test_revocation_mid_call_answers_the_legacy_error(
    broker: Broker, batch_http: HandedOverServer
) -> None:
    held = HeldConsenter()
    async with connected(broker, where("http", batch_http), consenter=held) as conn:
        results: list[dict[str, Any]] = []

        async def calling() -> None:
            results.append(
                await run(
                    conn,
                    [consent("a", "data/hello.txt", "read")],
                    [consent("b", "data/sub", "read")],
                    [op("r", "files/read", path="data/hello.txt")],
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(calling)
            first, answer = await held.next()
            answer.set_result(ConsentDecision.approve_all(first))
            second, answer = await held.next()
            assert conn.connection.revoke("data/hello.txt")  # while the call waits for the second consent
            answer.set_result(ConsentDecision.approve_all(second))
    read = results[0]["answers"][2][0]["error"]
    assert (read["code"], read["data"]["reason"]) == (-31101, "not_granted")


async def test_disconnect_mid_call_sends_no_continuation_and_ends_closed(
    broker: Broker, transport: str, batch_http: HandedOverServer
) -> None:
    held = HeldConsenter()
    async with connected(broker, where(transport, batch_http), consenter=held) as conn:
        outcome: list[BaseException] = []

        async def calling() -> None:
            try:
                await run(
                    conn, [consent("a", "data", "read")], [op("r", "files/read", path="data/hello.txt")]
                )
            except ConnectionClosedError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(calling)
            await held.next()
            conn.close("pulled the kill switch")
        assert conn.closed or conn.state == "closing"
    assert len(outcome) == 1 and "pulled the kill switch" in str(outcome[0])
    assert [r.method for r in broker.audit.records() if r.method == "files/read"] == []


async def test_a_cancelled_call_withdraws_its_prompt_tells_the_server_and_releases_its_lock(
    broker: Broker, transport: str, batch_http: HandedOverServer
) -> None:
    broker.allow("data", ops=("read",))
    held = HeldConsenter()
    async with connected(broker, where(transport, batch_http), consenter=held) as conn:
        async with anyio.create_task_group() as tg:
            steps = [
                [op("l", "files/read", path="data/hello.txt", length=0, keepLocked=True)],
                [consent("c", "data/sub", "write")],
            ]
            tg.start_soon(run, conn, *steps)
            _, prompt = await held.next()
            tg.cancel_scope.cancel()  # the user interrupts the cell while the prompt shows
        # The prompt was withdrawn, not left for an answer that no call awaits.
        assert prompt.cancelled()
        cancels = payload(await conn.call_tool("cancels", {}))["cancels"]
    # The server was told, with no answer for the operation that was withdrawn.
    assert cancels[-1] == {"step": 2, "answers": []}
    methods = [(r.method, r.error) for r in broker.audit.records()]
    assert methods[0] == ("files/read", None)
    assert ("files/unlock", None) in methods, "the tool's clean-up released its lock"


@pytest.fixture(scope="module")
def plain_http() -> Iterator[HandedOverServer]:
    with HandedOverServer([sys.executable, BATCH_SERVER], "--no-extension") as server:
        yield server


async def test_auto_falls_back_to_legacy_over_http_without_the_extension(
    broker: Broker, plain_http: HandedOverServer
) -> None:
    async with connected(broker, {"url": plain_http.url}) as conn:
        assert conn.era == "legacy"
        assert conn.protocol_version == "2025-11-25"
        assert payload(await conn.call_tool("plain", {}, timeout=30)) == {"result": "plain"}


async def test_modern_over_stdio_without_the_extension_serves_the_tools_that_need_no_files(
    broker: Broker,
) -> None:
    options = {"command": sys.executable, "args": [BATCH_SERVER, "--no-extension"]}
    async with connected(broker, options, era="modern") as conn:
        assert conn.era == "modern"
        assert payload(await conn.call_tool("plain", {}, timeout=30)) == {"result": "plain"}


async def test_legacy_on_request_even_when_the_server_offers_the_extension(broker: Broker) -> None:
    async with connected(broker, where("stdio"), era="legacy") as conn:
        assert conn.era == "legacy"
        # no batches on the handshake era: the server's tool runs as a plain tool
        done = await run(conn, [op("s", "files/stat", path="data")])
        assert done == {"unanswered": "the files extension is not in use"}


async def test_modern_is_refused_by_a_server_of_the_handshake_era_only(
    broker: Broker, tmp_path: Path
) -> None:
    options = {"command": sys.executable, "args": [RAW_SERVER, str(tmp_path / "raw.json")]}
    with pytest.raises(ProtocolVersionError, match="does not speak MCP protocol version 2026-07-28"):
        async with connected(broker, options, era="modern"):
            pass


async def test_the_default_negotiates_modern_over_http_and_the_handshake_era_over_stdio(
    broker: Broker, batch_http: HandedOverServer
) -> None:
    # The same server offers both eras: over HTTP each request says its era, so the client asks
    # server/discover first; over stdio the first request would fix the era for good.
    http = where("http", batch_http)
    async with open_connection(broker, "analysis", consenter=approve_all(), **http) as conn:
        assert (conn.era, conn.protocol_version) == ("modern", "2026-07-28")
    async with open_connection(broker, "local", consenter=approve_all(), **where("stdio")) as conn:
        assert conn.era == "legacy"
        done = await run(conn, [op("s", "files/stat", path="data")])
        assert done == {"unanswered": "the files extension is not in use"}


def test_an_unknown_era_is_a_clear_error(broker: Broker) -> None:
    async def attempt() -> None:
        async with connected(broker, where("stdio"), era="newest"):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match="era must be"):
        anyio.run(attempt)
