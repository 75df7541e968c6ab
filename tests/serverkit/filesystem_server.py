"""An MCP server whose tools use ``files(ctx).fsspec()`` as blocking library code does.

Each tool runs its work with ``await fs.run_sync(...)`` (one, ``on_the_loop``, deliberately not)
and answers what it saw, for tests/serverkit/test_filesystem.py to compare with the local files.
Run it over stdio, or ``--http 127.0.0.1:0`` as the example analysis server.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import enable_files, files
from tests.support.kit_serving import serve_from_argv

__all__ = ["build_server"]

WHY = "The filesystem tests read and write these files."


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _outcome(value: Any) -> Any:
    """Bytes as base64; an exception as its class, the builtins it is, the broker's reason and text."""
    if not isinstance(value, BaseException):
        return _b64(value) if isinstance(value, bytes) else value
    builtins = (PermissionError, FileNotFoundError, FileExistsError, IsADirectoryError)
    return {
        "error": type(value).__name__,
        "builtins": [b.__name__ for b in builtins if isinstance(value, b)],
        "reason": getattr(value, "reason", None),
        "message": str(value),
    }


def _attempt(fs: Any, op: str, path: str, target: str | None) -> Any:
    try:
        if op == "read":
            return fs.cat_file(path)
        if op == "open":
            with fs.open(path, "rb") as f:
                return f.read()
        if op == "write":
            with fs.open(path, "wb") as f:
                f.write(b"written")
            return "written"
        if op == "ls":
            return fs.ls(path, detail=False)
        if op == "rm":
            fs.rm(path)
        elif op == "mv":
            fs.mv(path, target)
        return "done"
    except Exception as exc:
        return exc


def _sequential(fs: Any, path: str, piece: int) -> dict[str, Any]:
    digest, size = hashlib.sha256(), 0
    with fs.open(path, "rb") as f:
        while data := f.read(piece):
            digest.update(data)
            size += len(data)
    return {"sha256": digest.hexdigest(), "bytes": size}


def _threads(fs: Any, path: str, spans: list[list[int]], workers: int) -> list[str]:
    """Each span read by a pool's thread: seek and read on one shared handle, or cat_file on the fs.

    The first *workers* spans are read by all the threads at once, each seeking and then waiting
    for the others' seeks before it reads: the order in which DuckDB's threads may call them.
    """
    seeked = threading.Barrier(workers, timeout=60)  # broken, not hung, should a thread be missing
    with fs.open(path, "rb") as shared, ThreadPoolExecutor(workers) as pool:

        def read(index: int, offset: int, length: int) -> bytes:
            if index >= workers and index % 3 == 2:
                return fs.cat_file(path, offset, offset + length)  # type: ignore[no-any-return]
            shared.seek(offset)
            if index < workers:
                seeked.wait()
            return shared.read(length)  # type: ignore[no-any-return]

        return [_b64(d) for d in pool.map(read, range(len(spans)), *zip(*spans, strict=True))]


def _tails(fs: Any, path: str, length: int, workers: int) -> list[str]:
    """*workers* threads opening *path* at once, each reading its last *length* bytes."""
    start = threading.Barrier(workers, timeout=60)

    def tail(_: int) -> bytes:
        start.wait()
        with fs.open(path, "rb") as f:
            f.seek(-length, 2)
            return f.read()  # type: ignore[no-any-return]

    with ThreadPoolExecutor(workers) as pool:
        return [_b64(d) for d in pool.map(tail, range(workers))]


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
    async def ranges(spans: list[list[Any]], ctx: Context) -> list[Any]:
        """``cat_ranges`` of ``[path, start, end]`` spans; each range's bytes or error."""
        fs = files(ctx, consent_message=WHY).fsspec()
        paths, starts, ends = (list(column) for column in zip(*spans, strict=True))
        return [_outcome(v) for v in await fs.run_sync(fs.cat_ranges, paths, starts, ends)]

    @server.tool()
    async def sequential(path: str, piece: int, ctx: Context) -> dict[str, Any]:
        fs = files(ctx, consent_message=WHY).fsspec()
        return await fs.run_sync(_sequential, fs, path, piece)

    @server.tool()
    async def threads(path: str, spans: list[list[int]], workers: int, ctx: Context) -> list[str]:
        fs = files(ctx, consent_message=WHY).fsspec()
        return await fs.run_sync(_threads, fs, path, spans, workers)

    @server.tool()
    async def tails(path: str, length: int, workers: int, ctx: Context) -> list[str]:
        fs = files(ctx, consent_message=WHY).fsspec()
        return await fs.run_sync(_tails, fs, path, length, workers)

    @server.tool()
    async def attempt(op: str, path: str, ctx: Context, target: str | None = None) -> dict[str, Any]:
        """One operation (read, open, write, ls, rm, mv): ``{"outcome": ...}`` (see :func:`_outcome`)."""
        fs = files(ctx, consent_message=WHY).fsspec()
        return {"outcome": _outcome(await fs.run_sync(_attempt, fs, op, path, target))}

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
    serve_from_argv(build_server())
