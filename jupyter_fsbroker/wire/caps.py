"""The sizes the contract fixes: the cap on one request's content, and the default chunk."""

from __future__ import annotations

__all__ = ["DEFAULT_CHUNK_BYTES", "MAX_CHUNK_BYTES", "MiB"]

MiB = 1024 * 1024

#: The wire's cap on the content of one request (PROTOCOL.md): every message stays under 4 MiB.
MAX_CHUNK_BYTES = 2 * MiB

#: The default chunk of reads and staged writes (SEP-1708: 1 MB; the client's default read length).
DEFAULT_CHUNK_BYTES = MiB
