"""One step of a tool call on the 2026-07-28 wire: the tool re-run over its recorded answers.

On the modern wire the server cannot ask the client anything while a tool runs; it can only
answer the ``tools/call`` with a batch of operations and a continuation (PROTOCOL.md, "The
2026-07-28 era"). A :class:`ReplayStep` stands in for the client during one such request: each
``files/*`` call the tool makes is answered at once from the call's journal when it was answered
before (matched by method and params, the n-th identical call to the n-th recorded one), and
otherwise joins the step's batch and waits. When the tool can go no further, the step ends with
the batch; the next request runs the tool again from its start, over a journal that now holds
these answers too. Side effects happen on the client, once: their answers are replayed, never
their requests.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..wire.caps import DEFAULT_CHUNK_BYTES
from ..wire.catalogue import kind_of
from ..wire.methods import READ, WRITE
from ..wire.modern import MAX_BATCH_OPERATIONS, MAX_BATCH_READ_BYTES, MAX_BATCH_WRITE_BYTES, Operation
from .exceptions import error_from_jsonrpc
from .peers import ConnectionFiles
from .sealing import digest

__all__ = ["ReplayStep", "current_step", "operation_key"]

_current: ContextVar[ReplayStep | None] = ContextVar("jupyter_fsbroker_replay_step", default=None)


def current_step() -> ReplayStep | None:
    """The step of the modern call being handled here; ``None`` on the legacy wire."""
    return _current.get()


def operation_key(method: str, params: Mapping[str, Any] | None) -> str:
    """What identifies an operation in a journal: a digest of its method and params."""
    return digest([method, dict(params or {})])


class ReplayStep:
    """The ``files/*`` calls of one request of a modern tool call.

    Parameters
    ----------
    connection
        The client as this request describes it (its capabilities and features).
    journal
        The operations answered before this request, with their answers, in the order answered.
    started
        When the call began (its first request), for :attr:`~.files_client.FilesClient.started`.
    """

    def __init__(
        self,
        connection: ConnectionFiles,
        journal: tuple[tuple[str, Mapping[str, Any]], ...] = (),
        *,
        started: float,
    ) -> None:
        self.connection = connection
        self.started = started
        self.journal = list(journal)
        self._recorded: dict[str, deque[Mapping[str, Any]]] = {}
        for key, answer in journal:
            self._recorded.setdefault(key, deque()).append(answer)
        self._unused = len(journal)
        #: The new operations of this step, with their keys, in the order asked.
        self.batch: list[tuple[Operation, str]] = []
        self._asked = 0
        self._read_bytes = 0
        self._write_bytes = 0
        self._new = asyncio.Event()
        self._closed = False
        self._waiting: list[asyncio.Future[None]] = []

    @property
    def asked(self) -> int:
        """How many new operations the tool has asked for (in the batch or not)."""
        return self._asked

    @property
    def full(self) -> bool:
        """Whether the batch can take no further operation."""
        return (
            len(self.batch) >= MAX_BATCH_OPERATIONS
            or self._read_bytes >= MAX_BATCH_READ_BYTES
            or self._write_bytes >= MAX_BATCH_WRITE_BYTES
        )

    @property
    def diverged(self) -> bool:
        """Whether the tool left recorded operations unasked: a re-run that went another way."""
        return self._unused > 0

    def close(self) -> None:
        """End the step: a call the tool makes from now on (say, while it is being cancelled)
        is cancelled at once instead of waiting for an answer that will not come."""
        self._closed = True
        for waiting in self._waiting:  # even a shielded wait (an unwatch while closing) ends now
            waiting.cancel()

    async def wait_for_new(self) -> None:
        """Return once the tool has asked for a new operation."""
        await self._new.wait()

    @contextmanager
    def bound(self) -> Iterator[None]:
        """Make this the step :func:`current_step` returns, in this context."""
        token = _current.set(self)
        try:
            yield
        finally:
            _current.reset(token)

    async def request(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The answer to one ``files/*`` call: recorded, or (never, in this step) from the client.

        A new operation joins the batch and waits until the step ends, which cancels the tool.
        An error answer raises the :class:`~.exceptions.FilesRequestError` of its kind.
        """
        key = operation_key(method, params)
        recorded = self._recorded.get(key)
        if recorded:
            self._unused -= 1
            return _unwrap(recorded.popleft(), method)
        if self._closed:
            raise asyncio.CancelledError
        self._asked += 1
        self._new.set()
        reads, writes = _size(method, params)
        fits = not self.full and (
            self._read_bytes + reads <= MAX_BATCH_READ_BYTES
            and self._write_bytes + writes <= MAX_BATCH_WRITE_BYTES
        )
        if fits or not self.batch:
            # Ids are the journal position the answer will take: unique in the call.
            op = Operation(str(len(self.journal) + len(self.batch)), method, dict(params or {}))
            self.batch.append((op, key))
            self._read_bytes += reads
            self._write_bytes += writes
        # The answer comes in the next request, to a re-run of the tool; this run ends here.
        waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiting)
        await waiting
        raise AssertionError("unreachable: a step's pending operation is never answered")


def _size(method: str, params: Mapping[str, Any] | None) -> tuple[int, int]:
    """The read bytes and write bytes an operation adds to a batch."""
    params = params or {}
    if method == READ:
        length = params.get("length", DEFAULT_CHUNK_BYTES)
        return (length if isinstance(length, int) else DEFAULT_CHUNK_BYTES), 0
    if method == WRITE:
        content = params.get("content")
        return 0, len(content) if isinstance(content, str) else 0
    return 0, 0


def _unwrap(answer: Mapping[str, Any], method: str) -> dict[str, Any]:
    error = answer.get("error")
    if isinstance(error, Mapping):
        code, message, data = error.get("code", 0), error.get("message", ""), error.get("data")
        kind = kind_of(code, message, data)
        # A tool sees the kinds' legacy codes on either wire (its retry policy names them so).
        raise error_from_jsonrpc(kind.code if kind is not None else code, message, data, method=method)
    return dict(answer.get("result") or {})
