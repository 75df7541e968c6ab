"""The plain-HTTP baselines of row 1: a file's bytes from a tiny starlette app under uvicorn, no MCP.

No MCP, no broker, no checks: what loopback HTTP costs on this machine when
done as fast as it goes here, served as the broker's Streamable HTTP server is
(uvicorn, the same settings). ``python benchmarks/plain_http.py FOLDER`` serves
the files of FOLDER on 127.0.0.1 at a free port (the first line on stdout is
``PORT <n>``; the server exits when its stdin closes):

``GET /read?path=NAME&offset=N&length=N``
    One chunk as JSON, its bytes as base64 (``pybase64``) in ``content``, with
    ``encoding``, ``offset``, ``bytesRead``, ``size`` and ``eof`` as the broker's
    ``files/read`` answer has them, encoded with :mod:`orjson` (here ~50 times
    faster than the standard library's ``json`` on such a message).
``GET /raw?path=NAME``
    The file's bytes as they are, streamed in 1 MiB pieces: no base64, no JSON.

:func:`fetch` reads a file through ``/read`` with *in_flight* requests
outstanding, like ``iter_chunks``: a thread per request in flight, each with its
own keep-alive connection, and the answers decoded (:mod:`orjson`,
``pybase64``) and hashed in file order where they arrive. Its client is the
standard library's ``http.client`` unless told otherwise: it takes half the CPU
of ``httpx2`` (pydantic's httpx, the client mcp 2.3 and the broker use) per
chunk here, and 4 threads with a connection each beat one pooled
``httpx2.AsyncClient`` (:func:`fetch_pooled`).
``python benchmarks/plain_http.py --compare FILE [N]`` times these ways against
each other, N times each, taking turns. :func:`fetch_raw` streams ``/raw`` into
a 1 MiB buffer and hashes it: the ceiling of HTTP here.

It must stay the simplest fast thing: one read, one base64 encoding, one JSON
response per request, and no work a server author would not do.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import orjson
import pybase64
from plain_parts import chunk_answer, result, stop_child

__all__ = ["fetch", "fetch_pooled", "fetch_raw", "serve"]

MiB = 1024 * 1024


def app(folder: Path) -> Any:
    """The starlette app serving the files of *folder*."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def read(request: Request) -> Response:
        query = request.query_params
        offset, length = int(query["offset"]), int(query["length"])
        with open(folder / query["path"], "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = os.pread(f.fileno(), length, offset)
        return Response(orjson.dumps(chunk_answer(data, offset, size)), media_type="application/json")

    async def raw(request: Request) -> Response:
        path = folder / request.query_params["path"]

        async def pieces() -> AsyncIterator[bytes]:
            with open(path, "rb") as f:
                while data := f.read(MiB):
                    yield data

        size = path.stat().st_size
        return StreamingResponse(
            pieces(), media_type="application/octet-stream", headers={"content-length": str(size)}
        )

    return Starlette(routes=[Route("/read", read), Route("/raw", raw)])


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """This script serving *folder* in a subprocess; yields its base URL and stops it on exit."""
    process = subprocess.Popen(
        [sys.executable, __file__, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the plain HTTP server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        stop_child(process)


def fetch_pooled(base_url: str, name: str, chunk_size: int, in_flight: int) -> dict[str, Any]:
    """As :func:`fetch`, with one ``httpx2.AsyncClient`` (a pooled connection per request in flight)."""
    return asyncio.run(_fetch_pooled(base_url, name, chunk_size, in_flight))


async def _fetch_pooled(base_url: str, name: str, chunk_size: int, in_flight: int) -> dict[str, Any]:
    import httpx2

    digest = hashlib.sha256()
    nbytes = requests = 0
    async with httpx2.AsyncClient(base_url=base_url, timeout=60) as client:

        async def get(offset: int) -> dict[str, Any]:
            params = {"path": name, "offset": offset, "length": chunk_size}
            response = await client.get("/read", params=params)
            response.raise_for_status()
            answer: dict[str, Any] = orjson.loads(response.content)
            return answer

        # As many connections as requests in flight, opened before the clock starts.
        first = await asyncio.gather(*(get(0) for _ in range(in_flight)))
        size = first[0]["size"]
        start = time.perf_counter()
        offsets = iter(range(0, size, chunk_size))
        pending = [asyncio.ensure_future(get(offset)) for offset in islice(offsets, in_flight)]
        while pending:
            answer = await pending.pop(0)  # in file order: the hash needs it
            for offset in offsets:
                pending.append(asyncio.ensure_future(get(offset)))
                break
            data = pybase64.b64decode(answer["content"], validate=True)
            digest.update(data)
            nbytes += len(data)
            requests += 1
        seconds = time.perf_counter() - start
    return result(digest, nbytes, requests, seconds)


def fetch(
    base_url: str, name: str, chunk_size: int, in_flight: int, *, client: str = "stdlib"
) -> dict[str, Any]:
    """Read *name* through ``/read``, *in_flight* requests outstanding; sha256, bytes, seconds (timed here).

    *in_flight* threads, each with its own keep-alive connection, fetch the
    chunks; this thread decodes and hashes them in file order as they arrive.
    *client* is ``"stdlib"`` (``http.client``: the faster here, half the CPU of
    httpx2 per chunk) or ``"httpx2"`` (a synchronous ``httpx2.Client`` per thread).
    """
    path = f"/read?path={quote(name)}&length={chunk_size}&offset="
    getters = {"stdlib": _stdlib_getter, "httpx2": _httpx2_getter}
    opened: list[Callable[[], None]] = []
    lock = threading.Lock()
    local = threading.local()

    def get(offset: int) -> dict[str, Any]:
        getter = getattr(local, "get", None)
        if getter is None:
            getter, close = getters[client](base_url)
            local.get = getter
            with lock:
                opened.append(close)
        answer: dict[str, Any] = orjson.loads(getter(f"{path}{offset}"))
        return answer

    digest = hashlib.sha256()
    nbytes = requests = 0
    barrier = threading.Barrier(in_flight)

    def connect(_: int) -> dict[str, Any]:
        barrier.wait()  # one call in each thread: each opens its connection before the clock starts
        return get(0)

    try:
        with ThreadPoolExecutor(in_flight) as pool:
            warm = list(pool.map(connect, range(in_flight)))  # every connection open: then the clock
            size = warm[0]["size"]
            start = time.perf_counter()
            offsets = iter(range(0, size, chunk_size))
            pending = [pool.submit(get, offset) for offset in islice(offsets, in_flight)]
            while pending:
                answer = pending.pop(0).result()  # in file order: the hash needs it
                for offset in offsets:  # the next request, if any
                    pending.append(pool.submit(get, offset))
                    break
                data = pybase64.b64decode(answer["content"], validate=True)
                digest.update(data)
                nbytes += len(data)
                requests += 1
            seconds = time.perf_counter() - start
    finally:
        for close in opened:
            close()
    return result(digest, nbytes, requests, seconds)


def _stdlib_getter(base_url: str) -> tuple[Callable[[str], bytes], Callable[[], None]]:
    """A GET on one keep-alive ``http.client`` connection, returning the body; and its close."""
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)

    def get(target: str) -> bytes:
        connection.request("GET", target)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {target}: {response.status} {body[:200]!r}")
        return body

    return get, connection.close


def _httpx2_getter(base_url: str) -> tuple[Callable[[str], bytes], Callable[[], None]]:
    """The same with a synchronous ``httpx2.Client``."""
    import httpx2

    client = httpx2.Client(base_url=base_url, timeout=60)

    def get(target: str) -> bytes:
        response = client.get(target)
        response.raise_for_status()
        return response.content

    return get, client.close


def fetch_raw(base_url: str, name: str) -> dict[str, Any]:
    """Stream *name* through ``/raw`` and hash it; sha256, bytes, seconds (timed here).

    One ``http.client`` connection, read into a 1 MiB buffer: less CPU per byte
    than any other client here (httpx2's stream reads 64 KiB at a time), so
    nothing over HTTP goes faster on this machine.
    """
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
    digest = hashlib.sha256()
    view = memoryview(bytearray(MiB))
    nbytes = 0
    try:
        connection.request("GET", f"/read?path={quote(name)}&offset=0&length=1")  # connect
        connection.getresponse().read()
        start = time.perf_counter()
        connection.request("GET", f"/raw?path={quote(name)}")
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"GET /raw: {response.status}")
        while got := response.readinto(view):
            digest.update(view[:got])
            nbytes += got
        seconds = time.perf_counter() - start
    finally:
        connection.close()
    return result(digest, nbytes, 1, seconds)


def _compare(folder: Path, name: str, repeats: int) -> None:
    """The ways of having 4 requests in flight, and the raw stream, taking turns; MB/s of each."""
    with serve(folder) as url:
        for _ in range(repeats):
            for label, run in (
                ("http.client, 4 threads", lambda: fetch(url, name, MiB, 4)),
                ("httpx2, 4 threads", lambda: fetch(url, name, MiB, 4, client="httpx2")),
                ("httpx2, one pooled asyncio client", lambda: fetch_pooled(url, name, MiB, 4)),
                ("http.client, 1 in flight", lambda: fetch(url, name, MiB, 1)),
                ("raw stream", lambda: fetch_raw(url, name)),
            ):
                measured = run()
                print(f"{label:34s} {measured['bytes'] / measured['seconds'] / 1e6:7.1f} MB/s", flush=True)


def _main() -> None:
    import uvicorn

    if sys.argv[1] == "--compare":
        path = Path(sys.argv[2]).resolve()
        _compare(path.parent, path.name, int(sys.argv[3]) if len(sys.argv) > 3 else 3)
        return
    folder = Path(sys.argv[1]).resolve()

    def exit_at_eof() -> None:
        while os.read(0, 4096):
            pass
        os._exit(0)

    threading.Thread(target=exit_at_eof, name="exit-at-eof", daemon=True).start()
    # IPPROTO_TCP named, as uvicorn's own binding has it: asyncio sets TCP_NODELAY only on sockets
    # of that protocol, and without it a small response waits out the peer's delayed ACK (~40 ms).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    # The same uvicorn settings as wire_server.py's Streamable HTTP server (no access log).
    config = uvicorn.Config(app(folder), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    _main()
