"""Connections come and go: several at once, the kill switch, servers that die or vanish, failed connects."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.protocol import (
    ConnectError,
    ConnectionClosedError,
    ServerConnection,
    ServerError,
    connect,
    open_connection,
)
from tests.protocol.servers.harness import (
    EARLY_REQUEST_SERVER,
    RAW_SERVER,
    HeldConsenter,
    HttpServer,
    approve_all,
    http_server,
    ok,
    payload,
    pid_alive,
    send,
    stdio_options,
    temp_files,
)

TIMEOUT = 15.0


async def consent(conn: ServerConnection, *paths: str) -> dict[str, Any]:
    return await ok(conn, "files/consent", {"requestedPaths": list(paths), "message": "please"})


async def hold_everything(conn: ServerConnection) -> dict[str, Any]:
    """Make *conn*'s server take a kept lock, a watch and a staged upload."""
    await consent(conn, "data")
    lock = await ok(conn, "files/read", {"path": "data/hello.txt", "keepLocked": True})
    watch = await ok(conn, "files/watch", {"path": "data", "recursive": True})
    staged = await ok(
        conn,
        "files/write",
        {
            "path": "data/upload.bin",
            "content": base64.b64encode(b"x" * 1000).decode(),
            "encoding": "base64",
            "offset": 0,
        },
    )
    assert staged["size"] == 1000
    return {"lockId": lock["lockId"], "watchId": watch["watchId"]}


def assert_released(broker: Broker, conn: ServerConnection, data: Path) -> None:
    core = conn.connection
    assert core.closed
    assert core not in broker.connections()
    assert [info for info in broker.locks.held() if info.owner == core.id] == []
    assert broker.watches.count(core.id) == 0
    assert core.grants() == ()
    assert temp_files(data) == []
    assert not (data / "upload.bin").exists()


@pytest.mark.anyio
async def test_several_servers_at_once_each_with_its_own_grants(
    broker: Broker, http: HttpServer, tmp_path: Path
) -> None:
    asked: list[str] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        asked.append(request.server)
        if request.server == "b":
            return ConsentDecision.deny()
        return ConsentDecision.approve_all(request)

    consenter = CallbackConsenter(decide)
    conns: dict[str, ServerConnection] = {}

    async def start(name: str, options: dict[str, Any]) -> None:
        conns[name] = await connect(broker, name, consenter=consenter, **options)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, "a", stdio_options(env={"FSBROKER_TEST_ENV": "set"}, cwd=str(tmp_path)))
            tg.start_soon(start, "b", stdio_options())
            tg.start_soon(start, "c", {"url": http.url})
        assert {c.server for c in broker.connections()} == {"a", "b", "c"}
        assert len({c.connection.id for c in conns.values()}) == 3
        infos = {n: payload(await conns[n].call_tool("info")) for n in ("a", "b")}
        assert infos["a"]["pid"] != infos["b"]["pid"]
        assert infos["a"]["env"] == "set"
        assert Path(infos["a"]["cwd"]).resolve() == tmp_path.resolve()
        assert infos["b"]["env"] is None

        assert (await consent(conns["a"], "data/hello.txt"))["granted"] is True
        refused = await consent(conns["b"], "data/hello.txt")
        assert refused == {"granted": False, "approvedPaths": [], "operations": []}
        assert sorted(asked) == ["a", "b"]

        read = await ok(conns["a"], "files/read", {"path": "data/hello.txt"})
        assert read["content"] == "héllo wörld\n"
        for name in ("b", "c"):
            outcome = await send(conns[name], "files/read", {"path": "data/hello.txt"})
            assert outcome["error"]["data"]["reason"] == "not_granted"

        # One goes; the others keep working, with their grants.
        await conns["a"].aclose()
        assert conns["a"].closed and conns["a"].connection.grants() == ()
        assert (await consent(conns["c"], "data"))["granted"] is True
        assert (await ok(conns["c"], "files/stat", {"path": "data/hello.txt"}))["type"] == "file"
        assert "error" in await send(conns["b"], "files/stat", {"path": "data/hello.txt"})
    finally:
        for conn in conns.values():
            await conn.aclose()
    assert broker.connections() == ()


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_closing_releases_everything_and_spares_the_others(
    broker: Broker, data: Path, http: HttpServer, transport: str
) -> None:
    options = stdio_options() if transport == "stdio" else {"url": http.url}
    async with open_connection(broker, "survivor", consenter=approve_all(), **stdio_options()) as alive:
        conn = await connect(broker, "doomed", consenter=approve_all(), **options)
        info = payload(await conn.call_tool("info"))
        await hold_everything(conn)
        await consent(alive, "data")
        refused = await send(alive, "files/write", {"path": "data/hello.txt", "content": "mine"})
        assert refused["error"]["data"]["error"] == "FILE_LOCKED"
        assert refused["error"]["data"]["lockedBy"] == "doomed"

        # Closed from another task than the one that connected.
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.aclose)
        assert conn.state == "closed"
        assert conn.close_reason == "closed by the user"
        assert_released(broker, conn, data)
        if transport == "stdio":
            assert not pid_alive(info["pid"])
        else:  # the HTTP session was deleted
            async with open_connection(broker, "observer", url=http.url) as observer:
                log = payload(await observer.call_tool("http_log"))["requests"]
            assert info["session"] is not None
            assert ["DELETE", info["session"]] in log
        with pytest.raises(ConnectionClosedError, match="closed"):
            await conn.call_tool("info")

        # The lock is gone for everyone else, and the survivor still works.
        written = await ok(alive, "files/write", {"path": "data/hello.txt", "content": "mine"})
        assert written["size"] == 4
        assert (data / "hello.txt").read_text() == "mine"
        await conn.aclose()  # idempotent


@pytest.mark.anyio
async def test_a_killed_stdio_server_mid_transfer_releases_everything(broker: Broker, data: Path) -> None:
    held = HeldConsenter()
    async with open_connection(broker, "survivor", consenter=approve_all(), **stdio_options()) as survivor:
        conn = await connect(broker, "victim", consenter=approve_all(), **stdio_options())
        pid = payload(await conn.call_tool("info"))["pid"]
        await hold_everything(conn)
        conn.connection.consenter = held  # the next prompt stays pending
        conn.connection.revoke("data", ("delete",))  # what is granted already is not asked again
        async with anyio.create_task_group() as tg:
            failure: list[BaseException] = []

            async def pending_call() -> None:
                try:
                    await send(
                        conn,
                        "files/consent",
                        {"requestedPaths": ["data/sub"], "operations": ["delete"], "message": "hold on"},
                    )
                except ConnectionClosedError as exc:
                    failure.append(exc)

            tg.start_soon(pending_call)
            _, future = await held.next()
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(TIMEOUT):
                await conn.wait_closed()
        assert len(failure) == 1
        assert "victim" in str(failure[0]) and "exited" in str(failure[0])
        assert conn.state == "closed"
        assert conn.close_reason == "the server process exited"
        assert future.cancelled()  # the pending consent was withdrawn
        assert_released(broker, conn, data)
        await consent(survivor, "data")
        assert (await ok(survivor, "files/write", {"path": "data/hello.txt", "content": "ok"}))["size"] == 2
        await conn.aclose()


@pytest.mark.anyio
async def test_an_http_server_that_goes_away_closes_the_connection(broker: Broker, data: Path) -> None:
    with http_server() as idle_server, http_server() as busy_server:
        idle = await connect(broker, "idle", url=idle_server.url, consenter=approve_all(), keepalive=0.2)
        busy = await connect(broker, "busy", url=busy_server.url, consenter=approve_all(), keepalive=None)
        await hold_everything(idle)
        # Nobody calls: the keep-alive ping notices.
        idle_server.kill()
        with anyio.fail_after(TIMEOUT):
            await idle.wait_closed()
        assert idle.state == "closed"
        assert_released(broker, idle, data)

        # A call is waiting when the server disappears.
        async with anyio.create_task_group() as tg:
            failure: list[BaseException] = []

            async def waiting_call() -> None:
                try:
                    await busy.call_tool(
                        "next_notification", {"method": "notifications/never", "timeout": 30}
                    )
                except ConnectionClosedError as exc:
                    failure.append(exc)

            tg.start_soon(waiting_call)
            await ok(busy, "roots/list")  # the server is serving both calls now
            busy_server.kill()
        assert len(failure) == 1 and "busy" in str(failure[0])
        assert busy.state == "closed"
        assert busy.connection.closed
        await idle.aclose()
        await busy.aclose()
    assert broker.connections() == ()


@pytest.mark.anyio
async def test_an_http_server_that_restarted_has_forgotten_the_session(broker: Broker) -> None:
    with http_server() as first:
        conn = await connect(broker, "restarted", url=first.url, keepalive=None)
        first.kill(keep_port=True)  # the port stays bound here: no one else can take it meanwhile
        with http_server(listener=first.listener) as second:
            assert second.url == first.url
            with pytest.raises(ConnectionClosedError) as info:
                await conn.call_tool("info")
    assert "restarted" in str(info.value) and "no longer knows the HTTP session" in str(info.value)
    assert conn.state == "closed" and conn.connection.closed


@pytest.mark.anyio
async def test_close_from_another_thread_ends_a_waiting_call(broker: Broker) -> None:
    conn = await connect(broker, "threaded", **stdio_options())
    pid = payload(await conn.call_tool("info"))["pid"]
    async with anyio.create_task_group() as tg:
        failure: list[BaseException] = []

        async def waiting_call() -> None:
            try:
                await conn.call_tool("next_notification", {"method": "notifications/never", "timeout": 30})
            except ConnectionClosedError as exc:
                failure.append(exc)

        tg.start_soon(waiting_call)
        await conn.call_tool("info")  # the waiting call is in flight by now
        thread = threading.Thread(target=conn.close, args=("the kill switch",))
        thread.start()
        thread.join()
        # At once, before the transport is down (this loop has not run since): the state says so.
        assert conn.connection.closed and conn.state == "closing" and not conn.closed
        with anyio.fail_after(TIMEOUT):
            await conn.wait_closed()
    assert "the kill switch" in str(failure[0])
    assert conn.close_reason == "the kill switch"
    assert not pid_alive(pid)


@pytest.mark.anyio
async def test_closing_the_broker_side_ends_the_transport(broker: Broker, http: HttpServer) -> None:
    first = await connect(broker, "first", **stdio_options())
    second = await connect(broker, "second", url=http.url)
    pid = payload(await first.call_tool("info"))["pid"]
    first.connection.close()  # e.g. the dashboard's kill switch, on another thread
    assert first.state == "closing"  # until the loop has ended the transport
    with anyio.fail_after(TIMEOUT):
        await first.wait_closed()
    assert first.close_reason == "the broker closed the connection"
    assert not pid_alive(pid)
    assert second.state == "open"
    broker.close()
    with anyio.fail_after(TIMEOUT):
        await second.wait_closed()
    assert second.close_reason == "the broker closed the connection"


@pytest.mark.anyio
async def test_calls_time_out_and_server_errors_are_typed(broker: Broker, tmp_path: Path) -> None:
    async with open_connection(
        broker, "raw", command=sys.executable, args=[RAW_SERVER, str(tmp_path / "o")]
    ) as conn:
        with pytest.raises(ServerError) as info:
            await conn.call_tool("no such tool")
        assert info.value.code == -32601
        with pytest.raises(TimeoutError, match=r"within 0\.2 s"):
            await conn.call_tool("wait", {"method": "notifications/never", "timeout": 5}, timeout=0.2)
        assert conn.state == "open"


@pytest.mark.anyio
async def test_connect_errors_are_clear_and_leave_nothing_behind(broker: Broker, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    with pytest.raises(ConnectError, match=r"cannot start the server of .x.*no-such-server"):
        await connect(broker, "x", command=missing)
    with pytest.raises(ConnectError, match="during the handshake"):
        await connect(broker, "x", command=sys.executable, args=["-c", "pass"])
    silent = ["-c", "import sys; sys.stdin.read()"]  # never answers, exits when stdin closes
    with pytest.raises(ConnectError, match=r"did not complete the MCP handshake within 0.5 s"):
        await connect(broker, "x", command=sys.executable, args=silent, timeout=0.5)
    with pytest.raises(
        ConnectError, match=r"cannot reach the server of 'x' at http://127.0.0.1:9/mcp"
    ) as info:
        await connect(broker, "x", url="http://ana:secret@127.0.0.1:9/mcp?token=hush")
    assert "secret" not in str(info.value) and "hush" not in str(info.value)
    with http_server("--token", "s3cret") as server:
        with pytest.raises(ConnectError, match="refused to initialize"):
            await connect(
                broker, "x", url=server.url.replace("/mcp", "/nothing-here"), headers=auth("s3cret")
            )
        with pytest.raises(ConnectError, match="refused to initialize"):
            await connect(broker, "x", url=server.url, headers=auth("wrong"))
        async with open_connection(broker, "authorized", url=server.url, headers=auth("s3cret")) as conn:
            assert conn.server_name == "fs-test-server"
    with pytest.raises(ValueError, match="either command"):
        await connect(broker, "x")
    with pytest.raises(ValueError, match="either command"):
        await connect(broker, "x", command="a", url="http://b")
    with pytest.raises(ValueError, match="http"):
        await connect(broker, "x", url="file:///tmp/socket")
    assert broker.connections() == ()


@pytest.mark.anyio
async def test_a_cancelled_connect_stops_the_server(broker: Broker, tmp_path: Path) -> None:
    silent = ["-c", "import os, sys; print(os.getpid(), file=sys.stderr, flush=True); sys.stdin.read()"]
    with (tmp_path / "stderr.txt").open("w+") as errlog:
        with anyio.move_on_after(0.5) as scope:
            await connect(broker, "x", command=sys.executable, args=silent, timeout=None, errlog=errlog)
        assert scope.cancelled_caught
        assert broker.connections() == ()
        errlog.seek(0)
        assert not pid_alive(int(errlog.read()))


@pytest.mark.anyio
async def test_a_request_waiting_for_the_name_is_answered_closed_when_the_connection_closes(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    # Unnamed, the connection opens its broker side only once initialize is answered; this
    # server asks files/read first and never answers, so the request waits for a name that
    # never comes. Closing the connection then answers it as the core answers a closed one.
    out = tmp_path / "received.json"
    waiting = anyio.Event()

    class Waiting(logging.Handler):
        # The desk says so on the loop, this test's own thread, once the request waits.
        def emit(self, record: logging.LogRecord) -> None:
            if "waits for the connection to be named" in record.getMessage():
                waiting.set()

    desk_log = logging.getLogger("jupyter_fsbroker.protocol.desk.core_slot")
    handler, level = Waiting(), desk_log.level
    desk_log.addHandler(handler)
    desk_log.setLevel(logging.DEBUG)
    request.addfinalizer(lambda: (desk_log.removeHandler(handler), desk_log.setLevel(level)))

    with anyio.fail_after(TIMEOUT):
        with anyio.CancelScope() as scope:

            async def close_once_waiting() -> None:
                await waiting.wait()
                scope.cancel()  # closes the connection while it is connecting

            async with anyio.create_task_group() as tg:
                tg.start_soon(close_once_waiting)
                await connect(
                    broker,
                    None,
                    command=sys.executable,
                    args=[EARLY_REQUEST_SERVER, str(out)],
                    timeout=None,
                )
    assert scope.cancelled_caught
    answers = [message for message in json.loads(out.read_text()) if message.get("id") == "early"]
    assert len(answers) == 1, answers
    error = answers[0]["error"]
    assert error["code"] == -32101, error
    assert error["data"]["error"] == "PERMISSION_DENIED"
    assert error["data"]["reason"] == "connection_closed"
    assert error["data"]["path"] == "data/hello.txt"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert broker.connections() == ()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_http_server_helper_reports_a_start_failure() -> None:
    with pytest.raises(RuntimeError, match="did not start"):
        HttpServer("--no-such-option")
