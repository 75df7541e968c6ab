"""The 2026-07-28 era on the server: an mcp ``Extension`` that lets ``files(ctx)`` work there.

Pass it to the server at construction (extensions are fixed then)::

    server = MCPServer("analysis", extensions=[FilesExtension(keys)])
    enable_files(server)                       # the legacy era, as before

It advertises ``io.github.jupyter-fsbroker/files`` and wraps ``tools/call``: on a modern
request from a client that lists the extension, the tool runs with a
:class:`~.replay.ReplayStep` standing in for the client. When the tool finishes, its result is
the answer; when it waits for ``files/*`` answers, the answer is a batch and a sealed
continuation (:mod:`.sealing`), and the client's next ``tools/call`` runs the tool again over
the answers recorded so far (PROTOCOL.md, "How this project's server kit resumes a call").
Nothing is kept between requests, so any replica given the same keys serves any step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.request_state import authenticated_principal
from mcp_types import CallToolRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..wire.modern import (
    CLIENT_CAPABILITIES_META,
    EXTENSION_ID,
    Continuation,
    batch_result,
    extension_settings,
    lists_extension,
    read_continuation,
)
from .exceptions import ContinuationRefusedError, ReplayDivergedError
from .peers import ConnectionFiles
from .replay import ReplayStep
from .sealing import CallState, ContinuationSealer, digest

__all__ = ["FilesExtension"]

# Event-loop turns without a new operation after which a waiting tool is taken to have asked
# all it can without answers (concurrent calls, such as a read-ahead, join the batch meanwhile).
_QUIET_TURNS = 8


class FilesExtension(Extension):
    """``files/*`` on the 2026-07-28 wire, by batches and sealed continuations.

    Parameters
    ----------
    keys
        The key ring continuations are sealed with (see
        :func:`~.sealing.load_state_keys`); replicas given the same ring continue each other's
        calls. ``None``: a key of this process only (a single replica).
    ttl
        Seconds a continuation stays valid (a consent prompt must fit).
    """

    identifier = EXTENSION_ID

    def __init__(self, keys: Sequence[bytes] | None = None, *, ttl: float = 600.0) -> None:
        self.sealer = (
            ContinuationSealer(keys, ttl=ttl) if keys is not None else ContinuationSealer.ephemeral(ttl=ttl)
        )

    def settings(self) -> dict[str, Any]:
        return extension_settings()

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        raw = ctx.params or {}
        meta = raw.get("_meta")
        meta = cast("Mapping[str, Any]", meta) if isinstance(meta, Mapping) else None
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or not lists_extension(meta):
            return await call_next(ctx)  # files(ctx) says why it cannot serve, if the tool asks
        try:
            continuation = read_continuation(meta)
        except ValueError:
            raise ContinuationRefusedError("invalid") from None
        principal = _principal(ctx, continuation)
        if principal is None:
            return await call_next(ctx)  # no one to bind a continuation to: files(ctx) refuses
        tool, arguments = params.name, digest(raw.get("arguments") or {})
        if continuation is not None and continuation.token is not None:
            state = self.sealer.open(continuation.token, tool=tool, arguments=arguments, principal=principal)
            journal = state.journal + _answered(state, continuation)
            call, step_number, started = state.call, state.step + 1, state.started
        else:
            journal, call, step_number, started = (), ContinuationSealer.new_call_id(), 0, time.time()
        step = ReplayStep(_client(meta), journal, started=started)
        result = await _run(step, ctx, call_next)
        if result is not None:
            if step.diverged:
                raise ReplayDivergedError(tool)
            return result[0]
        if step.diverged:
            raise ReplayDivergedError(tool)
        state = CallState(
            call,
            step_number,
            started,
            tool,
            arguments,
            principal,
            tuple((op.id, key) for op, key in step.batch),
            journal,
        )
        return batch_result([op for op, _ in step.batch], self.sealer.seal(state))


async def _run(
    step: ReplayStep, ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> tuple[HandlerResult] | None:
    """Run the tool for one step: ``(its result,)``, or ``None`` once it waits for new answers."""
    with step.bound():  # the task copies this context: the tool's files(ctx) finds the step
        task = asyncio.ensure_future(call_next(ctx))
    waiter = asyncio.ensure_future(step.wait_for_new())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        quiet = 0
        while not task.done() and quiet < _QUIET_TURNS and not step.full:
            asked = step.asked
            await asyncio.sleep(0)
            quiet = quiet + 1 if step.asked == asked else 0
        if task.done():
            return (task.result(),)
        step.close()
        task.cancel()
        await asyncio.wait({task})
        return None
    finally:
        waiter.cancel()
        if not task.done():  # this request itself was cancelled: so is the tool
            step.close()
            task.cancel()


def _answered(state: CallState, continuation: Continuation) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """The journal entries of the batch *continuation* answers, in batch order.

    Raises
    ------
    ContinuationRefusedError
        The answers are not exactly one per operation of the batch.
    """
    answers = {answer.id: answer for answer in continuation.answers}
    if len(answers) != len(continuation.answers) or set(answers) != {op_id for op_id, _ in state.batch}:
        raise ContinuationRefusedError("invalid")
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for op_id, key in state.batch:
        wire = answers[op_id].to_wire()
        del wire["id"]
        entries.append((key, wire))
    return tuple(entries)


def _principal(ctx: ServerRequestContext[Any, Any], continuation: Continuation | None) -> str | None:
    """The digest of whom a continuation is bound to: the authenticated subject, else the
    client's connection id; ``None`` when there is neither."""
    subject = authenticated_principal(ctx)
    if subject is not None:
        return digest(["subject", subject])
    if continuation is not None and continuation.connection:
        return digest(["connection", continuation.connection])
    return None


def _client(meta: Mapping[str, Any] | None) -> ConnectionFiles:
    """The client as a modern request describes itself: its capabilities and the extension's features."""
    caps = (meta or {}).get(CLIENT_CAPABILITIES_META)
    capabilities = cast("Mapping[str, Any]", caps) if isinstance(caps, Mapping) else {}
    extensions = capabilities.get("extensions")
    settings = (
        cast("Mapping[str, Any]", extensions).get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    )
    features = cast("Mapping[str, Any]", settings).get("features") if isinstance(settings, Mapping) else None
    names = [name for name in features if isinstance(name, str)] if isinstance(features, list) else []
    return ConnectionFiles(True, capabilities, names)
