"""The project's own transports, and the memory budget in the middleware: real processes, real streams."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from jupyter_fsbroker.protocol.desk.budget import MIN_HELD
from jupyter_fsbroker.protocol.framing import MalformedMessage
from jupyter_fsbroker.protocol.middleware import BrokerMiddleware
from jupyter_fsbroker.protocol.transports.spawn import spawn
from tests.protocol.test_client_middleware import TIMEOUT, request, wired
from tests.support.files_core import HandlerCore
from tests.support.processes import pid_alive
from tests.support.roots import StaticRoots

MiB = 1024 * 1024
#: Seconds to wait for a server process to start and answer: a safety net for a loaded machine.
PROCESS_TIMEOUT = 60.0


# -- the memory budget, through the middleware ----------------------------------------------


@pytest.mark.anyio
async def test_requests_past_the_budget_wait_and_too_many_waiting_are_refused() -> None:
    release = anyio.Event()
    started = anyio.Event()

    async def handle(method: str, params: Any) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"content": "x"}

    server_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    write_stream, server_recv = anyio.create_memory_object_stream[SessionMessage](100)
    middleware = BrokerMiddleware(
        read_stream,
        write_stream,
        core=HandlerCore(handle, budget=lambda: 5 * MIN_HELD),
        roots=StaticRoots(),
    )
    async with middleware.attach(), server_send, server_recv, read_stream, write_stream:
        middleware.budget.max_waiting = 3

        async def to_server() -> Any:
            with anyio.fail_after(TIMEOUT):
                return (await server_recv.receive()).message

        await server_send.send(
            SessionMessage(request(0, "files/read", {"path": "data/a", "length": 2 * MiB}))
        )
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        for n in range(1, 11):
            await server_send.send(SessionMessage(request(n, "files/stat", {"path": "data/a"})))
        refused = [await to_server() for _ in range(7)]
        assert {m.id for m in refused} == set(range(4, 11))
        assert all(isinstance(m, JSONRPCError) and m.error.code == -32107 for m in refused)
        assert refused[0].error.data == {
            "error": "RATE_LIMITED",
            "reason": "memory_budget",
            "path": "data/a",
            "retryAfterMs": 100,
        }
        assert middleware.budget.waiting == 3
        release.set()
        assert {(await to_server()).id for _ in range(4)} == set(range(4))
        assert middleware.budget.used == 0


@pytest.mark.anyio
async def test_the_middleware_answers_what_the_transport_could_not_read() -> None:
    async with wired(lambda method, params: {}) as wire:  # type: ignore[arg-type,return-value]
        await wire.server_send.send(MalformedMessage(-32600, "params must be an object", "x", 4, answer=True))
        await wire.server_send.send(MalformedMessage(-32600, "a broken answer", "x", None, answer=False))
        await wire.server_send.send(MalformedMessage(-32700, "not JSON", "not_json", None, answer=True))
        first, second = await wire.to_server(), await wire.to_server()
        assert isinstance(first, JSONRPCError) and (first.id, first.error.code) == (4, -32600)
        assert isinstance(second, JSONRPCError) and (second.id, second.error.code) == (None, -32700)
        assert wire.middleware.malformed == 3


# -- stdio ---------------------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether *pid* is a live process (a zombie nobody reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def python(code: str, **kwargs: Any) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-c", code], **kwargs)


# Echoes every line back, in pieces (3 bytes for short lines); writes its pid and environment on stderr first.
ECHO = """
import json, os, sys, time
info = {"pid": os.getpid(), "cwd": os.getcwd(), "env": os.environ.get("FSB_T")}
print(json.dumps(info), file=sys.stderr, flush=True)
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    step = 3 if len(line) < 1000 else 65536
    for i in range(0, len(line), step):
        out.write(line[i:i + step]); out.flush()
"""


@pytest.mark.anyio
async def test_stdio_spawns_like_mcp_and_frames_every_message(tmp_path: Path) -> None:
    log = tmp_path / "stderr.txt"
    big = "é" * (3 * MiB)
    with log.open("w+") as errlog:
        parameters = python(ECHO, env={"FSB_T": "yes"}, cwd=str(tmp_path))
        async with spawn(parameters, errlog=errlog) as (read, write):
            await write.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="small")))
            await write.send_bytes(b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + big.encode() + b'"}}')
            await write.send_bytes(b"not json")
            with anyio.fail_after(PROCESS_TIMEOUT):
                first, second, third = await read.receive(), await read.receive(), await read.receive()
        errlog.seek(0)
        info = json.loads(errlog.readline())
    assert isinstance(first, SessionMessage) and first.message.method == "small"  # type: ignore[union-attr]
    assert isinstance(second, SessionMessage) and isinstance(second.message, JSONRPCResponse)
    assert second.message.result == {"text": big}
    assert isinstance(third, MalformedMessage) and third.code == -32700
    assert info["cwd"] == str(tmp_path) and info["env"] == "yes"
    assert not pid_alive(info["pid"])
    assert set(get_default_environment()) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


# Ignores the end of its stdin and SIGTERM, and leaves a child in its process group that does too.
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", deaf])
print(os.getpid(), child.pid, file=sys.stderr, flush=True)
sys.stdin.read()
time.sleep(600)
"""

# Exits on SIGTERM, ignores the end of its stdin; so does its child.
POLITE = STUBBORN.replace("signal.signal(signal.SIGTERM, signal.SIG_IGN)", "pass")


@pytest.mark.anyio
@pytest.mark.parametrize("code", [STUBBORN, POLITE], ids=["killed", "terminated"])
async def test_closing_stops_the_server_and_its_process_group(tmp_path: Path, code: str) -> None:
    log = tmp_path / "stderr.txt"
    with log.open("w+") as errlog:
        async with spawn(python(code), errlog=errlog):
            with anyio.fail_after(PROCESS_TIMEOUT):
                while not log.read_text().strip():
                    await anyio.sleep(0.05)
        pids = [int(p) for p in log.read_text().split()]
    assert [running(pid) for pid in pids] == [False, False]


@pytest.mark.anyio
async def test_a_server_that_stops_reading_ends_the_stream(tmp_path: Path) -> None:
    code = "import os, sys, time; os.close(0); print('ready', flush=True, file=sys.stderr); time.sleep(600)"
    log = tmp_path / "stderr.txt"
    with log.open("w+") as errlog:
        async with spawn(python(code), errlog=errlog) as (read, write):
            with anyio.fail_after(PROCESS_TIMEOUT):
                while "ready" not in log.read_text():
                    await anyio.sleep(0.05)
                with pytest.raises(anyio.BrokenResourceError):
                    await write.send_bytes(b"{}")
                assert write.broken
                with pytest.raises(anyio.EndOfStream):
                    await read.receive()
                async for _ in read:
                    pytest.fail("nothing more to read")


# -- what the transports rely on in mcp (CANARY) ---------------------------------------------


def test_canary_what_the_transports_take_from_mcp() -> None:
    """``get_default_environment``, ``StdioServerParameters`` and message metadata headers."""
    assert callable(get_default_environment), "CANARY: mcp.client.stdio.get_default_environment is gone"
    fields = set(StdioServerParameters.model_fields)
    assert {"command", "args", "env", "cwd"} <= fields, f"CANARY: StdioServerParameters is now {fields}"
    metadata = ClientMessageMetadata(headers={"mcp-protocol-version": "2025-11-25"})
    assert metadata.headers == {"mcp-protocol-version": "2025-11-25"}, (
        "CANARY: ClientMessageMetadata.headers (the session's protocol-version stamp, sent as an HTTP "
        "header by transports/http.py) changed."
    )
    message = JSONRPCRequest.model_validate({"jsonrpc": "2.0", "id": 1, "method": "m"})
    assert (
        message.model_dump_json(by_alias=True, exclude_unset=True) == '{"jsonrpc":"2.0","id":1,"method":"m"}'
    )
