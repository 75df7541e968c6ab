"""The MCP server that ``bench_wire.py`` and ``run.py`` drive: written with the server-side helper.

Run as ``python benchmarks/wire_server.py MODE`` where MODE is

``helper``
    stdio on the helper's non-blocking pipe streams (``run_stdio``);
``stock``
    stdio on mcp's own transport (``server.run("stdio")``, a thread per line):
    the helper's requests then go through mcp's ``ServerSession``, as every
    request of a server that does not serve stdio with the helper does;
``http``
    Streamable HTTP under uvicorn on 127.0.0.1 at a free port. The first line
    on stdout is ``PORT <n>``; the endpoint is ``http://127.0.0.1:<n>/mcp``.
    The server exits when its stdin reaches end of file, so it never outlives
    the process that started it (even one killed without a chance to clean up).
``http-stateless``
    the same, stateless (mcp's ``stateless_http``): files reach tools only on
    the 2026-07-28 era, by the files extension's batches.

Every tool does its timing and memory accounting inside the server, so the
numbers are those of the brokered ``files/*`` traffic alone:

``hash_file(path, chunk_size, concurrency)``
    Reads the file with ``FilesClient.iter_chunks`` and returns its sha256, the
    seconds the read took, and the server's RSS before and its peak RSS (VmHWM).
``round_trips(path, count, kind)``
    ``count`` sequential ``files/stat`` (``kind="stat"``) or ``files/read`` of the
    whole (small) file (``kind="read"``); returns the elapsed seconds.
``read_each(folder, count)``
    One ``files/read`` of each of *count* small files (``f0000.txt`` ...) in
    *folder*, in turn, each path new to the connection; the elapsed seconds.
``write_file(path, size, chunk_size)``
    Writes ``size`` pseudo-random bytes with ``FilesClient.write_bytes`` (staged
    chunks, made on the fly so the server never holds the whole content);
    returns their sha256, the seconds, the RSS figures.
``list_pages(path, page_size)``
    A recursive ``files/list`` of a folder, following ``nextCursor``; the
    entries and seconds of each page.
``watch_latency(path, disk_path, count, gap, new_files=False)``
    Watches the file's folder and rewrites the file on disk *count* times (or
    creates a new file beside it each time); the seconds from each write to
    its ``notifications/files/changed``.
``pandas_csv(path, local)``
    ``pandas.read_csv`` of the file opened through ``files(ctx).fsspec()``, or of
    *local* (its path on this machine) when given, in ``fs.run_sync``'s worker
    thread both times; the seconds, the CPU seconds of the process and of that
    thread, the frame's shape and a checksum of it, the bytes that crossed the wire.
``parquet_column(path, column, local)``
    ``pyarrow.parquet.read_table`` of one column, through the filesystem or of
    *local*; the same figures.
``noop()``
    Returns at once: the cost of a ``tools/call`` itself.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script: import this checkout, whatever the environment points at.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import Context, MCPServer
from procmem import memory_kib, reset_peak  # beside this file: on sys.path when run as a script

from jupyter_fsbroker.serverkit import FilesExtension, enable_files, files, run_stdio
from tests.support.hashing import digest_file

MiB = 1024 * 1024


async def pseudo_random(size: int, piece: int) -> AsyncIterator[bytes]:
    """*size* bytes in pieces of *piece* bytes: a random block, each copy stamped with its index."""
    block = os.urandom(piece)
    for index, start in enumerate(range(0, size, piece)):
        stamped = index.to_bytes(8, "little") + block[8:]
        yield stamped[: min(piece, size - start)]


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        "fsbroker-bench", version="1", log_level="WARNING", extensions=[FilesExtension()]
    )
    enable_files(server)

    @server.tool()
    async def hash_file(path: str, chunk_size: int, concurrency: int, ctx: Context) -> dict[str, Any]:
        """sha256 of a file read in chunks through the client's broker."""
        before = memory_kib()
        peak_reset = reset_peak()
        start = time.perf_counter()
        done = await digest_file(ctx, path, chunk_size=chunk_size, concurrency=concurrency)
        seconds = time.perf_counter() - start
        after = memory_kib()
        return {
            "sha256": done.sha256,
            "bytes": done.nbytes,
            "chunks": done.chunks,
            "requests": done.requests,
            "seconds": seconds,
            "rss_before_kib": before["rss_kib"],
            "peak_kib": after["peak_kib"],
            "peak_since_start_kib": before["peak_kib"],
            "peak_reset": peak_reset,
        }

    @server.tool()
    async def round_trips(path: str, count: int, kind: str, ctx: Context) -> dict[str, Any]:
        """*count* sequential ``files/stat`` or small ``files/read`` requests; the elapsed seconds."""
        async with files(ctx) as fs:
            if kind == "stat":
                await fs.stat(path)  # warm-up
                start = time.perf_counter()
                for _ in range(count):
                    await fs.stat(path)
            elif kind == "read":
                await fs.read(path)
                start = time.perf_counter()
                for _ in range(count):
                    await fs.read(path)
            else:
                raise ValueError(f"unknown kind {kind!r}")
            seconds = time.perf_counter() - start
        return {"count": count, "seconds": seconds}

    @server.tool()
    async def read_each(folder: str, count: int, ctx: Context) -> dict[str, Any]:
        """One ``files/read`` of each of ``folder/f0000.txt`` ... in turn (*count* files); the seconds."""
        paths = [f"{folder}/f{index:04d}.txt" for index in range(count)]
        async with files(ctx) as fs:
            start = time.perf_counter()
            for path in paths:
                await fs.read(path)
            seconds = time.perf_counter() - start
        return {"count": count, "seconds": seconds}

    @server.tool()
    async def write_file(path: str, size: int, chunk_size: int, ctx: Context) -> dict[str, Any]:
        """Write *size* pseudo-random bytes in staged chunks; their sha256 and the seconds."""
        before = memory_kib()
        peak_reset = reset_peak()
        digest = hashlib.sha256()

        async def content() -> AsyncIterator[bytes]:
            async for piece in pseudo_random(size, chunk_size):
                digest.update(piece)
                yield piece

        start = time.perf_counter()
        async with files(ctx) as fs:
            result = await fs.write_bytes(path, content(), chunk_size=chunk_size)
        seconds = time.perf_counter() - start
        after = memory_kib()
        return {
            "sha256": digest.hexdigest(),
            "bytes": result.bytes_written,
            "chunks": result.chunks,
            "seconds": seconds,
            "rss_before_kib": before["rss_kib"],
            "peak_kib": after["peak_kib"],
            "peak_reset": peak_reset,
        }

    @server.tool()
    async def list_pages(path: str, page_size: int, ctx: Context) -> dict[str, Any]:
        """A recursive ``files/list`` of *path*, page by page; the entries and seconds of each page."""
        pages: list[dict[str, Any]] = []
        cursor: str | None = None
        async with files(ctx) as fs:
            start = time.perf_counter()
            while True:
                params: dict[str, Any] = {"path": path, "recursive": True, "maxEntries": page_size}
                if cursor:
                    params["cursor"] = cursor
                page_start = time.perf_counter()
                result = await fs.request("files/list", params)
                pages.append({"entries": len(result["entries"]), "seconds": time.perf_counter() - page_start})
                cursor = result.get("nextCursor")
                if not cursor:
                    break
            seconds = time.perf_counter() - start
        return {"entries": sum(p["entries"] for p in pages), "seconds": seconds, "pages": pages}

    @server.tool()
    async def watch_latency(
        path: str, disk_path: str, count: int, gap: float, ctx: Context, new_files: bool = False
    ) -> dict[str, Any]:
        """Write a file on disk *count* times; for each, the seconds until its notification arrives.

        *path* is the file as the client names it, *disk_path* the same file on
        disk (the server shares the client's machine here). Each write puts its
        ``time.time()`` in the file: the same file rewritten each time, or with
        *new_files* a new file beside it each time (``new-0000.txt`` ...), created
        by the write. *gap* seconds pass between an event and the next write,
        longer than the client's coalescing window, so every write is reported
        on its own. A write not reported within 5 s counts as missed.
        """
        folder = path.rpartition("/")[0]
        latencies: list[float] = []
        missed = 0
        async with files(ctx) as fs, fs.watch(folder) as watch:
            events = aiter(watch)
            for index in range(count):
                with anyio.move_on_after(gap):  # a quiet spell: the previous write's events end here
                    while True:
                        await anext(events)
                target, on_disk = path, disk_path
                if new_files:
                    name = f"new-{index:04d}.txt"
                    target, on_disk = f"{folder}/{name}", os.path.join(os.path.dirname(disk_path), name)
                written = time.perf_counter()
                with open(on_disk, "w", encoding="ascii") as out:
                    out.write(f"{time.time():.6f}\n")
                with anyio.move_on_after(5) as waiting:
                    while (await anext(events)).path != target:
                        pass
                    latencies.append(time.perf_counter() - written)
                missed += waiting.cancelled_caught
        return {"latencies": latencies, "missed": missed}

    @server.tool()
    async def pandas_csv(path: str, ctx: Context, local: str | None = None) -> dict[str, Any]:
        """``pandas.read_csv`` through the brokered filesystem (or of the local file); the seconds."""
        import pandas as pd

        fs = files(ctx).fsspec()

        parse_cpu = 0.0

        def read() -> Any:
            nonlocal parse_cpu
            started = time.thread_time()
            try:
                if local is not None:
                    return pd.read_csv(local)
                with fs.open(path, "rb") as f:
                    return pd.read_csv(f)
            finally:
                parse_cpu = time.thread_time() - started

        start, cpu = time.perf_counter(), time.process_time()
        frame = await fs.run_sync(read)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        checksum = float(frame.select_dtypes("number").to_numpy().sum())
        return {
            "seconds": seconds,
            "cpu": cpu,  # the whole server process's
            "parse_cpu": parse_cpu,  # the thread that ran read_csv
            "shape": list(frame.shape),
            "checksum": checksum,
            "moved": fs.bytes_read,
        }

    @server.tool()
    async def parquet_column(
        path: str, column: str, ctx: Context, local: str | None = None
    ) -> dict[str, Any]:
        """One column of a Parquet file read by pyarrow through the brokered filesystem (or locally)."""
        import pyarrow.parquet as pq

        fs = files(ctx).fsspec()

        def read() -> Any:
            if local is not None:
                return pq.read_table(local, columns=[column])
            return pq.read_table(path, columns=[column], filesystem=fs)

        start = time.perf_counter()
        table = await fs.run_sync(read)
        seconds = time.perf_counter() - start
        checksum = float(table.column(0).to_numpy().sum())
        return {"seconds": seconds, "rows": table.num_rows, "checksum": checksum, "moved": fs.bytes_read}

    @server.tool()
    async def noop() -> str:
        """Nothing: the cost of a tools/call round trip."""
        return "ok"

    return server


def exit_at_eof() -> None:
    """Leave at once when stdin ends: the process that started us is gone."""

    def wait() -> None:
        while os.read(0, 4096):
            pass
        os._exit(0)

    threading.Thread(target=wait, name="exit-at-eof", daemon=True).start()


def serve_http(*, stateless: bool = False) -> None:
    import uvicorn

    exit_at_eof()
    app = build_server().streamable_http_app(host="127.0.0.1", stateless_http=stateless)
    # IPPROTO_TCP named, as uvicorn's own binding has it: asyncio sets TCP_NODELAY only on sockets
    # of that protocol, and without it a small response waits out the peer's delayed ACK (~40 ms).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[listener])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "helper"
    if mode == "helper":
        run_stdio(build_server())
    elif mode == "stock":
        build_server().run("stdio")
    elif mode == "http":
        serve_http()
    elif mode == "http-stateless":
        serve_http(stateless=True)
    else:
        sys.exit(f"usage: {sys.argv[0]} [helper|stock|http|http-stateless]")


if __name__ == "__main__":
    main()
