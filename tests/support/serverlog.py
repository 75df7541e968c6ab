"""Waiting on a connection's server log (stderr lines and MCP log messages) for an entry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from jupyter_fsbroker.core.serverlog import LogEntry, ServerLog


async def logged(log: ServerLog, predicate: Callable[[LogEntry], bool], timeout: float = 10.0) -> LogEntry:
    """The first entry of *log* that matches *predicate*: one already there, or the next to arrive."""
    found: asyncio.Future[LogEntry] = asyncio.get_running_loop().create_future()

    def check(entry: LogEntry) -> None:
        if predicate(entry) and not found.done():
            found.set_result(entry)

    stop = log.follow(check)
    try:
        for entry in log.entries():
            check(entry)
        return await asyncio.wait_for(found, timeout)
    finally:
        stop()
