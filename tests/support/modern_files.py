"""A minimal client of the 2026-07-28 era's ``files/*`` extension, written from PROTOCOL.md.

:class:`BatchAnswerer` is a real mcp ``ClientExtension``: it lists
``io.github.jupyter-fsbroker/files`` in every request's capabilities, claims the batch result
type, answers each batch with a real core connection (``Broker.connect(...).handle``, errors in
their modern codes), and continues the call with the same name and arguments until a plain
``CallToolResult`` comes. It records every batch, every continuation it sent and every answer,
so tests can tamper with, replay or re-send them.
"""

from __future__ import annotations

import secrets
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Result

from jupyter_fsbroker.core import errors as core_errors
from jupyter_fsbroker.wire import catalogue
from jupyter_fsbroker.wire.modern import (
    EXTENSION_ID,
    RESULT_TYPE,
    Answer,
    continuation_meta,
    read_batch,
)

__all__ = ["BatchAnswerer", "FilesBatch", "Round", "call"]

_arguments: ContextVar[dict[str, Any]] = ContextVar("modern_files_arguments")


class FilesBatch(Result):
    """The batch result, as the claim reads it."""

    result_type: Literal["io.github.jupyter-fsbroker/filesBatch"] = RESULT_TYPE  # type: ignore[assignment]
    operations: list[dict[str, Any]]
    continuation: str


@dataclass
class Round:
    """One batch and what was sent back for it."""

    operations: list[dict[str, Any]]
    continuation: str
    meta: dict[str, Any] = field(default_factory=dict)


class BatchAnswerer(ClientExtension):
    """Answers batches with *connection* (a core ``Connection``: ``handle(method, params)``)."""

    identifier = EXTENSION_ID

    def __init__(self, connection: Any, connection_id: str | None = None) -> None:
        self.connection = connection
        self.connection_id = connection_id or "c_" + secrets.token_urlsafe(16)
        self.rounds: list[Round] = []
        self.methods: list[str] = []
        #: Answers of the test's own for some methods, instead of the core's.
        self.overrides: dict[str, Any] = {}
        #: Sessions (of other replicas) continuations are sent through, in turn; empty: the call's own.
        self.sessions: list[Any] = []

    def settings(self) -> dict[str, Any]:
        return {"features": ["perPathConsent", "changes"]}

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type=RESULT_TYPE, model=FilesBatch, resolve=self._resolve)]

    def first_meta(self) -> dict[str, Any]:
        """The ``_meta`` of a call's first request."""
        return {EXTENSION_ID: continuation_meta(self.connection_id)}

    def answer(self, operations: list[dict[str, Any]]) -> list[Answer]:
        """The answers of the core to *operations*, errors in their modern codes."""
        answers = []
        for op in operations:
            self.methods.append(op["method"])
            handle = self.overrides.get(op["method"]) or (
                lambda p, m=op["method"]: self.connection.handle(m, p)
            )
            try:
                result = handle(op.get("params") or {})
            except core_errors.FilesError as exc:
                answers.append(Answer(op["id"], error=catalogue.to_modern(core_errors.to_jsonrpc_error(exc))))
            else:
                answers.append(Answer(op["id"], result=result))
        return answers

    async def _resolve(self, batch: FilesBatch, ctx: ClaimContext) -> CallToolResult:
        arguments = _arguments.get()
        current: Result = batch
        while not isinstance(current, CallToolResult):
            assert isinstance(current, FilesBatch), current
            operations, token = read_batch(current.model_dump(by_alias=True, mode="json"))
            wire_ops = [op.to_wire() for op in operations]
            meta = {EXTENSION_ID: continuation_meta(self.connection_id, token, self.answer(wire_ops))}
            self.rounds.append(Round(wire_ops, token, meta))
            session = self.sessions[len(self.rounds) % len(self.sessions)] if self.sessions else ctx.session
            current = await session.call_tool(ctx.tool_name, arguments, meta=meta, allow_claimed=True)
        return current


async def call(client: Any, answerer: BatchAnswerer, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """Call tool *name* through *client* (an ``mcp.Client`` built with *answerer*)."""
    token = _arguments.set(arguments)
    try:
        return await client.call_tool(name, arguments, meta=answerer.first_meta())
    finally:
        _arguments.reset(token)
