"""One modern tool call's ``files/*`` calls in one process: answered from the call's journal,
or asked of the client in batches.

On the modern wire the server cannot ask the client anything while a tool runs; it can only
answer the ``tools/call`` with a batch of operations and a continuation (PROTOCOL.md, "The
2026-07-28 era"). A :class:`ReplayStep` stands in for the client: each ``files/*`` call the tool
makes is answered at once from the journal the run began with when it was answered before
(matched by method and params, the n-th identical call to the n-th recorded one), and otherwise
joins the round's batch and waits. When the tool can go no further, the round ends with the
batch. The process may keep the waiting run (:mod:`.live_calls`), and the next request hands it
the answers; a process that does not hold it runs the tool again from its start over a journal
that now holds these answers too. Side effects happen on the client, once: their answers are
replayed, never their requests.
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
    """The ``files/*`` calls of a modern tool call, on one replica.

    Parameters
    ----------
    connection
        The client as the call's request describes it (its capabilities and features).
    journal
        The operations answered before this run began, with their answers, in the order answered.
    started
        When the call began (its first request), for :attr:`~.files_client.FilesClient.started`.

    Notes
    -----
    A run of the tool that waits on its batch may be kept (a live call, :mod:`.live_calls`):
    :meth:`answer` then hands the next request's answers to the waiting calls and the tool goes
    on from where it is. The step keeps no journal of its own: the one a continuation carries
    comes from the continuation before it.
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
        self._recorded: dict[str, deque[Mapping[str, Any]]] = {}
        for key, answer in journal:
            self._recorded.setdefault(key, deque()).append(answer)
        self._unused = len(journal)
        self._next_id = len(journal)
        #: The new operations of this round, with their keys, in the order asked.
        self.batch: list[tuple[Operation, str]] = []
        self._waiting: dict[str, asyncio.Future[Mapping[str, Any]]] = {}
        # Asked when the batch was full: the next round's first operations.
        self._overflow: deque[tuple[str, dict[str, Any], str, asyncio.Future[Mapping[str, Any]]]] = deque()
        self._asked = 0
        self._read_bytes = 0
        self._write_bytes = 0
        self._new = asyncio.Event()
        self._closed = False
        # The batch is with the client: what the tool asks from now on waits for the next round.
        self._out = False
        #: Whether the call is being cancelled (:meth:`cancel`): the tool is ending.
        self.cancelled = False

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
        """End the call here: every call the tool waits in, or makes from now on (say, while it
        is being cancelled), is cancelled at once instead of waiting for an answer."""
        self._closed = True
        self._cancel_waiting()

    def cancel(self) -> None:
        """The client cancelled the call: every call the tool waits in is cancelled, but what it
        asks from now on (releasing its locks, ending its watches) is asked of the client."""
        self.cancelled = True
        self._cancel_waiting()
        self._begin_round()

    def hand_out(self) -> list[tuple[Operation, str]]:
        """End the round: its batch, as it goes to the client. A call the tool makes from now
        on (a read-ahead going on meanwhile, say) joins the next round's batch."""
        self._out = True
        return list(self.batch)

    def answer(self, answers: Mapping[str, Mapping[str, Any]]) -> None:
        """Hand the batch's answers (by operation id, ``{"result"}`` or ``{"error"}``) to the
        calls waiting for them, and begin the next round (with what did not fit in this one).
        An operation without an answer (the client cancelled before it) stays unanswered: the
        call is cancelled next (:meth:`cancel`)."""
        batch = self.batch
        self._begin_round()
        for op, _ in batch:
            if op.id not in answers:
                continue
            waiting = self._waiting.pop(op.id, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(answers[op.id])
        while self._overflow and not self.full:
            method, params, key, waiting = self._overflow[0]
            if not self._fits(method, params) and self.batch:
                break
            self._overflow.popleft()
            if not waiting.done():
                self._join(method, params, key, waiting)

    async def wait_for_new(self) -> None:
        """Return once the round has a new operation."""
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
        """The answer to one ``files/*`` call: recorded, or from the client by a batch.

        A new operation joins the round's batch (or the next one's, when this one is full) and
        waits for its answer, which a kept run gets from :meth:`answer`; a run that is not kept
        is cancelled when its round ends. An error answer raises the
        :class:`~.exceptions.FilesRequestError` of its kind.
        """
        key = operation_key(method, params)
        recorded = self._recorded.get(key)
        if recorded:
            self._unused -= 1
            answer = recorded.popleft()
            if not recorded:
                del self._recorded[key]
            return _unwrap(answer, method)
        if self._closed:
            raise asyncio.CancelledError
        self._asked += 1
        waiting: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        wire = dict(params or {})
        if (
            not self._out
            and not self._overflow
            and (not self.batch or (not self.full and self._fits(method, wire)))
        ):
            self._join(method, wire, key, waiting)
        else:
            self._overflow.append((method, wire, key, waiting))
        return _unwrap(await waiting, method)

    def _cancel_waiting(self) -> None:
        """Cancel every call the tool waits in, in the batch or past it."""
        for waiting in (*self._waiting.values(), *(item[3] for item in self._overflow)):
            waiting.cancel()  # even a shielded wait (an unwatch while closing) ends now
        self._waiting.clear()
        self._overflow.clear()

    def _begin_round(self) -> None:
        """An empty batch, not yet handed out, that what the tool asks next joins."""
        self.batch = []
        self._read_bytes = self._write_bytes = 0
        self._out = False
        self._new.clear()

    def _fits(self, method: str, params: Mapping[str, Any]) -> bool:
        reads, writes = _size(method, params)
        return (
            self._read_bytes + reads <= MAX_BATCH_READ_BYTES
            and self._write_bytes + writes <= MAX_BATCH_WRITE_BYTES
        )

    def _join(
        self, method: str, params: dict[str, Any], key: str, waiting: asyncio.Future[Mapping[str, Any]]
    ) -> None:
        # Ids count the call's operations: unique in the call, and in a replay the journal
        # position the answer takes.
        op = Operation(str(self._next_id), method, params)
        self._next_id += 1
        self.batch.append((op, key))
        self._waiting[op.id] = waiting
        reads, writes = _size(method, params)
        self._read_bytes += reads
        self._write_bytes += writes
        self._new.set()


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
