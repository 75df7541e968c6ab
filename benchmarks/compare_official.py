"""The official filesystem MCP server, for comparison with ``bench_wire.py``.

Run ``python benchmarks/compare_official.py`` (needs ``node`` and ``npm``; add
``--quick`` for fewer calls). It installs ``@modelcontextprotocol/server-filesystem``
from the npm registry into a temporary directory (removed at the end, like the
files it reads), starts it over stdio with that directory's data folder as its
only allowed directory, and measures what it can do that our benchmark does too:

* 1000 sequential ``read_text_file`` calls on a 96-byte file, driven by mcp's
  Python client (``mcp.client.stdio`` + ``ClientSession``): µs per call;
* ``read_media_file`` of a 16 MiB file (the whole file as base64 in one
  message): seconds and MB/s, and the peak RSS of both processes;
* the same ``read_media_file`` driven by a minimal newline-delimited JSON-RPC
  client written here (asyncio pipes, one ``readuntil`` per message), which
  tells how much of the time is the server's and how much is mcp's Python
  stdio client's.

If ``npm install`` fails (no node, no registry), it says so and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
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
from typing import Any

PACKAGE = "@modelcontextprotocol/server-filesystem"
MiB = 1024 * 1024


# -- memory ---------------------------------------------------------------------------------------


def memory_kib(pid: int | str = "self") -> dict[str, int]:
    """Current RSS and peak RSS (VmHWM) of process *pid*, in KiB (zeros if it is gone)."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return {"rss_kib": found.get("VmRSS", 0), "peak_kib": found.get("VmHWM", 0)}


def reset_peak(pid: int | str = "self") -> bool:
    """Reset the VmHWM of process *pid* to its current RSS (Linux ≥ 4.0); whether it worked."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def child_pid(name: str) -> int | None:
    """The pid of a child of this process whose command is *name*."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                text = stat.read()
            comm = text[text.index("(") + 1 : text.rindex(")")]
            ppid = int(text[text.rindex(")") + 2 :].split()[1])
            if ppid == me and comm == name:
                return int(entry)
    return None


# -- installing -----------------------------------------------------------------------------------


def install(prefix: Path) -> tuple[Path, str] | str:
    """``npm install`` the server into *prefix*; its entry point and version, or why not."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node and npm are not installed"
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", PACKAGE],
            cwd=prefix,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "npm install took more than 5 minutes"
    package = prefix / "node_modules" / PACKAGE
    if done.returncode != 0 or not (package / "package.json").exists():
        return f"npm install failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
    meta = json.loads((package / "package.json").read_text())
    bin_field = meta.get("bin")
    entry = next(iter(bin_field.values())) if isinstance(bin_field, dict) else bin_field or "dist/index.js"
    return package / entry, str(meta.get("version"))


# -- driving it with mcp's Python client ----------------------------------------------------------


def content_text(result: Any) -> str:
    block = result.content[0]
    return getattr(block, "text", "")


def media_bytes(result: Any) -> bytes:
    block = result.content[0]
    data = getattr(block, "data", None)
    if data is None:
        data = block.resource.blob
    return base64.b64decode(data)


async def with_mcp_client(entry: Path, data: Path, count: int, media: Path) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command="node", args=[str(entry), str(data)])
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as quiet:  # the server's start-up chatter on stderr
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            small = str(data / "small.txt")
            first = await session.call_tool("read_text_file", {"path": small})
            if first.is_error or len(content_text(first)) != 96:
                raise RuntimeError(f"read_text_file failed: {first.content}")
            start = time.perf_counter()
            for _ in range(count):
                await session.call_tool("read_text_file", {"path": small})
            seconds = time.perf_counter() - start
            out["text"] = {"count": count, "seconds": seconds, "us": seconds / count * 1e6}

            node = child_pid("node")
            reset_peak()
            node_reset = node is not None and reset_peak(node)
            before = memory_kib()
            start = time.perf_counter()
            result = await session.call_tool("read_media_file", {"path": str(media)})
            seconds = time.perf_counter() - start
            if result.is_error or media_bytes(result) != media.read_bytes():
                raise RuntimeError("read_media_file did not return the file's content")
            out["media"] = {
                "bytes": media.stat().st_size,
                "seconds": seconds,
                "client_rss_before_kib": before["rss_kib"],
                "client_peak_kib": memory_kib()["peak_kib"],
                "server_peak_kib": memory_kib(node)["peak_kib"] if node else 0,
                "server_peak_reset": node_reset,
            }
    return out


# -- driving it with a minimal client -------------------------------------------------------------


async def with_raw_client(entry: Path, data: Path, media: Path) -> dict[str, Any]:
    """``read_media_file`` over plain pipes: newline-delimited JSON, one ``readuntil`` per message."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(entry),
        str(data),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1024 * MiB,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    ids = iter(range(1, 1_000_000))

    async def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps(message).encode() + b"\n")
        await stdin.drain()

    async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(ids)
        await send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = json.loads(await stdout.readuntil(b"\n"))
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    try:
        await call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "compare_official", "version": "1"},
            },
        )
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        start = time.perf_counter()
        result = await call("tools/call", {"name": "read_media_file", "arguments": {"path": str(media)}})
        seconds = time.perf_counter() - start
        block = result["content"][0]
        payload = block.get("data") or block["resource"]["blob"]
        if base64.b64decode(payload) != media.read_bytes():
            raise RuntimeError("read_media_file did not return the file's content")
        return {"bytes": media.stat().st_size, "seconds": seconds}
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.kill()
            await process.wait()


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 text reads instead of 1000")
    parser.add_argument("--media-mib", type=int, default=16, help="size of the read_media_file file (16)")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements to FILE as JSON")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up as on Ctrl-C
    count = 200 if args.quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="fsbroker-official-"))
    try:
        installed = install(tmp)
        if isinstance(installed, str):
            print(f"compare_official: skipped: {installed}")
            return
        entry, version = installed
        data = tmp / "data"
        data.mkdir()
        (data / "small.txt").write_text("x" * 95 + "\n")
        media = data / "media.bin"
        media.write_bytes(os.urandom(args.media_mib * MiB))
        out: dict[str, Any] = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(),
            "server": f"{PACKAGE} {version}",
            "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
            "load_before": os.getloadavg(),
        }
        out.update(asyncio.run(with_mcp_client(entry, data, count, media)))
        out["media_raw"] = asyncio.run(with_raw_client(entry, data, media))
        out["load_after"] = os.getloadavg()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    text, mcp_media, raw = out["text"], out["media"], out["media_raw"]
    size = mcp_media["bytes"] / MiB
    rows = [
        (
            f"{count} sequential read_text_file, 96 B (mcp client)",
            f"{text['seconds']:.2f} s",
            f"{text['us']:.0f} µs each",
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
            f"{raw['seconds']:.2f} s",
            f"{raw['bytes'] / raw['seconds'] / 1e6:.1f} MB/s",
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
