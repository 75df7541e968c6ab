"""The plain-pipe baselines of row 2: a file's bytes through a pipe between two processes, no MCP.

Over stdio the broker and a server are two Python processes joined by pipes,
the server asking for chunks (JSON-RPC requests, 4 in flight) and the broker
answering each with a JSON line holding the chunk as base64. This module does
the same with nothing else: no MCP, no broker, no checks.

``python benchmarks/plain_pipe.py FOLDER`` is the child: it reads requests,
one JSON line each, on stdin and answers on stdout:

* ``{"path": NAME, "offset": N, "length": N}``: one JSON line, the chunk's bytes
  as base64 (``pybase64``) in ``content``, with ``encoding``, ``offset``,
  ``bytesRead``, ``size`` and ``eof``, as the broker's ``files/read`` answer
  has them (encoded with :mod:`orjson`);
* ``{"raw": NAME}``: a line with the file's size, then its bytes as they are
  (``os.sendfile`` into the pipe): the ceiling of a pipe between two processes.

:func:`fetch` (base64 JSON, requests and answers, *in_flight* requests
outstanding, like ``iter_chunks``) and :func:`fetch_raw` (the raw stream) start
the child, read a file through it in the parent, decode and hash what arrives
(``hashlib.sha256``) and take the seconds there. Both pipes are enlarged to
1 MiB (``F_SETPIPE_SZ``), as the broker's transport does with its server's.

Why requests and answers rather than one stream of JSON lines: that is what
the protocol makes a server do (it asks for every chunk; the client sends
nothing unasked), so the baseline pays the same number of messages, and with
4 requests in flight the child never waits for the next one, as the broker
never does. A stream would save the requests; the raw stream, which also saves
the base64 and the JSON, bounds both from above.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pybase64
from plain_parts import chunk_answer, result, stop_child

__all__ = ["fetch", "fetch_raw"]

PIPE_SIZE = 1024 * 1024
NEWLINE = orjson.OPT_APPEND_NEWLINE


def _enlarge(fd: int) -> None:
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, PIPE_SIZE)


@contextlib.contextmanager
def _child(folder: Path) -> Iterator[tuple[io.BufferedReader, Any]]:
    """This script serving *folder*; yields its stdout (buffered, 1 MiB) and its stdin; stops it after."""
    process = subprocess.Popen(
        [sys.executable, __file__, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        _enlarge(process.stdin.fileno())
        _enlarge(process.stdout.fileno())
        yield io.BufferedReader(process.stdout, buffer_size=PIPE_SIZE), process.stdin  # type: ignore[arg-type]
    finally:
        stop_child(process)


def fetch(folder: Path, name: str, chunk_size: int, in_flight: int) -> dict[str, Any]:
    """Read *name* as base64 JSON lines, *in_flight* requests outstanding; sha256, bytes, seconds."""
    digest = hashlib.sha256()
    nbytes = requests = 0
    with _child(folder) as (answers, asks):

        def ask(offset: int) -> None:
            asks.write(orjson.dumps({"path": name, "offset": offset, "length": chunk_size}, option=NEWLINE))

        ask(0)  # the child is up and the file is open in the page cache: not timed
        size = orjson.loads(answers.readline())["size"]
        start = time.perf_counter()
        offsets = iter(range(0, size, chunk_size))
        pending = 0
        for offset in offsets:
            ask(offset)
            pending += 1
            if pending == in_flight:
                break
        while pending:
            answer = orjson.loads(answers.readline())
            pending -= 1
            data = pybase64.b64decode(answer["content"], validate=True)
            digest.update(data)
            nbytes += len(data)
            requests += 1
            for offset in offsets:  # the next one, if any
                ask(offset)
                pending += 1
                break
        seconds = time.perf_counter() - start
    return result(digest, nbytes, requests, seconds)


def fetch_raw(folder: Path, name: str) -> dict[str, Any]:
    """Read *name* as one raw stream of bytes; sha256, bytes, seconds."""
    digest = hashlib.sha256()
    buffer = bytearray(PIPE_SIZE)
    view = memoryview(buffer)
    with _child(folder) as (answers, asks):
        asks.write(orjson.dumps({"path": name, "offset": 0, "length": 1}) + b"\n")
        answers.readline()  # the child is up: not timed
        start = time.perf_counter()
        asks.write(orjson.dumps({"raw": name}) + b"\n")
        left = int(answers.readline())
        size = left
        while left:
            got = answers.readinto(view[: min(left, PIPE_SIZE)])
            if not got:
                raise RuntimeError("the plain pipe child ended before the file did")
            digest.update(view[:got])
            left -= got
        seconds = time.perf_counter() - start
    return result(digest, size, 1, seconds)


def _serve(folder: Path) -> None:
    requests = sys.stdin.buffer
    out = sys.stdout.buffer
    _enlarge(out.fileno())
    files: dict[str, int] = {}

    def opened(name: str) -> int:
        if name not in files:
            files[name] = os.open(folder / name, os.O_RDONLY)
        return files[name]

    for line in requests:
        request = orjson.loads(line)
        if "raw" in request:
            fd = opened(request["raw"])
            size = os.fstat(fd).st_size
            out.write(b"%d\n" % size)
            out.flush()
            sent = 0
            while sent < size:
                sent += os.sendfile(out.fileno(), fd, sent, size - sent)
            continue
        fd = opened(request["path"])
        size = os.fstat(fd).st_size
        offset = request["offset"]
        data = os.pread(fd, request["length"], offset)
        out.write(orjson.dumps(chunk_answer(data, offset, size), option=NEWLINE))
        out.flush()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]).resolve())
