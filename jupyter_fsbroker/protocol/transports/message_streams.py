"""The two sides of a transport, as the connection's message loop sees them.

Every transport of this package (:mod:`.spawn`, :mod:`.http`), and mcp's own, yields a
``(read, write)`` pair of this shape: the read side iterates over the server's messages (or
the exceptions that stood in for one), the write side sends the client's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from mcp.shared.message import SessionMessage

from ...core.buffers import BufferPool

__all__ = ["LendingWriter", "MessageReader", "MessageWriter"]


class MessageReader(Protocol):
    """The read side of a transport: what the transports yield first."""

    def __aiter__(self) -> AsyncIterator[SessionMessage | Exception]: ...


class MessageWriter(Protocol):
    """The write side of a transport."""

    async def send(self, item: SessionMessage, /) -> None: ...


@runtime_checkable
class LendingWriter(Protocol):
    """A write side that can encode a large message in a buffer lent by a pool (the project's
    transports), so that each continuation of a streaming call reuses the same memory."""

    async def send_lending(self, item: SessionMessage, buffers: BufferPool | None, /) -> None: ...
