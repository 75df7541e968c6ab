"""An MCP server whose tools use ``files(ctx).fsspec()`` as blocking library code does.

Each tool runs its work with ``await fs.run_sync(...)`` (one, ``on_the_loop``, deliberately not)
and answers what it saw, for tests/serverkit/test_filesystem.py to compare with the local files.
"""

from __future__ import annotations

import base64
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import enable_files, files, run_stdio

__all__ = ["build_server"]

WHY = "The filesystem tests read and write these files."


def _reads(fs: Any, path: str, spans: list[list[int]]) -> list[str]:
    with fs.open(path, "rb") as f:
        out = []
        for offset, length in spans:
            f.seek(offset)
            out.append(base64.b64encode(f.read(length)).decode())
        return out


def _write(fs: Any, path: str, text: str, fail: bool) -> None:
    with fs.open(path, "wb") as f:
        f.write(text.encode())
        if fail:
            raise ValueError("failed half way")


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("filesystem-test")
    enable_files(server)

    @server.tool()
    async def reads(path: str, spans: list[list[int]], ctx: Context) -> list[str]:
        fs = files(ctx, consent_message=WHY).fsspec()
        return await fs.run_sync(_reads, fs, path, spans)

    @server.tool()
    async def cat(path: str, start: int | None, end: int | None, ctx: Context) -> str:
        fs = files(ctx, consent_message=WHY).fsspec()
        data = await fs.run_sync(fs.cat_file, path, start, end)
        return base64.b64encode(data).decode()

    @server.tool()
    async def listing(path: str, ctx: Context) -> dict[str, Any]:
        fs = files(ctx, consent_message=WHY).fsspec()
        entries = await fs.run_sync(fs.ls, path)
        info = await fs.run_sync(fs.info, f"fsbroker://{path}")
        keep = ("name", "size", "type")
        return {"entries": [{k: e[k] for k in keep} for e in entries], "info": {k: info[k] for k in keep}}

    @server.tool()
    async def write(path: str, text: str, ctx: Context, fail: bool = False) -> str:
        fs = files(ctx, consent_message=WHY).fsspec()
        try:
            await fs.run_sync(_write, fs, path, text, fail)
        except ValueError as exc:
            return f"failed: {exc}"
        return "written"

    @server.tool()
    async def on_the_loop(path: str, ctx: Context) -> str:
        fs = files(ctx, consent_message=WHY).fsspec()
        try:
            fs.info(path)
        except RuntimeError as exc:
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    return server


if __name__ == "__main__":
    run_stdio(build_server())
