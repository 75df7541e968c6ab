"""A server built with the helper that streams whole files through its client, and measures its own memory.

Run it as ``python stream_server.py`` (the helper's ``run_stdio``). Tools:

``digest {path, chunk_size?, concurrency?}``
    Reads the file with ``FilesClient.iter_chunks`` (1 MiB chunks, 4 in
    flight by default) and returns ``{"sha256", "bytes"}``.
``churn {count?, size?}``
    :func:`tests.support.memory.churn` in this process: what a server
    author's own code does after a transfer.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import enable_files, run_stdio
from tests.support.hashing import digest_file
from tests.support.memory import churn

MiB = 1024 * 1024


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("fsbroker-stream-test", version="1", log_level="WARNING")
    enable_files(server)

    @server.tool()
    async def digest(path: str, ctx: Context, chunk_size: int = MiB, concurrency: int = 4) -> dict[str, Any]:
        """sha256 of a file read in chunks through the client."""
        done = await digest_file(ctx, path, chunk_size=chunk_size, concurrency=concurrency)
        return {"sha256": done.sha256, "bytes": done.nbytes}

    @server.tool(name="churn")
    async def churn_tool(count: int = 200, size: int = 4 * MiB) -> dict[str, int]:
        """Allocate and free *count* buffers of *size* bytes; RSS before, with them and after, in KiB."""
        return churn(count, size)

    return server


def main() -> None:
    run_stdio(build_server())


if __name__ == "__main__":
    main()
