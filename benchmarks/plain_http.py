"""The plain-HTTP baseline: a file's bytes as base64-JSON chunks from a tiny starlette app under uvicorn.

No MCP, no broker, no checks: what loopback HTTP with JSON and base64 costs on
this machine, the ceiling a remote analysis server would meet without this
project. ``python benchmarks/plain_http.py FOLDER`` serves the files of FOLDER
at ``GET /read?path=NAME&offset=N&length=N`` on 127.0.0.1 at a free port: the
first line on stdout is ``PORT <n>``, and the server exits when its stdin
closes. :func:`serve` starts it as a subprocess and :func:`fetch` reads a file
through it sequentially with one keep-alive ``httpx2`` client (pydantic's
httpx, the HTTP client mcp 2.3 itself uses), decoding and hashing each chunk as
a server tool of ``wire_server.py`` does.

It must stay the simplest fast thing: one file read, one ``b64encode``, one
JSON response per request.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["fetch", "serve"]


def app(folder: Path) -> Any:
    """The starlette app serving the files of *folder*."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def read(request: Request) -> JSONResponse:
        query = request.query_params
        offset, length = int(query["offset"]), int(query["length"])
        with open(folder / query["path"], "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(length)
        end = offset + len(data)
        return JSONResponse(
            {
                "content": base64.b64encode(data).decode("ascii"),
                "encoding": "base64",
                "offset": offset,
                "bytesRead": len(data),
                "size": size,
                "eof": end >= size,
            }
        )

    return Starlette(routes=[Route("/read", read)])


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
        if process.stdin is not None:
            process.stdin.close()  # the server's cue to leave
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def fetch(base_url: str, name: str, chunk_size: int) -> dict[str, Any]:
    """Read the file *name* chunk after chunk; its sha256, size and the seconds it took (timed here)."""
    import httpx2

    digest = hashlib.sha256()
    nbytes = offset = requests = 0
    with httpx2.Client(base_url=base_url, timeout=60) as client:
        client.get("/read", params={"path": name, "offset": 0, "length": 1}).raise_for_status()  # connect
        start = time.perf_counter()
        while True:
            response = client.get("/read", params={"path": name, "offset": offset, "length": chunk_size})
            response.raise_for_status()
            answer = response.json()
            data = base64.b64decode(answer["content"])
            digest.update(data)
            nbytes += len(data)
            offset += answer["bytesRead"]
            requests += 1
            if answer["eof"]:
                break
        seconds = time.perf_counter() - start
    return {"sha256": digest.hexdigest(), "bytes": nbytes, "requests": requests, "seconds": seconds}


def _main() -> None:
    import uvicorn

    folder = Path(sys.argv[1]).resolve()

    def exit_at_eof() -> None:
        while os.read(0, 4096):
            pass
        os._exit(0)

    threading.Thread(target=exit_at_eof, name="exit-at-eof", daemon=True).start()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app(folder), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    _main()
