"""The helper's requests written straight onto its stdio pipe (``serverkit/direct.py``).

The channel must give its callers exactly what mcp's session gives them: the
raw result, typed errors, a timeout after a courtesy cancellation, a
cancellation announced to the client, and ClientDisconnectedError when the pipe ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.serverkit.direct import DirectChannel, current_channel
from jupyter_fsbroker.serverkit.exceptions import (
    ClientDisconnectedError,
    FilesRequestError,
    PermissionDeniedError,
    RequestTimeoutError,
)


class Pipe:
    """What the channel writes to: whole lines, kept in order."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.written = asyncio.Event()

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1  # one whole line per write
        self.lines.append(json.loads(data))
        self.written.set()

    async def drain(self) -> None:
        pass


def run(test: Callable[[DirectChannel, Pipe], Awaitable[None]]) -> None:
    async def main() -> None:
        pipe = Pipe()
        channel = DirectChannel(pipe)  # type: ignore[arg-type]
        with channel.active():
            await test(channel, pipe)

    asyncio.run(main())


async def sent(pipe: Pipe, count: int = 1) -> dict[str, Any]:
    while len(pipe.lines) < count:
        pipe.written.clear()
        await pipe.written.wait()
    return pipe.lines[count - 1]


def test_a_request_goes_out_as_one_line_and_its_result_comes_back_raw() -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        assert current_channel() is channel
        call = asyncio.ensure_future(channel.request("files/stat", {"path": "data/x"}, 5))
        request = await sent(pipe)
        assert request == {
            "jsonrpc": "2.0",
            "id": "fsb-1",
            "method": "files/stat",
            "params": {"path": "data/x"},
        }
        assert not channel.route({"jsonrpc": "2.0", "id": 1, "result": {}})  # mcp's own request ids
        assert not channel.route({"jsonrpc": "2.0", "id": "fsb-1", "method": "files/read"})  # a request
        assert not channel.route([1, 2])
        assert channel.route({"jsonrpc": "2.0", "id": "fsb-1", "result": {"type": "file", "extra": [1]}})
        assert await call == {"type": "file", "extra": [1]}
        # No params: none are sent (JSON-RPC forbids "params": null).
        call = asyncio.ensure_future(channel.request("roots/list", None, 5))
        assert "params" not in await sent(pipe, 2)
        channel.route({"jsonrpc": "2.0", "id": "fsb-2", "result": {"roots": []}})
        assert await call == {"roots": []}

    run(test)


def test_an_error_answer_is_the_typed_error() -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        call = asyncio.ensure_future(channel.request("files/read", {"path": "data/x"}, 5))
        request = await sent(pipe)
        error = {
            "code": -32101,
            "message": "no",
            "data": {"error": "PERMISSION_DENIED", "reason": "outside_roots"},
        }
        channel.route({"jsonrpc": "2.0", "id": request["id"], "error": error})
        with pytest.raises(PermissionDeniedError) as info:
            await call
        assert info.value.reason == "outside_roots" and info.value.method == "files/read"

    run(test)


@pytest.mark.parametrize(
    "answer",
    [
        {"result": [1]},
        {"error": {"code": "x", "message": "m"}},
        {"result": {}, "error": {"code": 1, "message": "m"}},
        {},
    ],
)
def test_an_answer_that_is_not_json_rpc_fails_the_request_at_once(answer: dict[str, Any]) -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        call = asyncio.ensure_future(channel.request("files/read", {"path": "data/x"}, 5))
        request = await sent(pipe)
        assert channel.route({"jsonrpc": "2.0", "id": request["id"], **answer})
        with pytest.raises(FilesRequestError) as info:
            await call
        assert info.value.code == -32603

    run(test)


def test_a_timeout_cancels_the_request_and_a_late_answer_is_dropped() -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        with pytest.raises(RequestTimeoutError):
            await channel.request("files/read", {"path": "data/x"}, 0)
        request, cancel = pipe.lines
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"]["requestId"] == request["id"]
        assert "id" not in cancel
        assert channel.route({"jsonrpc": "2.0", "id": request["id"], "result": {}})  # taken, dropped

    run(test)


def test_a_cancelled_caller_cancels_its_request() -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.request, "files/read", {"path": "data/x"}, 5)
            request = await sent(pipe)
            tg.cancel_scope.cancel()
        cancel = await sent(pipe, 2)
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"] == {"requestId": request["id"], "reason": "caller cancelled"}

    run(test)


def test_requests_waiting_when_the_pipe_ends_get_connection_closed() -> None:
    async def test(channel: DirectChannel, pipe: Pipe) -> None:
        call = asyncio.ensure_future(channel.request("files/read", {"path": "data/x"}, 5))
        await sent(pipe)
        channel.close()
        with pytest.raises(ClientDisconnectedError):
            await call
        assert current_channel() is None  # later requests go through the session
        with pytest.raises(ClientDisconnectedError):
            await channel.request("files/read", {"path": "data/x"}, 5)

    run(test)


def test_no_channel_outside_the_pipes_it_serves() -> None:
    assert current_channel() is None
