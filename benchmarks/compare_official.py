"""The official filesystem MCP server, driven over stdio: the comparison the broker is measured against.

Run ``python benchmarks/compare_official.py`` (needs ``node`` and ``npm``; add
``--quick`` for fewer calls). ``run.py`` uses the functions here for its rows 3
and 4. :func:`install` puts ``@modelcontextprotocol/server-filesystem`` at the
pinned :data:`VERSION` into a folder with ``npm install --prefix`` (a cache
folder outside the repository by default, reused while it holds that version);
the server is started over stdio with a temporary data folder as its only
allowed directory, and measured doing what the broker does too:

* sequential ``read_text_file`` calls on a small file, driven by
  :class:`PipeClient`, a minimal newline-delimited JSON-RPC client written
  here (asyncio pipes, :mod:`orjson`, one ``readuntil`` per message): the
  server's best case, and the baseline of ``run.py``'s row 4; and the same
  driven by mcp's Python client (``mcp.client.stdio`` + ``ClientSession``),
  timed at that client;
* ``read_media_file`` of a binary file (the whole file as base64 in one
  message) driven by :class:`PipeClient` (row 3's baseline);
* the same ``read_media_file`` through mcp's Python client, with the peak RSS
  of both processes (the script's own command only: it takes ~13 s for 16 MiB,
  nearly all of it in mcp's stdio client).

If ``npm install`` fails (no node, no registry), it says so and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
from procmem import child_pid, memory_kib, reset_peak

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"
MiB = 1024 * 1024


# -- installing -----------------------------------------------------------------------------------


def default_install_dir() -> Path:
    """Where the pinned server is installed unless told otherwise: a cache folder, never the repository."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "jupyter-fsbroker-bench" / f"server-filesystem-{VERSION}"


def install(prefix: Path, version: str = VERSION) -> tuple[Path, str] | str:
    """``npm install --prefix PREFIX`` the server at *version* unless it is there; entry point, version.

    Returns why not, as a string, when node or npm is missing or the install fails.
    """
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node and npm are not installed"
    package = prefix / "node_modules" / PACKAGE
    meta_path = package / "package.json"
    if not (meta_path.exists() and json.loads(meta_path.read_text()).get("version") == version):
        prefix.mkdir(parents=True, exist_ok=True)
        spec = f"{PACKAGE}@{version}"
        try:
            done = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    spec,
                ],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return "npm install took more than 5 minutes"
        if done.returncode != 0 or not meta_path.exists():
            return f"npm install failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
    meta = json.loads(meta_path.read_text())
    bin_field = meta.get("bin")
    entry = next(iter(bin_field.values())) if isinstance(bin_field, dict) else bin_field or "dist/index.js"
    return package / entry, str(meta.get("version"))


def node_version() -> str:
    """``node --version``, or ``""`` without node."""
    if shutil.which("node") is None:
        return ""
    return subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()


# -- the minimal pipe client ----------------------------------------------------------------------


class PipeClient:
    """The server over plain pipes: newline-delimited JSON-RPC (:mod:`orjson`), one ``readuntil`` per message.

    ``async with PipeClient(entry, folder) as client:`` starts ``node ENTRY
    FOLDER``, initializes, and stops the server on exit (closing its stdin).
    """

    def __init__(self, entry: Path, folder: Path) -> None:
        self.entry = entry
        self.folder = folder
        self._process: asyncio.subprocess.Process | None = None
        self._next_id = 0

    async def __aenter__(self) -> PipeClient:
        self._process = await asyncio.create_subprocess_exec(
            "node",
            str(self.entry),
            str(self.folder),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=1024 * MiB,
        )
        info = {"name": "compare_official", "version": "1"}
        await self.call(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        )
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
        await self._process.stdin.drain()

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request; its result (other messages in between are skipped)."""
        assert self._process is not None and self._process.stdout is not None
        self._next_id += 1
        request_id = self._next_id
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = orjson.loads(await self._process.stdout.readuntil(b"\n"))
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    async def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.call("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result.get('content')}")
        return result


def media_payload(result: dict[str, Any]) -> bytes:
    """The bytes of a ``read_media_file`` result."""
    block = result["content"][0]
    return base64.b64decode(block.get("data") or block["resource"]["blob"])


async def timed_media_read(client: PipeClient, media: Path, expected: bytes) -> float:
    """Seconds of one ``read_media_file`` call of *media* (timed here); checks the bytes it returned."""
    start = time.perf_counter()
    result = await client.tool("read_media_file", {"path": str(media)})
    seconds = time.perf_counter() - start
    if media_payload(result) != expected:
        raise RuntimeError("read_media_file did not return the file's content")
    return seconds


async def pipe_media_reads(entry: Path, folder: Path, media: Path, repeats: int) -> list[float]:
    """Seconds of each of *repeats* ``read_media_file`` calls of *media* (timed here), all in one server."""
    expected = media.read_bytes()
    async with PipeClient(entry, folder) as client:
        return [await timed_media_read(client, media, expected) for _ in range(repeats)]


async def timed_text_reads(client: PipeClient, paths: list[Path]) -> float:
    """Seconds of one sequential ``read_text_file`` call per path in *paths*, timed here."""
    arguments = [{"path": str(path)} for path in paths]
    start = time.perf_counter()
    for each in arguments:
        await client.tool("read_text_file", each)
    return time.perf_counter() - start


async def pipe_text_reads(entry: Path, folder: Path, small: Path, count: int, repeats: int) -> list[float]:
    """Seconds of each of *repeats* runs of *count* sequential ``read_text_file`` calls, pipe client."""
    async with PipeClient(entry, folder) as client:
        await client.tool("read_text_file", {"path": str(small)})
        return [await timed_text_reads(client, [small] * count) for _ in range(repeats)]


# -- mcp's Python client --------------------------------------------------------------------------


def _text(result: Any) -> str:
    return str(getattr(result.content[0], "text", ""))


def _media(result: Any) -> bytes:
    block = result.content[0]
    data = getattr(block, "data", None)
    if data is None:
        data = block.resource.blob
    return base64.b64decode(data)


async def mcp_text_reads(entry: Path, folder: Path, small: Path, count: int, repeats: int) -> list[float]:
    """Seconds of each of *repeats* runs of *count* sequential ``read_text_file`` calls, mcp's client."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command="node", args=[str(entry), str(folder)])
    expected = small.read_text()
    seconds = []
    with open(os.devnull, "w") as quiet:  # the server's start-up chatter on stderr
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool("read_text_file", {"path": str(small)})
            if first.is_error or _text(first) != expected:
                raise RuntimeError(f"read_text_file failed: {first.content}")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(count):
                    await session.call_tool("read_text_file", {"path": str(small)})
                seconds.append(time.perf_counter() - start)
    return seconds


async def mcp_media_read(entry: Path, folder: Path, media: Path) -> dict[str, Any]:
    """One ``read_media_file`` through mcp's client: seconds and the peak RSS of both processes."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command="node", args=[str(entry), str(folder)])
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            node = child_pid("node")
            reset_peak()
            node_reset = node is not None and reset_peak(node)
            before = memory_kib()
            start = time.perf_counter()
            result = await session.call_tool("read_media_file", {"path": str(media)})
            seconds = time.perf_counter() - start
            if result.is_error or _media(result) != media.read_bytes():
                raise RuntimeError("read_media_file did not return the file's content")
            return {
                "bytes": media.stat().st_size,
                "seconds": seconds,
                "client_rss_before_kib": before["rss_kib"],
                "client_peak_kib": memory_kib()["peak_kib"],
                "server_peak_kib": memory_kib(node)["peak_kib"] if node else 0,
                "server_peak_reset": node_reset,
            }


# -- the command ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 text reads instead of 1000")
    parser.add_argument("--media-mib", type=int, default=16, help="size of the read_media_file file (16)")
    parser.add_argument("--install-dir", type=Path, help=f"npm prefix (default {default_install_dir()})")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements to FILE as JSON")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up as on Ctrl-C
    count = 200 if args.quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="fsbroker-official-"))
    try:
        installed = install(args.install_dir or default_install_dir())
        if isinstance(installed, str):
            print(f"compare_official: skipped: {installed}")
            return
        entry, version = installed
        data = tmp / "data"
        data.mkdir()
        small = data / "small.txt"
        small.write_text("x" * 95 + "\n")
        media = data / "media.bin"
        media.write_bytes(os.urandom(args.media_mib * MiB))
        out: dict[str, Any] = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(),
            "server": f"{PACKAGE} {version}",
            "node": node_version(),
            "load_before": os.getloadavg(),
        }
        [text] = asyncio.run(mcp_text_reads(entry, data, small, count, 1))
        out["text"] = {"count": count, "seconds": text, "us": text / count * 1e6}
        [piped] = asyncio.run(pipe_text_reads(entry, data, small, count, 1))
        out["text_raw"] = {"count": count, "seconds": piped, "us": piped / count * 1e6}
        out["media"] = asyncio.run(mcp_media_read(entry, data, media))
        [raw] = asyncio.run(pipe_media_reads(entry, data, media, 1))
        out["media_raw"] = {"bytes": media.stat().st_size, "seconds": raw}
        out["load_after"] = os.getloadavg()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    mcp_media, raw_media = out["media"], out["media_raw"]
    size = mcp_media["bytes"] / MiB
    rows = [
        (
            f"{count} sequential read_text_file, 96 B (mcp client)",
            f"{out['text']['seconds']:.2f} s",
            f"{out['text']['us']:.0f} µs each",
        ),
        (
            f"{count} sequential read_text_file, 96 B (minimal pipe client)",
            f"{out['text_raw']['seconds']:.2f} s",
            f"{out['text_raw']['us']:.0f} µs each",
        ),
        (
            f"read_media_file {size:.0f} MiB (mcp client)",
            f"{mcp_media['seconds']:.2f} s",
            f"{mcp_media['bytes'] / mcp_media['seconds'] / 1e6:.1f} MB/s",
        ),
        (
            "  peak RSS during it: client / node server",
            f"{mcp_media['client_peak_kib'] / 1024:.0f} MiB",
            f"{mcp_media['server_peak_kib'] / 1024:.0f} MiB",
        ),
        (
            f"read_media_file {size:.0f} MiB (minimal pipe client)",
            f"{raw_media['seconds']:.2f} s",
            f"{raw_media['bytes'] / raw_media['seconds'] / 1e6:.1f} MB/s",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{out['server']} on node {out['node']}, over stdio")
    for name, first, second in rows:
        print(f"{name:<{width}}  {first:>9}  {second:>14}")
    load = "/".join(f"{x:.1f}" for x in (out["load_before"][0], out["load_after"][0]))
    print(f"\n{out['cpus']} CPUs, {out['date']}, load average before/after {load}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
