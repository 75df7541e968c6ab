"""The sha256 of a file read through the client in chunks, as the test and benchmark servers compute it.

:func:`digest_file` runs inside a server's tool call: it reads the file with
``FilesClient.iter_chunks`` and hashes the chunks as they arrive, so no more than
*concurrency* chunks are held at once, whatever the file's size.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context

from jupyter_fsbroker.serverkit import files

__all__ = ["StreamDigest", "digest_file"]


@dataclass(frozen=True)
class StreamDigest:
    """What a whole read gave: the content's sha256 (hex), its bytes, the chunks and the requests sent."""

    sha256: str
    nbytes: int
    chunks: int
    requests: int


async def digest_file(
    ctx: Context[Any, Any], path: str, *, chunk_size: int, concurrency: int
) -> StreamDigest:
    """Read *path* through the client of tool call *ctx* and hash it."""
    digest = hashlib.sha256()
    nbytes = chunks = 0
    async with (
        files(ctx) as fs,
        fs.iter_chunks(path, chunk_size=chunk_size, concurrency=concurrency) as stream,
    ):
        async for data in stream:
            digest.update(data)
            nbytes += len(data)
            chunks += 1
        requests = stream.requests
    return StreamDigest(digest.hexdigest(), nbytes, chunks, requests)
