"""A server killed with SIGKILL mid-upload, mid-locked-update or while watching: nothing is lost.

The server (``servers/app.py``, written with the server helper) runs as a real
process, over stdio or Streamable HTTP, next to a survivor server that watches
the same folder. The victim is killed at the worst moment the broker can see:
once it has staged a few chunks, once it holds its ``keepLocked`` lock between
read and write, once its watch is set. Afterwards the file holds its old
content, no temporary file is left, no lock is held (another broker locks the
file at once), the victim's watch is gone, and the survivor is served and
notified as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import ConnectionClosedError, ServerError, connect, open_connection
from jupyter_fsbroker.protocol.server_connection import ServerConnection
from tests.reliability.harness import (
    TIMEOUT,
    UNLIMITED,
    Progress,
    app_http_server,
    assert_nothing_left,
    sigkill,
    stdio_app,
    structured,
    wait_until,
)
from tests.support.brokers import ALL_OPS, make_broker

pytestmark = pytest.mark.anyio

OLD = "the old content, complete\n" * 1000
MiB = 1024 * 1024


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "target.txt").write_text(OLD)
    os.chmod(folder / "target.txt", 0o640)
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(**UNLIMITED, lock_wait=0.5), coalesce=0.01) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


def fault_call(moment: str) -> dict[str, Any]:
    """The victim's tool call that is under way at *moment*."""
    if moment == "upload":
        return {"tool": "upload", "args": {"path": "data/target.txt", "size": 64 * MiB, "chunk_size": MiB}}
    if moment == "locked_update":
        return {"tool": "locked_update", "args": {"path": "data/target.txt", "hold": 3600}}
    return {"tool": "watch", "args": {"path": "data", "recursive": True, "count": 10**6, "timeout": 3600}}


async def under_way(broker: Broker, victim: ServerConnection, moment: str) -> None:
    """Return once the victim is in the middle of *moment* as the broker sees it."""
    owner = victim.connection.id
    if moment == "upload":
        await Progress(broker, victim, 4 * MiB).wait()
    elif moment == "locked_update":
        await wait_until(
            lambda: any(info.owner == owner and info.kept for info in broker.locks.held()),
            "the victim's kept lock",
        )
    else:
        await wait_until(lambda: broker.watches.count(owner) == 1, "the victim's watch")


@pytest.mark.parametrize(
    ("moment", "transport"),
    [
        ("upload", "stdio"),
        ("locked_update", "stdio"),
        ("locked_update", "http"),
        ("watching", "stdio"),
        ("watching", "http"),
    ],
)
async def test_a_server_killed_mid_operation(
    broker: Broker, data: Path, tmp_path: Path, moment: str, transport: str
) -> None:
    async with open_connection(broker, "survivor", **stdio_app()) as survivor:
        async with anyio.create_task_group() as tg:
            seen: list[Any] = []

            async def survivor_watches() -> None:
                arguments = {"path": "data", "count": 1, "timeout": TIMEOUT}
                seen.append(structured(await survivor.call_tool("watch", arguments, timeout=TIMEOUT + 10)))

            tg.start_soon(survivor_watches)
            await wait_until(
                lambda: broker.watches.count(survivor.connection.id) == 1, "the survivor's watch"
            )
            with app_http_server() if transport == "http" else contextlib.nullcontext() as server:
                if server is None:
                    victim = await connect(broker, "victim", **stdio_app())
                    pid = structured(await victim.call_tool("info"))["pid"]
                else:
                    victim = await connect(broker, "victim", url=server.url, keepalive=None)
                    pid = server.pid
                call = fault_call(moment)
                failures: list[BaseException] = []

                async def victim_works() -> None:
                    with pytest.raises((ConnectionClosedError, ServerError)) as info:
                        await victim.call_tool(call["tool"], call["args"], timeout=3600)
                    failures.append(info.value)

                async with anyio.create_task_group() as victim_tg:
                    victim_tg.start_soon(victim_works)
                    await under_way(broker, victim, moment)
                    sigkill(pid)
                with anyio.fail_after(TIMEOUT):
                    await victim.wait_closed()
            [failure] = failures
            assert isinstance(failure, ConnectionClosedError), failure
            assert "victim" in str(failure)
            if transport == "stdio":
                assert victim.close_reason == "the server process exited"
            await victim.aclose()

            # Nothing of the victim is left: content, temporary files, locks, watch.
            assert (data / "target.txt").read_text() == OLD
            assert os.stat(data / "target.txt").st_mode & 0o777 == 0o640
            key = os.path.realpath(data / "target.txt")
            assert_nothing_left(broker, data, key, tmp_path / ".locks")
            assert broker.watches.count(victim.connection.id) == 0
            assert [c.server for c in broker.connections()] == ["survivor"]

            # The survivor is served, and its watch reports what it writes now.
            written = await survivor.call_tool(
                "request", {"method": "files/write", "params": {"path": "data/target.txt", "content": "new"}}
            )
            assert structured(written)["result"]["size"] == 3
        [events] = seen
        assert [(e["path"], e["event"]) for e in events["events"]] == [("data/target.txt", "modified")]
    assert (data / "target.txt").read_text() == "new"


@pytest.mark.slow
async def test_a_frozen_http_server_loses_its_locks_after_three_silent_pings(
    broker: Broker, data: Path
) -> None:
    """SIGSTOP: the TCP connection stays up but nothing answers; the keep-alive gives up on it."""
    with app_http_server() as server:
        victim = await connect(broker, "frozen", url=server.url, keepalive=0.2)
        locked = await victim.call_tool(
            "request", {"method": "files/read", "params": {"path": "data/target.txt", "keepLocked": True}}
        )
        assert structured(locked)["result"]["lockId"].startswith("lock_")
        os.kill(server.pid, signal.SIGSTOP)
        try:
            with anyio.fail_after(3 * (10 + 0.2) + TIMEOUT):
                await victim.wait_closed()
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert victim.close_reason == "the server did not answer 3 pings in a row"
        assert broker.locks.held() == ()
        assert broker.connections() == ()
    assert (data / "target.txt").read_text() == OLD
