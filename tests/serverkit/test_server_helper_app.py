"""The MCP server the helper tests drive: every ``FilesClient`` method behind one tool.

Run as ``python test_server_helper_app.py [--require] [--stock]``: ``--require``
refuses clients without ``filesystemBrokering`` already at ``initialize``;
``--stock`` serves with mcp's own stdio transport instead of ``run_stdio``.

The ``call`` tool runs ``OPS[op](fs, **args)`` and returns ``{"ok": value}`` or
``{"error": {...}}`` describing the typed exception, so tests see exactly what
a server author's code sees. (No tests here: pytest collects nothing from it.)
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import random
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import (
    FilesClient,
    FilesRequestError,
    client_brokers_files,
    enable_files,
    files,
    run_stdio,
)

MiB = 1024 * 1024


def pattern(size: int, seed: int) -> bytes:
    """Deterministic pseudo-random bytes (the tests build the same)."""
    return random.Random(seed).randbytes(size)


def _asdict(value: Any) -> Any:
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


async def op_read_text(fs: FilesClient, path: str, **kw: Any) -> str:
    return await fs.read_text(path, **kw)


async def op_read_bytes(fs: FilesClient, path: str, **kw: Any) -> dict[str, Any]:
    data = await fs.read_bytes(path, **kw)
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


async def op_iter_chunks(
    fs: FilesClient, path: str, stop_after: int | None = None, **kw: Any
) -> dict[str, Any]:
    digest = hashlib.sha256()
    sizes: list[int] = []
    texts: list[str] = []
    async with fs.iter_chunks(path, **kw) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, str):
                texts.append(chunk)
                digest.update(chunk.encode("utf-8"))
            else:
                digest.update(chunk)
            sizes.append(len(chunk))
            if stop_after is not None and len(sizes) >= stop_after:
                break
        requests = chunks.requests
    return {"sizes": sizes, "sha256": digest.hexdigest(), "requests": requests, "text": "".join(texts)}


async def op_write_text(fs: FilesClient, path: str, text: str, **kw: Any) -> dict[str, Any]:
    return _asdict(await fs.write_text(path, text, **kw))


async def op_write_text_repeat(
    fs: FilesClient, path: str, unit: str, times: int, **kw: Any
) -> dict[str, Any]:
    return _asdict(await fs.write_text(path, unit * times, **kw))


async def op_write_bytes(fs: FilesClient, path: str, b64: str, **kw: Any) -> dict[str, Any]:
    return _asdict(await fs.write_bytes(path, base64.b64decode(b64), **kw))


async def op_write_pattern(
    fs: FilesClient, path: str, size: int, seed: int, stream: bool = False, **kw: Any
) -> dict[str, Any]:
    data = pattern(size, seed)
    if not stream:
        return _asdict(await fs.write_bytes(path, data, **kw))

    async def pieces() -> Any:
        # Uneven pieces, as a generator would make them.
        step = 300_001
        for start in range(0, len(data), step):
            yield data[start : start + step]

    return _asdict(await fs.write_bytes(path, pieces(), **kw))


async def op_list_dir(fs: FilesClient, path: str, **kw: Any) -> list[dict[str, Any]]:
    return [_asdict(entry) for entry in await fs.list_dir(path, **kw)]


async def op_stat(fs: FilesClient, path: str) -> dict[str, Any]:
    return _asdict(await fs.stat(path))


async def op_exists(fs: FilesClient, path: str) -> bool:
    return await fs.exists(path)


async def op_create(fs: FilesClient, path: str, **kw: Any) -> dict[str, Any]:
    return _asdict(await fs.create(path, **kw))


async def op_delete(fs: FilesClient, path: str, **kw: Any) -> dict[str, Any]:
    return _asdict(await fs.delete(path, **kw))


async def op_rename(fs: FilesClient, path: str, new_path: str, **kw: Any) -> str:
    return await fs.rename(path, new_path, **kw)


async def op_consent(
    fs: FilesClient, message: str, paths: list[str] | dict[str, list[str]], operations: Any = None
) -> Any:
    return _asdict(await fs.consent(message, paths, operations))


async def op_lock_and_fail(fs: FilesClient, path: str, **kw: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    try:
        async with fs.lock(path, **kw) as lock_id:
            seen["lock_id"] = lock_id
            seen["locked"] = (await fs.stat(path)).locked
            raise ValueError("boom")
    except ValueError:
        seen["raised"] = True
    return seen


async def op_lock_hold(fs: FilesClient, path: str, **kw: Any) -> dict[str, Any]:
    async with fs.lock(path, **kw) as lock_id:
        return {"lock_id": lock_id, "locked": (await fs.stat(path)).locked}


async def op_increment(fs: FilesClient, path: str) -> int:
    async with fs.lock(path, create=True) as lock_id:
        text = await fs.read_text(path, lock_id=lock_id)
        value = int(text.strip() or "0") + 1
        # Give concurrent callers every chance to interleave.
        await anyio.sleep(0.01)
        await fs.write_text(path, f"{value}\n", lock_id=lock_id)
        return value


async def op_watch(
    fs: FilesClient, path: str, count: int = 1, timeout: float = 10.0, **kw: Any
) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    async with fs.watch(path, **kw) as watch:
        with anyio.move_on_after(timeout):
            async for event in watch:
                events.append(_asdict(event))
                if len(events) >= count:
                    break
        watch_id = watch.watch_id
    return {"watch_id": watch_id, "events": events}


async def op_raw(fs: FilesClient, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
    return await fs.request(method, params, **kw)


async def op_roots(fs: FilesClient) -> list[dict[str, Any]]:
    return [dataclasses.asdict(root) for root in await fs.roots()]


async def op_write_too_big(fs: FilesClient, path: str) -> Any:
    content = base64.b64encode(bytes(2 * MiB + 1)).decode("ascii")
    return await fs.request("files/write", {"path": path, "content": content, "encoding": "base64"})


OPS: dict[str, Callable[..., Awaitable[Any]]] = {
    name[3:]: fn for name, fn in dict(globals()).items() if name.startswith("op_") and callable(fn)
}


def describe(exc: FilesRequestError) -> dict[str, Any]:
    return {
        "class": type(exc).__name__,
        "code": exc.code,
        "name": exc.name,
        "reason": exc.reason,
        "path": exc.path,
        "data": exc.data,
        "text": str(exc),
    }


def build_server(*, require: bool = False) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("helper-test")
    enable_files(server, require=require)

    @server.tool()
    async def brokers(ctx: Context) -> bool:
        """Whether the client brokers files."""
        return client_brokers_files(ctx)

    @server.tool()
    async def need_files(ctx: Context) -> str:
        """Fails with SEP-1708's -32603 error unless the client brokers files."""
        files(ctx)
        return "ok"

    @server.tool()
    async def call(
        op: str,
        ctx: Context,
        args: dict[str, Any] | None = None,
        consent_message: str | None = None,
        consent_operations: list[str] | None = None,
        consent_access: dict[str, list[str]] | None = None,
    ) -> dict[str, Any]:
        """Run one helper operation; report its value or its typed error."""
        async with files(
            ctx,
            consent_message=consent_message,
            consent_operations=consent_operations or (),
            consent_access=consent_access,
        ) as fs:
            try:
                return {"ok": await OPS[op](fs, **(args or {}))}
            except FilesRequestError as exc:
                return {"error": describe(exc)}

    @server.tool()
    async def noisy(path: str, ctx: Context) -> str:
        """Writes junk to stdout and reads stdin: neither may touch the wire."""
        print("this is not JSON-RPC", flush=True)
        sys.stdout.write("{ nor this\n")
        sys.stdout.flush()
        leftover = sys.stdin.read()
        return f"{leftover!r} {await files(ctx).read_text(path)}"

    @server.tool()
    async def uncaught(path: str, ctx: Context) -> str:
        """Lets a FilesRequestError escape: it becomes the tool's isError result."""
        return await files(ctx).read_text(path)

    return server


def main(argv: list[str]) -> None:
    server = build_server(require="--require" in argv)
    if "--stock" in argv:
        server.run("stdio")
    else:
        run_stdio(server)


if __name__ == "__main__":
    main(sys.argv[1:])
