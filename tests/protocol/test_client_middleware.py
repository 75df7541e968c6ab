"""The stream middleware on in-memory streams: routing, the capability, errors, concurrency, threads."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from jupyter_fsbroker.core.errors import FileLocked, NotFound, to_jsonrpc_error
from jupyter_fsbroker.protocol.files_batches import EXTENSION
from jupyter_fsbroker.protocol.middleware import ROOTS_CAPABILITY, BrokerMiddleware
from tests.support.files_core import HandlerCore
from tests.support.roots import StaticRoots

TIMEOUT = 5.0
ROOTS = [{"uri": "file:///data", "name": "data"}]


@dataclass
class Wire:
    """Both far ends of the middleware: the server's and the session's."""

    middleware: BrokerMiddleware
    server_send: MemoryObjectSendStream[SessionMessage | Exception]
    server_recv: MemoryObjectReceiveStream[SessionMessage]
    session_read: Any
    session_write: Any

    async def from_server(self, message: JSONRPCMessage) -> None:
        await self.server_send.send(SessionMessage(message))

    async def to_server(self) -> JSONRPCMessage:
        with anyio.fail_after(TIMEOUT):
            item = await self.server_recv.receive()
        return item.message

    async def to_session(self) -> JSONRPCMessage:
        with anyio.fail_after(TIMEOUT):
            item = await self.session_read.receive()
        assert isinstance(item, SessionMessage)
        return item.message

    async def from_session(self, message: JSONRPCMessage) -> None:
        await self.session_write.send(SessionMessage(message))

    async def handshake(self) -> None:
        """Let the session complete the handshake, so notifications may flow."""
        await self.from_session(JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize", params={}))
        await self.to_server()
        await self.from_session(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
        await self.to_server()


@asynccontextmanager
async def wired(
    handle: Any, *, closed: list[str] | None = None, max_in_flight: int = 16, write_buffer: int = 100
) -> AsyncIterator[Wire]:
    server_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    write_stream, server_recv = anyio.create_memory_object_stream[SessionMessage](write_buffer)
    middleware = BrokerMiddleware(
        read_stream,
        write_stream,
        core=HandlerCore(handle),
        roots=StaticRoots({"roots": list(ROOTS)}),
        on_transport_closed=None if closed is None else lambda: closed.append("closed"),
        label="test",
        max_in_flight=max_in_flight,
    )
    async with middleware.attach() as (session_read, session_write):
        yield Wire(middleware, server_send, server_recv, session_read, session_write)
    for stream in (server_send, read_stream, write_stream, server_recv):
        stream.close()


def request(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> JSONRPCRequest:
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)


async def echo(method: str, params: Any) -> dict[str, Any]:
    return {"method": method, "params": params}


@pytest.mark.anyio
async def test_initialize_gets_the_brokering_capability_and_keeps_the_rest() -> None:
    async with wired(echo) as wire:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "roots": {"listChanged": False, "other": 1}},
            "clientInfo": {"name": "x", "version": "1"},
        }
        await wire.from_session(request(1, "initialize", params))
        sent = await wire.to_server()
        assert isinstance(sent, JSONRPCRequest)
        assert sent.id == 1 and sent.method == "initialize"
        assert sent.params == {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "sampling": {},
                "roots": {
                    "listChanged": True,
                    "other": 1,
                    "filesystemBrokering": True,
                    "filesystemBrokeringFeatures": ["perPathConsent"],
                },
                "extensions": {EXTENSION: {"features": ["perPathConsent", "changes", "cancel"]}},
            },
            "clientInfo": {"name": "x", "version": "1"},
        }
        assert params["capabilities"]["roots"] == {"listChanged": False, "other": 1}  # not mutated
        assert wire.middleware.requested_version == "2025-11-25"

        await wire.from_session(request(2, "initialize", {"protocolVersion": "2024-11-05"}))
        sent = await wire.to_server()
        assert isinstance(sent, JSONRPCRequest) and sent.params is not None
        assert sent.params["capabilities"] == {
            "roots": ROOTS_CAPABILITY,
            "extensions": {EXTENSION: {"features": ["perPathConsent", "changes", "cancel"]}},
        }


@pytest.mark.anyio
async def test_files_and_roots_are_answered_here_and_the_rest_reaches_the_session() -> None:
    async with wired(echo) as wire:
        await wire.from_server(request(7, "files/read", {"path": "data/x"}))
        assert await wire.to_server() == JSONRPCResponse(
            jsonrpc="2.0", id=7, result={"method": "files/read", "params": {"path": "data/x"}}
        )
        await wire.from_server(request("r", "roots/list"))
        assert await wire.to_server() == JSONRPCResponse(jsonrpc="2.0", id="r", result={"roots": ROOTS})

        for message in (
            request(8, "ping"),
            request(9, "sampling/createMessage", {}),
            JSONRPCNotification(jsonrpc="2.0", method="notifications/tools/list_changed"),
            JSONRPCResponse(jsonrpc="2.0", id=1, result={}),
            JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 99}),
        ):
            await wire.from_server(message)
            assert await wire.to_session() == message
        # Messages from the session pass through untouched.
        reply = JSONRPCResponse(jsonrpc="2.0", id=8, result={})
        await wire.from_session(reply)
        assert await wire.to_server() == reply


@pytest.mark.anyio
async def test_errors_use_the_core_mapping_and_unexpected_ones_are_summarized(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing(method: str, params: Any) -> dict[str, Any]:
        if method == "files/stat":
            raise NotFound("data/x does not exist", path="data/x")
        if method == "files/write":
            raise FileLocked("locked", path="data/y", lockedBy="other", retryAfterMs=1000)
        raise RuntimeError("secret detail /home/ana/.ssh/id_rsa")

    async with wired(failing) as wire:
        await wire.from_server(request(1, "files/stat", {"path": "data/x"}))
        got = await wire.to_server()
        assert isinstance(got, JSONRPCError)
        assert got.error.model_dump(exclude_none=True) == to_jsonrpc_error(
            NotFound("data/x does not exist", path="data/x")
        )

        await wire.from_server(request(2, "files/write", {"path": "data/y"}))
        got = await wire.to_server()
        assert isinstance(got, JSONRPCError)
        assert got.error.code == -32100
        assert got.error.data == {
            "error": "FILE_LOCKED",
            "reason": "locked",
            "path": "data/y",
            "lockedBy": "other",
            "retryAfterMs": 1000,
        }

        with caplog.at_level(logging.ERROR, logger="jupyter_fsbroker.protocol.middleware"):
            await wire.from_server(request(3, "files/list", {"path": "data/z"}))
            got = await wire.to_server()
        assert isinstance(got, JSONRPCError)
        assert got.id == 3
        assert got.error.code == -32603
        assert got.error.data == {"reason": "internal_error", "path": "data/z"}
        assert "secret" not in got.error.message and "RuntimeError" in got.error.message
        assert "secret detail" in caplog.text  # logged in full, locally


@pytest.mark.anyio
async def test_requests_run_concurrently_and_a_cancelled_one_is_never_answered() -> None:
    release = anyio.Event()
    started: dict[str, anyio.Event] = {"slow": anyio.Event(), "doomed": anyio.Event()}
    cancelled = anyio.Event()

    async def handle(method: str, params: Any) -> dict[str, Any]:
        name = params["name"]
        if name in started:
            started[name].set()
            try:
                await release.wait()
            except anyio.get_cancelled_exc_class():
                cancelled.set()
                raise
        return {"name": name}

    async with wired(handle) as wire:
        await wire.from_server(request(1, "files/read", {"name": "slow"}))
        await wire.from_server(request(2, "files/read", {"name": "doomed"}))
        with anyio.fail_after(TIMEOUT):
            await started["slow"].wait()
            await started["doomed"].wait()
        for n in range(10):
            await wire.from_server(request(10 + n, "files/stat", {"name": f"fast{n}"}))
        answered = {(await wire.to_server()).id for _ in range(10)}  # type: ignore[union-attr]
        assert answered == set(range(10, 20))
        assert wire.middleware.in_flight == 2

        await wire.from_server(
            JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 2})
        )
        with anyio.fail_after(TIMEOUT):
            await cancelled.wait()
        release.set()
        got = await wire.to_server()
        assert got == JSONRPCResponse(jsonrpc="2.0", id=1, result={"name": "slow"})
        await wire.from_server(request(3, "files/stat", {"name": "last"}))
        assert (await wire.to_server()).id == 3  # type: ignore[union-attr]  # nothing for id 2 came first
        assert wire.middleware.in_flight == 0


@pytest.mark.anyio
async def test_notifications_wait_for_the_handshake_and_keep_their_order_across_threads() -> None:
    async with wired(echo) as wire:
        assert wire.middleware.notify("notifications/roots/list_changed") is False
        await wire.handshake()
        assert wire.middleware.initialized

        def from_a_thread() -> None:
            for n in range(200):
                wire.middleware.notify_threadsafe("notifications/files/changed", {"n": n})
            wire.middleware.notify_threadsafe("notifications/roots/list_changed")

        thread = threading.Thread(target=from_a_thread)
        thread.start()
        thread.join()
        for n in range(200):
            got = await wire.to_server()
            assert got == JSONRPCNotification(
                jsonrpc="2.0", method="notifications/files/changed", params={"n": n}
            )
        got = await wire.to_server()
        assert isinstance(got, JSONRPCNotification)
        assert got.model_dump(exclude_unset=True) == {
            "jsonrpc": "2.0",
            "method": "notifications/roots/list_changed",
        }


@pytest.mark.anyio
async def test_the_end_of_the_transport_is_reported_and_ends_the_session_stream() -> None:
    closed: list[str] = []
    async with wired(echo, closed=closed) as wire:
        wire.server_send.close()
        with anyio.fail_after(TIMEOUT):
            await wire.middleware.transport_closed.wait()
            with pytest.raises(anyio.EndOfStream):
                await wire.session_read.receive()
        assert closed == ["closed"]
        wire.middleware.notify_threadsafe("notifications/roots/list_changed")  # harmless now
    assert closed == ["closed"]


@pytest.mark.anyio
async def test_one_connection_runs_a_bounded_number_of_requests_at_once() -> None:
    running: list[int] = []
    changed = anyio.Event()
    gates = {n: anyio.Event() for n in range(3)}

    async def handle(method: str, params: Any) -> dict[str, Any]:
        nonlocal changed
        running.append(params["n"])
        changed.set()
        changed = anyio.Event()
        await gates[params["n"]].wait()
        running.remove(params["n"])
        return {}

    async def wait_for(count: int) -> None:
        with anyio.fail_after(TIMEOUT):
            while len(running) < count:
                await changed.wait()

    async with wired(handle, max_in_flight=2) as wire:
        for n in range(3):
            await wire.from_server(request(n, "files/read", {"n": n}))
        await wait_for(2)
        await wire.from_server(request(9, "roots/list"))  # not counted: answered at once
        assert (await wire.to_server()).id == 9  # type: ignore[union-attr]
        assert sorted(running) == [0, 1] and wire.middleware.in_flight == 3
        gates[0].set()
        assert (await wire.to_server()).id == 0  # type: ignore[union-attr]
        await wait_for(2)
        assert sorted(running) == [1, 2]
        gates[1].set()
        gates[2].set()
        assert {(await wire.to_server()).id for _ in range(2)} == {1, 2}  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="at least 1"):
        BrokerMiddleware(None, None, core=HandlerCore(echo), roots=StaticRoots(), max_in_flight=0)


def test_the_protocol_package_loads_mcp_and_the_client_only_when_asked() -> None:
    code = (
        "import sys, jupyter_fsbroker.protocol as p\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n"
        "p.connect\n"
        "print('jupyter_fsbroker.protocol.server_connection' in sys.modules, 'connect' in dir(p))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True True"]


@pytest.mark.anyio
async def test_a_request_cancelled_while_waiting_for_a_slot_is_never_answered_nor_run() -> None:
    release, started = anyio.Event(), anyio.Event()
    ran: list[str] = []

    async def handle(method: str, params: Any) -> dict[str, Any]:
        ran.append(params["name"])
        if params["name"] == "slow":
            started.set()
            await release.wait()
        return {"name": params["name"]}

    async with wired(handle, max_in_flight=1) as wire:
        await wire.from_server(request(1, "files/read", {"name": "slow"}))
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        await wire.from_server(request(2, "files/read", {"name": "waiting"}))
        await wire.from_server(
            JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 2})
        )
        await wire.from_server(request(3, "files/stat", {"name": "last"}))
        release.set()
        assert (await wire.to_server()).id == 1  # type: ignore[union-attr]
        assert (await wire.to_server()).id == 3  # type: ignore[union-attr]
        assert ran == ["slow", "last"]
        assert wire.middleware.in_flight == 0


@pytest.mark.anyio
async def test_an_answer_already_being_written_is_written_whole_despite_a_cancel() -> None:
    handled = anyio.Event()

    async def handle(method: str, params: Any) -> dict[str, Any]:
        handled.set()
        return {"name": params["name"]}

    # No buffer towards the server: the answer waits in its write until the server reads.
    async with wired(handle, write_buffer=0) as wire:
        await wire.from_server(request(1, "files/read", {"name": "big"}))
        with anyio.fail_after(TIMEOUT):
            await handled.wait()
            while wire.middleware.in_flight:  # answered: from now on it is being written
                await anyio.sleep(0)
        await wire.from_server(
            JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 1})
        )
        # Nothing of the middleware's to cancel any more: the notification goes on to the session.
        forwarded = await wire.to_session()
        assert isinstance(forwarded, JSONRPCNotification) and forwarded.method == "notifications/cancelled"
        # Cut off halfway, an answer on a byte stream would break the framing of every later line.
        assert await wire.to_server() == JSONRPCResponse(jsonrpc="2.0", id=1, result={"name": "big"})
        await wire.from_server(request(2, "files/stat", {"name": "next"}))
        assert (await wire.to_server()).id == 2  # type: ignore[union-attr]
        assert wire.middleware.in_flight == 0
