"""``files/*`` on the 2026-07-28 era: the extension's batches, performed as legacy requests are.

On the modern wire a server cannot send requests; a ``tools/call`` of it may instead answer with
a **batch** of ``files/*`` operations and a sealed continuation (PROTOCOL.md, "The 2026-07-28
era"). :class:`FilesBatchExtension` is the SEP-2133 client extension that says the client takes
such answers; :class:`BatchDesk` performs a batch's operations: each becomes the ``files/*``
request it stands for and goes to a desk of the connection's own
(:class:`~.files_intake.FilesIntake`), so that grants, consent prompts, locks, limits, audit,
revocation and the kill switch are exactly those of the legacy wire;
:func:`continue_call` repeats the call with the answers until a plain ``CallToolResult``
arrives.

The answers' error codes are those of the modern wire
(:func:`~jupyter_fsbroker.wire.catalogue.to_modern`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from ..wire.catalogue import to_modern
from ..wire.methods import FILES_PREFIX
from ..wire.modern import (
    CANCEL,
    CANCEL_FEATURE,
    CHANGES_FEATURE,
    EXTENSION_ID,
    MAX_BATCH_OPERATIONS,
    RESULT_TYPE,
    ROOTS_LIST,
)
from .client_errors import ConnectionClosedError, ServerError
from .files_intake import FilesCore, FilesIntake

__all__ = [
    "BATCH_RESULT_TYPE",
    "CANCEL_GRACE",
    "EXTENSION",
    "FEATURES",
    "MAX_OPERATIONS",
    "BatchDesk",
    "FilesBatch",
    "FilesBatchExtension",
    "Progress",
    "calling",
    "continue_call",
    "new_connection_id",
]

#: The extension's identifier (version 1; a breaking change takes a new one).
EXTENSION = EXTENSION_ID
#: The ``resultType`` of a ``tools/call`` result that carries a batch.
BATCH_RESULT_TYPE = RESULT_TYPE
#: The features of the extension this client implements.
FEATURES: tuple[str, ...] = ("perPathConsent", CHANGES_FEATURE, CANCEL_FEATURE)
#: The most operations one batch may carry.
MAX_OPERATIONS = MAX_BATCH_OPERATIONS

# Besides files/*, the one method a batch may ask: the modern wire has no roots/list of its own.
_ROOTS_LIST = ROOTS_LIST
_CONSENT = "files/consent"

log = logging.getLogger(__name__)

#: The call a batch belongs to, for a resolver called by mcp's ``Client`` (``name``, ``arguments``).
_CALL: ContextVar[tuple[str, dict[str, Any] | None] | None] = ContextVar("fsbroker_call", default=None)


class FilesBatch(types.Result):
    """A ``tools/call`` result that carries a batch of ``files/*`` operations."""

    result_type: Literal["io.github.jupyter-fsbroker/filesBatch"]
    operations: list[dict[str, Any]]
    continuation: str


@contextmanager
def calling(name: str, arguments: dict[str, Any] | None) -> Iterator[None]:
    """Within: a batch of the call of *name* with *arguments* can be resolved (it is repeated)."""
    token = _CALL.set((name, arguments))
    try:
        yield
    finally:
        _CALL.reset(token)


def new_connection_id() -> str:
    """A fresh connection id (128 bits from the CSPRNG, base64url, prefix ``c_``)."""
    return "c_" + secrets.token_urlsafe(16)


class _Answers:
    """The write side a batch's desk answers into: each answer settles its operation's future."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCResponse):
            answer: dict[str, Any] = {"result": message.result}
        elif isinstance(message, JSONRPCError):
            answer = {"error": message.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        else:
            return
        future = self.waiting.pop(str(message.id), None)
        if future is not None and not future.done():
            future.set_result(answer)

    def fail(self, reason: str) -> None:
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(reason))
        self.waiting.clear()


class Progress:
    """The operations of one batch started so far, and the answers of those that are done."""

    def __init__(self) -> None:
        self.started: list[asyncio.Future[dict[str, Any]]] = []
        #: The answers so far (as :meth:`BatchDesk.perform` gives them), by operation id.
        self.answers: dict[str, dict[str, Any]] = {}

    def follow(self, op_id: object, future: asyncio.Future[dict[str, Any]]) -> None:
        self.started.append(future)

        def done(future: asyncio.Future[dict[str, Any]]) -> None:
            if isinstance(op_id, str) and not future.cancelled() and future.exception() is None:
                self.answers[op_id] = {"id": op_id, **_modern(future.result())}

        future.add_done_callback(done)


class BatchDesk:
    """Performs the batches of one connection through a desk of its own over the same core.

    Parameters
    ----------
    core
        The broker side of the connection (its :class:`~.desk.core_slot.CoreSlot`).
    roots_list
        Answers ``roots/list`` as the legacy wire does (the roots' offer).
    max_in_flight
        How many operations run the core at once.
    on_failure
        Called with an exception the desk did not expect (a bug): it ends the connection.
    label
        Names the connection in log messages.
    """

    def __init__(
        self,
        core: FilesCore,
        *,
        roots_list: Callable[[], dict[str, Any]],
        max_in_flight: int,
        on_failure: Callable[[BaseException], None],
        label: str = "",
    ) -> None:
        self._answers = _Answers()
        self._intake = FilesIntake(
            asyncio.get_running_loop(),
            self._answers,
            core,
            max_in_flight=max_in_flight,
            gate=None,
            on_failure=on_failure,
            label=label,
        )
        self._roots_list = roots_list
        self._ids = itertools.count(1)
        self._closed: str | None = None

    async def perform(
        self, operations: Sequence[dict[str, Any]], progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        """The answers to *operations*, one per operation, by ``id``, in batch order.

        Operations run concurrently as the desk allows, except that those naming the same path
        run in batch order and a ``files/consent`` runs after every earlier operation and before
        every later one. *progress*, when given, follows the operations started and answered
        (what a cancelled call still answers).

        Raises
        ------
        ConnectionClosedError
            The connection closed meanwhile.
        """
        pending: list[asyncio.Future[dict[str, Any]]] = []
        by_path: dict[str, asyncio.Future[dict[str, Any]]] = {}
        for operation in operations:
            op_id, method, params = operation.get("id"), operation.get("method"), operation.get("params")
            if method == _CONSENT and pending:
                await asyncio.wait(pending)
            paths = _paths(params)
            before = [by_path[p] for p in paths if p in by_path and not by_path[p].done()]
            if before:
                await asyncio.wait(before)
            future = self._start(op_id, method, params)
            pending.append(future)
            if progress is not None:
                progress.follow(op_id, future)
            for path in paths:
                by_path[path] = future
            if method == _CONSENT:
                await asyncio.wait([future])
        answers = []
        for operation, future in zip(operations, pending, strict=True):
            answer = await future
            answers.append({"id": operation.get("id"), **_modern(answer)})
        return answers

    def withdraw(self, operations: Sequence[asyncio.Future[dict[str, Any]]]) -> None:
        """Withdraw the *operations* (of :meth:`perform`) still running: a consent prompt is taken
        down, a lock no longer waited for, an answer never given (the call was cancelled)."""
        for request_id, future in list(self._answers.waiting.items()):
            if future in operations and not future.done():
                del self._answers.waiting[request_id]
                self._intake.cancel({"requestId": request_id})
                future.cancel()

    def close(self, reason: str) -> None:
        """Fail every operation still waiting for its answer (the connection ended)."""
        self._closed = self._closed or reason
        self._answers.fail(reason)

    async def aclose(self) -> None:
        """Stop the desk; every operation still waiting fails with the connection's close."""
        self.close(self._closed or "the connection closed")
        await self._intake.aclose()

    def _start(self, op_id: object, method: object, params: object) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self._closed is not None:
            future.set_exception(ConnectionClosedError(self._closed))
            return future
        if not isinstance(op_id, str) or not isinstance(method, str):
            future.set_result(_invalid("an operation needs a string id and method"))
        elif params is not None and not isinstance(params, dict):
            future.set_result(_invalid(f"the params of {method} must be an object"))
        elif method == _ROOTS_LIST:
            future.set_result({"result": self._roots_list()})
        elif not method.startswith(FILES_PREFIX):
            future.set_result(_invalid(f"{method} is not an operation of a batch", code=-32601))
        else:
            request_id = f"batch-{next(self._ids)}"
            self._answers.waiting[request_id] = future
            request = JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
            refusal = self._intake.take_on_loop(request)
            if refusal is not None:
                self._answers.waiting.pop(request_id, None)
                future.set_result(
                    {"error": refusal.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
                )
        return future


async def continue_call(
    session: ClientSession,
    desk: BatchDesk,
    batch: FilesBatch,
    *,
    name: str,
    arguments: dict[str, Any] | None,
    connection_id: str,
    timeout: float | None,
    is_open: Callable[[], str | None],
    cancels: bool = False,
) -> types.CallToolResult:
    """Perform *batch* and each batch after it, continuing the call, until its ``CallToolResult``.

    *is_open* returns ``None`` while the connection is open, else why it closed: then no
    continuation is sent and the call ends with :class:`ConnectionClosedError`. Cancelled, and
    with *cancels* (the server lists the ``cancel`` feature), it tells the server, which ends
    the tool, and performs the tool's clean-up (releasing its locks, ending its watches) for at
    most :data:`CANCEL_GRACE` seconds before the cancellation goes on (PROTOCOL.md, "Cancelling
    a call").

    Raises
    ------
    ConnectionClosedError
        The connection closed (or its kill switch was pulled) during the call.
    ServerError
        A batch that breaks the contract (no operations, too many).
    """
    result: types.CallToolResult | types.Result | None = batch
    progress = Progress()
    try:
        while isinstance(result, FilesBatch):
            _check(result, name)
            progress = Progress()
            answers = await desk.perform(result.operations, progress)
            closed = is_open()
            if closed is not None:
                raise ConnectionClosedError(f"the call of tool {name!r} ended: {closed}")
            sent = asyncio.ensure_future(
                _continue(session, name, arguments, timeout, _meta(connection_id, result, answers))
            )
            try:
                result = await asyncio.shield(sent)
            except asyncio.CancelledError:
                # The continuation is on its way: what it brings back is what to cancel.
                result, progress = None, Progress()
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(CANCEL_GRACE),
                    contextlib.suppress(Exception),
                ):
                    result = await sent
                sent.cancel()
                raise
    except asyncio.CancelledError:
        if cancels and isinstance(result, FilesBatch) and is_open() is None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE):
                await _cancel(session, desk, result, progress, name, arguments, connection_id, timeout)
        raise
    if not isinstance(result, types.CallToolResult):
        raise ServerError(types.INTERNAL_ERROR, f"the server's result for tool {name!r} is not a tool result")
    return result


#: Seconds a cancelled call may take to tell the server and to perform the tool's clean-up.
CANCEL_GRACE = 10.0


async def _cancel(
    session: ClientSession,
    desk: BatchDesk,
    batch: FilesBatch,
    progress: Progress,
    name: str,
    arguments: dict[str, Any] | None,
    connection_id: str,
    timeout: float | None,
) -> None:
    """Cancel the call *batch* belongs to: the answers of its operations that are done, with
    ``cancel`` (those still running are withdrawn, as a cancelled legacy request is); then the
    clean-up batches, to the call's end."""
    desk.withdraw(progress.started)
    by_id = progress.answers
    answers = [by_id[op_id] for op_id in (op.get("id") for op in batch.operations) if op_id in by_id]
    meta = _meta(connection_id, batch, answers, cancel=True)
    try:
        result: types.Result = await _continue(session, name, arguments, timeout, meta)
        while isinstance(result, FilesBatch):
            _check(result, name)
            answers = await desk.perform(result.operations)
            result = await _continue(session, name, arguments, timeout, _meta(connection_id, result, answers))
    except (ServerError, ConnectionClosedError, MCPError) as exc:
        log.debug("cancelling the call of tool %r: %s", name, exc)


def _check(batch: FilesBatch, name: str) -> None:
    if not 1 <= len(batch.operations) <= MAX_OPERATIONS:
        raise ServerError(
            types.INVALID_PARAMS,
            f"the server's batch for tool {name!r} has {len(batch.operations)} operations"
            f" (1 to {MAX_OPERATIONS} are allowed)",
        )


def _meta(
    connection_id: str, batch: FilesBatch, answers: list[dict[str, Any]], *, cancel: bool = False
) -> types.RequestParamsMeta:
    ours: dict[str, Any] = {
        "connection": connection_id,
        "continuation": batch.continuation,
        "answers": answers,
    }
    if cancel:
        ours[CANCEL] = True
    return cast("types.RequestParamsMeta", {EXTENSION: ours})


async def _continue(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any] | None,
    timeout: float | None,
    meta: types.RequestParamsMeta,
) -> types.Result:
    return await session.call_tool(
        name, arguments, read_timeout_seconds=timeout, meta=meta, allow_claimed=True
    )


class FilesBatchExtension(ClientExtension):
    """The client side of ``io.github.jupyter-fsbroker/files``: it claims the batch result type.

    Parameters
    ----------
    desk
        Returns the connection's :class:`BatchDesk` (``None``: the connection is not open).
    connection_id
        The connection id every ``tools/call`` carries.
    is_open
        ``None`` while the connection is open, else why it closed.
    server_features
        The features of the extension the server lists (it takes a cancelled call's ``cancel``
        when it lists ``cancel``).
    """

    identifier = EXTENSION

    def __init__(
        self,
        desk: Callable[[], BatchDesk | None],
        connection_id: str,
        is_open: Callable[[], str | None],
        server_features: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self._desk = desk
        self.connection_id = connection_id
        self._is_open = is_open
        self._server_features = server_features

    def settings(self) -> dict[str, Any]:
        """What the client says it implements: ``{"features": [...]}``."""
        return {"features": list(FEATURES)}

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The batch result type, resolved by performing batches until the tool's result."""
        return (ResultClaim(result_type=BATCH_RESULT_TYPE, model=FilesBatch, resolve=self._resolve),)

    def call_meta(self) -> types.RequestParamsMeta:
        """The ``_meta`` every ``tools/call`` of the connection carries."""
        return cast("types.RequestParamsMeta", {EXTENSION: {"connection": self.connection_id}})

    async def resolve(
        self,
        session: ClientSession,
        batch: FilesBatch,
        *,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
    ) -> types.CallToolResult:
        """Perform *batch* of the call of *name* with *arguments* and continue it to its result."""
        desk = self._desk()
        if desk is None:
            closed = self._is_open() or "the connection is not open"
            raise ConnectionClosedError(f"the call of tool {name!r} ended: {closed}")
        return await continue_call(
            session,
            desk,
            batch,
            name=name,
            arguments=arguments,
            connection_id=self.connection_id,
            timeout=timeout,
            is_open=self._is_open,
            cancels=CANCEL_FEATURE in self._server_features(),
        )

    async def _resolve(self, batch: FilesBatch, ctx: ClaimContext) -> types.CallToolResult:
        call = _CALL.get()
        if call is None or call[0] != ctx.tool_name:
            raise ServerError(
                types.INTERNAL_ERROR, f"a batch of tool {ctx.tool_name!r} arrived outside a call of it"
            )
        return await self.resolve(
            ctx.session, batch, name=call[0], arguments=call[1], timeout=ctx.read_timeout_seconds
        )


def _paths(params: object) -> list[str]:
    if not isinstance(params, dict):
        return []
    return [value for key in ("path", "newPath") if isinstance(value := params.get(key), str)]


def _invalid(message: str, *, code: int = types.INVALID_PARAMS) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _modern(answer: dict[str, Any]) -> dict[str, Any]:
    error = answer.get("error")
    return {"error": to_modern(error)} if isinstance(error, dict) else answer
