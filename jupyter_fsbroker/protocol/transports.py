"""The two ways to reach a server: a local command over stdio, or a Streamable HTTP URL.

Each opener is an async context manager yielding the ``(read, write)`` stream
pair of mcp's transports. Over stdio the server's stderr is read line by line
into a callback (:mod:`.stderr`) unless a file is given for it; over HTTP the
client has no size cap on server-sent events (2 MiB chunks fit) and no read
timeout (a tool's stream may stay silent while it runs). Nothing here speaks
MCP: it only opens and closes transports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TextIO

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .middleware import MessageReader, MessageWriter
from .stderr import captured_stderr

__all__ = ["Opener", "display_url", "http_transport", "stdio_transport"]

#: Opens a transport, given where the server's stderr lines go (used by stdio only).
Opener = Callable[[Callable[[str], None]], AbstractAsyncContextManager[tuple[MessageReader, MessageWriter]]]

# Connecting and writing are bounded, reading is not (a tools/call's event stream
# may stay silent for as long as the tool runs; the keep-alive ping notices a
# server that went away).
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=None)


@asynccontextmanager
async def stdio_transport(
    parameters: StdioServerParameters, errlog: TextIO | None, on_line: Callable[[str], None]
) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    if errlog is not None:
        async with stdio_client(parameters, errlog=errlog) as streams:
            yield streams
        return
    async with captured_stderr(on_line) as stderr, stdio_client(parameters, errlog=stderr) as streams:
        stderr.close()  # the server has its own copy: the pipe ends when it exits
        yield streams


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str]
) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT) as client,
        streamable_http_client(url, http_client=client, max_sse_event_size=None) as streams,
    ):
        yield streams


def display_url(url: str) -> str:
    """*url* for messages and logs: no user info, no query (either may hold a secret)."""
    try:
        parsed = httpx2.URL(url)
        return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return url.split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
