"""What the plain baselines of rows 1 and 2 share: the chunk answer, the child's stop, the result.

Both baselines answer a chunk as the broker's ``files/read`` does (its bytes as base64 in
``content``, with ``encoding``, ``offset``, ``bytesRead``, ``size`` and ``eof``), run their server
as a child process of this interpreter that leaves when its stdin closes, and report a read the
same way; one place for each keeps the two baselines doing the same work.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pybase64

__all__ = ["chunk_answer", "result", "stop_child"]


def chunk_answer(data: bytes, offset: int, size: int) -> dict[str, Any]:
    """A chunk of a file of *size* bytes read at *offset*, as ``files/read`` answers it."""
    return {
        "content": pybase64.b64encode(data).decode("ascii"),
        "encoding": "base64",
        "offset": offset,
        "bytesRead": len(data),
        "size": size,
        "eof": offset + len(data) >= size,
    }


def result(digest: Any, nbytes: int, requests: int, seconds: float) -> dict[str, Any]:
    """What a baseline's read reports: the sha256 of what arrived, bytes, requests and seconds."""
    return {"sha256": digest.hexdigest(), "bytes": nbytes, "requests": requests, "seconds": seconds}


def stop_child(process: subprocess.Popen[Any]) -> None:
    """Close the child's stdin (its cue to leave), wait for it (killed after 10 s), close its stdout."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()
