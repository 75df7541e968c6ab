"""A server for the reliability tests, built with the server helper: it drives a client's ``files/*``.

Usage: ``app.py`` (stdio) or ``app.py --http --fd N`` (Streamable HTTP under uvicorn on the
listening socket inherited as descriptor *N*; prints ``PORT <n>`` when it is ready).

Tools (paths as the client shares them, ``data/...``):

``info`` → ``{"pid"}``.
``request {method, params}`` → ``{"result": ...}`` or ``{"error": {code, name, reason, message, data}}``:
    one raw request, never repeated.
``upload {path, size, chunk_size}`` → ``{"bytes"}``: *size* bytes written with ``write_bytes``
    (staged chunks, committed by the last).
``locked_update {path, hold}`` → ``{"before", "after"}``: under ``fs.lock``, read the file, wait
    *hold* seconds, append ``"+"``.
``watch {path, recursive, count, timeout}`` → ``{"events": [...]}``: the first *count* events.
``increment {path, times}`` → ``{"done", "conflicts", "requests"}``: *times* locked
    read-modify-write increments of the integer in *path*: a ``keepLocked`` read (repeated at
    once, after a pause of a few milliseconds, while another holds the lock), a write, an unlock.
``soak {folder, shared, seconds, seed}`` → counts: mixed operations in *folder* (which only this
    call touches, so every answer can be checked) for *seconds*, and locked increments of the
    integer in *shared*; ``requests`` is the number of ``files/*`` requests sent, ``unexpected``
    the answers that were wrong.
"""

from __future__ import annotations

import base64
import os
import random
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

import anyio
from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import (
    FileLockedError,
    FilesClient,
    FilesRequestError,
    RetryPolicy,
    files,
)
from tests.reliability.servers.base import files_server, new_content
from tests.support.handover import run_files_server

#: Requests are sent once: the tools count and check every answer themselves.
ONCE = RetryPolicy(retries=0)


def error_of(exc: FilesRequestError) -> dict[str, Any]:
    return {
        "code": exc.code,
        "name": exc.name,
        "reason": exc.reason,
        "message": exc.message,
        "data": exc.data,
    }


class Counted:
    """Raw requests through one ``FilesClient``, counted."""

    def __init__(self, fs: FilesClient) -> None:
        self.fs = fs
        self.sent = 0

    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        return await self.fs.request(method, params, retry=ONCE)


async def locked_increment(send: Counted, path: str, rng: random.Random) -> int:
    """One locked read-modify-write of the counter in *path*; returns the conflicts met."""
    conflicts = 0
    while True:
        try:
            read = await send("files/read", {"path": path, "keepLocked": True})
            break
        except FileLockedError:
            conflicts += 1
            await anyio.sleep(rng.uniform(0, 0.003))
    lock_id = read["lockId"]
    try:
        value = int(read["content"].strip() or "0") + 1
        await send("files/write", {"path": path, "content": f"{value}\n", "lockId": lock_id})
    finally:
        with anyio.CancelScope(shield=True):
            await send("files/unlock", {"lockId": lock_id})
    return conflicts


class Soak:
    """Mixed operations in a folder only this soak touches, every answer checked against what it wrote."""

    def __init__(self, send: Counted, folder: str, shared: str, seed: int) -> None:
        self.send = send
        self.folder = folder
        self.shared = shared
        self.rng = random.Random(seed)
        self.files: dict[str, bytes] = {}  # name -> content
        self.dirs: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self.serial = 0
        self.increments = 0

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def content(self) -> bytes:
        return os.urandom(self.rng.choice((0, 10, 1000, 40_000)))

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.unexpected.append(what)

    async def run(self, seconds: float) -> dict[str, Any]:
        ops = [
            (self.write, 4),
            (self.read, 4),
            (self.staged, 1),
            (self.listing, 2),
            (self.stat, 2),
            (self.create, 2),
            (self.delete, 2),
            (self.rename, 2),
            (self.watch, 1),
            (self.lock, 2),
            (self.consent, 1),
        ]
        functions = [f for f, _ in ops]
        weights = [w for _, w in ops]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            op = self.rng.choices(functions, weights)[0]
            self.counts[op.__name__] += 1
            try:
                await op()
            except FilesRequestError as exc:
                self.unexpected.append(f"{op.__name__}: {exc!r}")
        return {
            "requests": self.send.sent,
            "ops": dict(self.counts),
            "increments": self.increments,
            "unexpected": self.unexpected[:20],
        }

    async def write(self) -> None:
        name = self.rng.choice([*self.files, self.fresh("w")]) if self.files else self.fresh("w")
        data = self.content()
        params = {"path": self.path(name), "content": base64.b64encode(data).decode(), "encoding": "base64"}
        result = await self.send("files/write", params)
        self.check(result["size"] == len(data), f"write {name}: size {result['size']} != {len(data)}")
        self.files[name] = data

    async def read(self) -> None:
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        result = await self.send("files/read", {"path": self.path(name), "encoding": "base64"})
        self.check(base64.b64decode(result["content"]) == self.files[name], f"read {name}: wrong content")

    async def staged(self) -> None:
        name = self.fresh("s")
        data = os.urandom(self.rng.randrange(100_000, 300_000))
        step = 64 * 1024
        result: dict[str, Any] = {}
        for offset in range(0, len(data), step):
            piece = base64.b64encode(data[offset : offset + step]).decode()
            final = offset + step >= len(data)
            params = {"path": self.path(name), "content": piece, "encoding": "base64"}
            result = await self.send("files/write", {**params, "offset": offset, "final": final})
        self.check(result.get("size") == len(data), f"staged {name}: {result}")
        self.files[name] = data

    async def listing(self) -> None:
        result = await self.send("files/list", {"path": self.folder})
        names = {entry["name"] for entry in result["entries"]}
        self.check(names == set(self.files) | self.dirs, f"list: {sorted(names)}")

    async def stat(self) -> None:
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        result = await self.send("files/stat", {"path": self.path(name)})
        self.check(result["size"] == len(self.files[name]), f"stat {name}: {result}")

    async def create(self) -> None:
        if self.rng.random() < 0.3:
            name = self.fresh("d")
            await self.send("files/create", {"path": self.path(name), "type": "directory"})
            self.dirs.add(name)
        else:
            name = self.fresh("c")
            await self.send("files/create", {"path": self.path(name), "type": "file", "content": "new"})
            self.files[name] = b"new"

    async def delete(self) -> None:
        names = [*self.files, *self.dirs]
        if not names:
            return
        name = self.rng.choice(names)
        await self.send("files/delete", {"path": self.path(name), "recursive": name in self.dirs})
        self.files.pop(name, None)
        self.dirs.discard(name)

    async def rename(self) -> None:
        if not self.files:
            return
        name = self.rng.choice(list(self.files))
        new = self.fresh("r")
        result = await self.send("files/rename", {"path": self.path(name), "newPath": self.path(new)})
        self.check(result["path"] == self.path(new), f"rename {name}: {result}")
        self.files[new] = self.files.pop(name)

    async def watch(self) -> None:
        name = self.fresh("v")
        self.send.sent += 2  # files/watch, and files/unwatch when the block ends
        async with self.send.fs.watch(self.folder, events=["created"]) as events:
            await self.send("files/create", {"path": self.path(name), "type": "file"})
            self.files[name] = b""
            seen = None
            with anyio.move_on_after(30):
                async for event in events:
                    if event.path == self.path(name):
                        seen = event
                        break
            self.check(seen is not None, f"watch: no event for {name}")

    async def lock(self) -> None:
        self.counts["conflicts"] += await locked_increment(self.send, self.shared, self.rng)
        self.increments += 1

    async def consent(self) -> None:
        request = {"message": "soak", "requestedPaths": [self.folder], "operations": ["read"]}
        result = await self.send("files/consent", request)
        self.check(result.get("granted") is True, f"consent: {result}")


def build_server() -> MCPServer[Any]:
    server = files_server("reliability")

    @server.tool()
    async def request(method: str, ctx: Context, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One raw request, never repeated."""
        async with files(ctx) as fs:
            try:
                return {"result": await fs.request(method, params or {}, retry=ONCE)}
            except FilesRequestError as exc:
                return {"error": error_of(exc)}

    @server.tool()
    async def upload(path: str, size: int, chunk_size: int, ctx: Context) -> dict[str, Any]:
        """Write *size* bytes in staged chunks."""
        async with files(ctx) as fs:
            try:
                result = await fs.write_bytes(path, new_content(size, chunk_size), chunk_size=chunk_size)
            except FilesRequestError as exc:
                return {"error": error_of(exc)}
        return {"bytes": result.bytes_written}

    @server.tool()
    async def locked_update(path: str, hold: float, ctx: Context) -> dict[str, Any]:
        """Read under a lock, wait, append one character."""
        async with files(ctx) as fs, fs.lock(path) as lock_id:
            before = await fs.read_text(path, lock_id=lock_id)
            await anyio.sleep(hold)
            await fs.write_text(path, before + "+", lock_id=lock_id)
        return {"before": before, "after": before + "+"}

    @server.tool()
    async def watch(
        path: str, count: int, timeout: float, ctx: Context, recursive: bool = False
    ) -> dict[str, Any]:
        """The first *count* change events of *path*."""
        events: list[dict[str, Any]] = []
        async with files(ctx) as fs, fs.watch(path, recursive=recursive) as stream:
            with anyio.move_on_after(timeout):
                async for event in stream:
                    events.append(asdict(event))
                    if len(events) >= count:
                        break
        return {"events": events}

    @server.tool()
    async def increment(path: str, times: int, ctx: Context) -> dict[str, Any]:
        """*times* locked read-modify-write increments of the counter in *path*."""
        rng = random.Random()
        async with files(ctx) as fs:
            send = Counted(fs)
            conflicts = 0
            for _ in range(times):
                conflicts += await locked_increment(send, path, rng)
        return {"done": times, "conflicts": conflicts, "requests": send.sent}

    @server.tool()
    async def soak(folder: str, shared: str, seconds: float, seed: int, ctx: Context) -> dict[str, Any]:
        """Mixed, checked operations in *folder* and locked increments of *shared* for *seconds*."""
        async with files(ctx) as fs:
            return await Soak(Counted(fs), folder, shared, seed).run(seconds)

    return server


if __name__ == "__main__":
    run_files_server(build_server)
