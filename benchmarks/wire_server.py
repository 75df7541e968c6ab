"""The MCP server that ``bench_wire.py`` drives: written with the server-side helper.

Run as ``python benchmarks/wire_server.py MODE`` where MODE is

``helper``
    stdio on the helper's non-blocking pipe streams (``run_stdio``);
``stock``
    stdio on mcp's own transport (``server.run("stdio")``, a thread per line);
``http``
    Streamable HTTP under uvicorn on 127.0.0.1 at a free port. The first line
    on stdout is ``PORT <n>``; the endpoint is ``http://127.0.0.1:<n>/mcp``.
    The server exits when its stdin reaches end of file, so it never outlives
    the process that started it (even one killed without a chance to clean up).

Every tool does its timing and memory accounting inside the server, so the
numbers are those of the brokered ``files/*`` traffic alone:

``hash_file(path, chunk_size, concurrency)``
    Reads the file with ``FilesClient.iter_chunks`` and returns its sha256, the
    seconds the read took, and the server's RSS before and its peak RSS (VmHWM).
``round_trips(path, count, kind)``
    ``count`` sequential ``files/stat`` (``kind="stat"``) or ``files/read`` of the
    whole (small) file (``kind="read"``); returns the elapsed seconds.
``write_file(path, size, chunk_size)``
    Writes ``size`` pseudo-random bytes with ``FilesClient.write_bytes`` (staged
    chunks, made on the fly so the server never holds the whole content);
    returns their sha256, the seconds, the RSS figures.
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

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.protocol.server import enable_files, files, run_stdio

MiB = 1024 * 1024


def memory_kib() -> dict[str, int]:
    """This process's current RSS and its peak RSS (VmHWM) in KiB, from /proc/self/status."""
    found: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return {"rss_kib": found.get("VmRSS", 0), "peak_kib": found.get("VmHWM", 0)}


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0); whether it worked."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


async def pseudo_random(size: int, piece: int) -> AsyncIterator[bytes]:
    """*size* bytes in pieces of *piece* bytes: a random block, each copy stamped with its index."""
    block = os.urandom(piece)
    for index, start in enumerate(range(0, size, piece)):
        stamped = index.to_bytes(8, "little") + block[8:]
        yield stamped[: min(piece, size - start)]


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("fsbroker-bench", version="1", log_level="WARNING")
    enable_files(server)

    @server.tool()
    async def hash_file(path: str, chunk_size: int, concurrency: int, ctx: Context) -> dict[str, Any]:
        """sha256 of a file read in chunks through the client's broker."""
        before = memory_kib()
        peak_reset = reset_peak()
        digest = hashlib.sha256()
        nbytes = chunks = 0
        start = time.perf_counter()
        async with (
            files(ctx) as fs,
            fs.iter_chunks(path, chunk_size=chunk_size, concurrency=concurrency) as stream,
        ):
            async for data in stream:
                digest.update(data)
                nbytes += len(data)
                chunks += 1
            requests = stream.requests
        seconds = time.perf_counter() - start
        after = memory_kib()
        return {
            "sha256": digest.hexdigest(),
            "bytes": nbytes,
            "chunks": chunks,
            "requests": requests,
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


def serve_http() -> None:
    import uvicorn

    exit_at_eof()
    app = build_server().streamable_http_app(host="127.0.0.1")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
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
    else:
        sys.exit(f"usage: {sys.argv[0]} [helper|stock|http]")


if __name__ == "__main__":
    main()
