"""What the reliability test servers built with the server helper share.

:func:`files_server` is the server each starts from: ``files/*`` enabled, and the tool ``info``
→ ``{"pid"}``, so that a test can kill the process behind a connection. :func:`new_content` is
what their ``upload`` tools write.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import MCPServer

from jupyter_fsbroker.serverkit import enable_files


def files_server(name: str) -> MCPServer[Any]:
    """A server named *name* with ``files/*`` enabled and the tool ``info``."""
    server: MCPServer[Any] = MCPServer(name, log_level="WARNING")
    enable_files(server)

    @server.tool()
    async def info() -> dict[str, Any]:
        """This process."""
        return {"pid": os.getpid()}

    return server


async def new_content(size: int, chunk_size: int) -> AsyncIterator[bytes]:
    """*size* bytes of ``b"new!"`` repeated, in chunks of *chunk_size* bytes."""
    piece = b"new!" * (chunk_size // 4)
    for start in range(0, size, chunk_size):
        yield piece[: min(chunk_size, size - start)]
