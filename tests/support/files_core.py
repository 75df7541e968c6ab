"""A stand-in for the broker side of a connection, for middleware tests that need no broker.

A :class:`HandlerCore` is what :class:`~jupyter_fsbroker.protocol.middleware.BrokerMiddleware`
asks of its core (the ``FilesCore`` protocol, which :class:`~jupyter_fsbroker.protocol.desk.
core_slot.CoreSlot` implements): it answers every ``files/*`` request with the test's handler,
is always open, and says the limits the test gives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from jupyter_fsbroker.core.buffers import BufferPool
from jupyter_fsbroker.protocol.desk.desk import FilesRoute

#: The core's default ``(default read, largest read, most list entries)``.
READ_SIZES = (1024 * 1024, 2 * 1024 * 1024, 10_000)


@dataclass(frozen=True)
class HandlerCore:
    """Answers ``files/*`` with *handler* on the loop, or off it where *router* says."""

    handler: Callable[[str, Any], Awaitable[dict[str, Any]]]
    budget: Callable[[], int] = lambda: 32 * 1024 * 1024
    router: Callable[[str], FilesRoute | None] | None = None
    sizes: tuple[int, int, int] = READ_SIZES

    @property
    def ready(self) -> bool:
        return True

    @property
    def gone(self) -> bool:
        return False

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        return await self.handler(method, params)

    def route(self, method: str) -> FilesRoute | None:
        return None if self.router is None else self.router(method)

    def memory_budget(self) -> int:
        return self.budget()

    def read_sizes(self) -> tuple[int, int, int]:
        return self.sizes

    def buffers(self) -> BufferPool | None:
        return None
