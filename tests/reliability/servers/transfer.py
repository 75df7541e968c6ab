"""A server that moves files in chunks through the client, for fault tests: built with the server helper.

Usage: ``transfer.py`` (stdio) or ``transfer.py --http --fd N`` (Streamable HTTP under uvicorn on
the listening socket inherited as descriptor *N*; prints ``PORT <n>`` when ready).

Tools:

``info`` → ``{"pid"}``;
``read_all {path, chunk_size, concurrency}`` → ``{"bytes", "sha256"}`` of the file read with
``iter_chunks``;
``upload {path, size, chunk_size}`` → ``{"bytes"}``: *size* bytes of ``b"new!"`` written with
``write_bytes`` (staged chunks, committed at the end).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import files
from tests.reliability.servers.base import files_server, new_content
from tests.support.handover import run_files_server
from tests.support.hashing import digest_file


def build_server() -> MCPServer[Any]:
    server = files_server("transfer")

    @server.tool()
    async def read_all(path: str, chunk_size: int, concurrency: int, ctx: Context) -> dict[str, Any]:
        """Read a whole file in chunks; its size and sha256."""
        done = await digest_file(ctx, path, chunk_size=chunk_size, concurrency=concurrency)
        return {"bytes": done.nbytes, "sha256": done.sha256}

    @server.tool()
    async def upload(path: str, size: int, chunk_size: int, ctx: Context) -> dict[str, Any]:
        """Write *size* bytes in staged chunks."""
        async with files(ctx) as fs:
            result = await fs.write_bytes(path, new_content(size, chunk_size), chunk_size=chunk_size)
        return {"bytes": result.bytes_written}

    return server


if __name__ == "__main__":
    run_files_server(build_server)
