"""The two ways to reach a server: a local command over stdio, or a Streamable HTTP URL.

Each opener is an async context manager yielding the ``(read, write)`` stream
pair of the project's transports (:mod:`.spawn`, :mod:`.http`). Over stdio the
server's stderr is read line by line into a callback
(:mod:`~jupyter_fsbroker.protocol.stderr`) unless a file is given for it; over
HTTP the client has no read timeout (a tool's stream may stay silent while it
runs). Nothing here speaks MCP: it only opens and closes transports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TextIO

import httpx2
from mcp.client.stdio import StdioServerParameters

from ..auth.oauth_settings import OAuth
from ..auth.signing_in import signing_in
from ..stderr import captured_stderr
from .http import open_session
from .message_streams import MessageReader, MessageWriter
from .spawn import spawn

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
        async with spawn(parameters, errlog=errlog) as streams:
            yield streams
        return
    async with captured_stderr(on_line) as stderr, spawn(parameters, errlog=stderr) as streams:
        stderr.close()  # the server has its own copy: the pipe ends when it exits
        yield streams


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str], auth: OAuth | None = None, name: str | None = None
) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    if auth is None:
        async with open_session(url, headers, timeout=_HTTP_TIMEOUT) as streams:
            yield streams
        return
    async with (
        signing_in(url, auth, name) as provider,
        open_session(
            url, headers, timeout=_HTTP_TIMEOUT, auth=provider, background_auth=provider.non_interactive()
        ) as streams,
    ):
        yield streams


def display_url(url: str) -> str:
    """*url* for messages and logs: no user info, no query (either may hold a secret)."""
    try:
        parsed = httpx2.URL(url)
        return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return url.split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
