"""Helpers of the reliability tests: the test server over stdio and HTTP, waits, the end state.

The end state every fault test checks is :func:`assert_nothing_left`: no
temporary file in the folder, no lock held in the broker, and the OS lock of
*path* free for another broker at once (another ``LockManager``, as another
process has, on the same lock directory).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.locks import LockManager
from jupyter_fsbroker.core.transfers import Transfer
from jupyter_fsbroker.protocol.server_connection import ServerConnection
from tests.protocol.servers.harness import temp_files
from tests.reliability.brokerproc import APP, UNLIMITED
from tests.support.env import server_env
from tests.support.handover import HandedOverServer

__all__ = [
    "APP",
    "TIMEOUT",
    "UNLIMITED",
    "AppHttpServer",
    "Progress",
    "app_http_server",
    "assert_nothing_left",
    "sigkill",
    "stdio_app",
    "structured",
    "temp_files",
    "wait_until",
]

#: Seconds a test waits for something that must happen (a process to start, an event to arrive).
TIMEOUT = 60.0


def stdio_app(script: str = APP) -> dict[str, Any]:
    """:func:`~jupyter_fsbroker.protocol.connect` options that start the test server *script* over stdio."""
    return {"command": sys.executable, "args": [script], "env": server_env()}


class AppHttpServer(HandedOverServer):
    """The test server *script* over HTTP, on a socket bound here and handed over (no port race)."""

    def __init__(self, script: str = APP) -> None:
        super().__init__([sys.executable, script], env={**os.environ, **server_env()})

    @property
    def pid(self) -> int:
        return self.process.pid


@contextmanager
def app_http_server(script: str = APP) -> Iterator[AppHttpServer]:
    """:class:`AppHttpServer` for a ``with`` block; gone at once, without a goodbye, when it ends."""
    with AppHttpServer(script) as server:
        try:
            yield server
        finally:
            server.kill()


def structured(result: dict[str, Any]) -> Any:
    """The JSON a tool of the test server returned."""
    assert result.get("isError") is False, result
    return result["structuredContent"]


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Wait (polling, off the event loop's way) until *condition()* holds; fail after *timeout*."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await anyio.sleep(0.01)


class Progress:
    """Set once a connection has staged or read *nbytes* of a file (the broker's transfer reports)."""

    def __init__(self, broker: Broker, conn: ServerConnection, nbytes: int) -> None:
        self.reached = threading.Event()
        self._id = conn.connection.id
        self._bytes = nbytes
        self._unsubscribe = broker.on_transfer(self._on_transfer)

    def _on_transfer(self, transfer: Transfer) -> None:
        if transfer.connection_id == self._id and transfer.done >= self._bytes:
            self.reached.set()

    async def wait(self) -> None:
        try:
            reached = await anyio.to_thread.run_sync(self.reached.wait, TIMEOUT)
            assert reached, "the transfer did not get that far"
        finally:
            self._unsubscribe()


def assert_nothing_left(broker: Broker, folder: Path, path: str, lock_dir: Path) -> None:
    """No temporary file below *folder*, no lock in *broker*, *path*'s OS lock free for another broker."""
    assert temp_files(folder) == []
    assert broker.locks.held() == ()
    other = LockManager(lock_dir, wait=0)  # what another process has: its own table, the same files
    try:
        with other.hold(path, "exclusive", owner="other", owner_label="other", path="other") as hold:
            assert hold.active
    finally:
        other.close()


def sigkill(pid: int) -> None:
    """Kill the process *pid* (one the test started) at once, without a goodbye."""
    os.kill(pid, signal.SIGKILL)
