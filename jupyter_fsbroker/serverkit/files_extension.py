"""The 2026-07-28 era on the server: an mcp ``Extension`` that lets ``files(ctx)`` work there.

Pass it to the server at construction (extensions are fixed then)::

    server = MCPServer("analysis", extensions=[FilesExtension(keys)])
    enable_files(server)                       # the legacy era, as before

It advertises ``io.github.jupyter-fsbroker/files`` and wraps ``tools/call``: on a modern
request from a client that lists the extension, the tool runs with a
:class:`~.replay.ReplayStep` standing in for the client. When the tool finishes, its result is
the answer; when it waits for ``files/*`` answers, the answer is a batch and a sealed
continuation (:mod:`.sealing`). This process keeps the waiting run (:mod:`.live_calls`): the
continuation that comes back to it hands the answers to the tool, which goes on where it is.
A continuation that reaches another replica given the same keys runs the tool again over the
answers recorded so far, while they fit in a continuation (PROTOCOL.md, "How this project's
server kit resumes a call"); past that the call is live in one replica only, and the
continuation names it for the proxy to route on (``instance``).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.request_state import authenticated_principal
from mcp_types import CallToolRequestParams, CallToolResult, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..wire.modern import (
    CLIENT_CAPABILITIES_META,
    EXTENSION_ID,
    Continuation,
    batch_result,
    extension_settings,
    lists_extension,
    read_continuation,
    routed,
    split_route,
)
from .exceptions import ContinuationRefusedError, ReplayDivergedError
from .live_calls import LiveCall, LiveCalls, run_round
from .peers import ConnectionFiles, KeptLockIds
from .replay import ReplayStep
from .sealing import CallState, ContinuationSealer, Entries, Journal, digest, journal_too_large

__all__ = ["FilesExtension"]


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
    instance
        This replica's name (1 to 64 of ``A-Z a-z 0-9 _ -``), put before each continuation so
        that a proxy can route a call back to the replica that holds it live (PROTOCOL.md,
        "Routing a call to the instance that holds it"); ``None``: continuations name none.
    live_calls
        How many calls this process keeps live at once (:mod:`.live_calls`); 0: none, every
        round replays.
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        keys: Sequence[bytes] | None = None,
        *,
        ttl: float = 600.0,
        instance: str | None = None,
        live_calls: int = 256,
    ) -> None:
        self.sealer = (
            ContinuationSealer(keys, ttl=ttl) if keys is not None else ContinuationSealer.ephemeral(ttl=ttl)
        )
        routed(instance, "")  # a bad name fails here, not on the first call
        self.instance = instance
        self.live = LiveCalls(live_calls)
        # Locks belong to the client's connection, so its concurrent calls take turns on a path
        # in this process, as one legacy session's do: one table per principal, alive while a
        # call of it runs.
        self._kept_lock_ids: weakref.WeakValueDictionary[str, KeptLockIds] = weakref.WeakValueDictionary()

    def settings(self) -> dict[str, Any]:
        return extension_settings()

    def close(self) -> None:
        """Cancel the calls kept live (call it when the server stops)."""
        self.live.close()

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
        added: Entries = ()
        cancelling = answered_only = False
        if continuation is None or continuation.token is None:
            call, started = ContinuationSealer.new_call_id(), time.time()
            journal: Journal | None = Journal()
            step = ReplayStep(self._client(meta, principal), (), started=started)
            live = LiveCall(step, _start(step, ctx, call_next), 0)
        else:
            _, sealed = split_route(continuation.token)
            state = self.sealer.open(sealed, tool=tool, arguments=arguments, principal=principal)
            call, started, journal = state.call, state.started, state.journal
            cancelling = state.cancelled or continuation.cancel
            answered = _answered(state, continuation)
            added = tuple((key, answer) for _, key, answer in answered)
            kept = self.live.take(call)
            if kept is not None and kept.round == state.step:
                kept.step.answer({op_id: answer for op_id, _, answer in answered})
                live = LiveCall(kept.step, kept.task, state.step + 1)
                # Cancelled, the tool may wait on an operation the client did not perform.
                answered_only = continuation.cancel
            else:
                if kept is not None:  # another replica carried the call on meanwhile
                    kept.cancel()
                if journal is None:
                    raise ContinuationRefusedError("live_elsewhere")
                recorded = self.sealer.entries(journal, call) + added
                step = ReplayStep(self._client(meta, principal), recorded, started=started)
                live = LiveCall(step, _start(step, ctx, call_next), state.step + 1)
        step = live.step
        ended = await run_round(live, cancelling=cancelling, answered_only=answered_only)
        if step.diverged:
            live.cancel()
            raise ReplayDivergedError(tool)
        if ended:
            return _outcome(tool, live.task)
        batch = step.hand_out()
        kept_live = self.live.keep(call, live, self._live_ttl(started))
        if not kept_live:
            live.cancel()
        try:
            journal = None if journal is None else self.sealer.extend(journal, call, added)
            if journal is None and not kept_live:
                raise journal_too_large()
            state = CallState(
                call,
                live.round,
                started,
                tool,
                arguments,
                principal,
                tuple((op.id, key) for op, key in batch),
                journal,
                cancelled=step.cancelled,
            )
            token = self.sealer.seal(state)
        except BaseException:
            self.live.drop(call)
            raise
        return batch_result([op for op, _ in batch], routed(self.instance, token))

    def _client(self, meta: Mapping[str, Any] | None, principal: str) -> ConnectionFiles:
        """The client as a modern request describes itself (:func:`_described`), with the locks
        the calls of *principal* hold in this process."""
        held = self._kept_lock_ids.get(principal)
        if held is None:
            held = self._kept_lock_ids[principal] = KeptLockIds()
        capabilities, features = _described(meta)
        return ConnectionFiles(True, capabilities, features, kept_lock_ids=held)

    def _live_ttl(self, started: float) -> float:
        """How long a kept run waits for its continuation: as long as the continuation is valid."""
        return min(self.sealer.ttl, started + self.sealer.call_lifetime - time.time())


def _outcome(tool: str, task: asyncio.Future[Any]) -> HandlerResult:
    """What the tool's ended run answers: its result; cancelled by the client, an error result."""
    if task.cancelled():
        text = f"the call of tool {tool!r} was cancelled by the client"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return cast("HandlerResult", task.result())


def _start(step: ReplayStep, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> asyncio.Future[Any]:
    """Start the tool's run with *step* standing in for the client."""
    with step.bound():  # the task copies this context: the tool's files(ctx) finds the step
        return asyncio.ensure_future(call_next(ctx))


def _answered(state: CallState, continuation: Continuation) -> tuple[tuple[str, str, Mapping[str, Any]], ...]:
    """``(id, operation key, answer)`` for each operation of the batch *continuation* answers,
    in batch order.

    Raises
    ------
    ContinuationRefusedError
        The answers are not exactly one per operation of the batch (of some of them, when the
        client cancels the call), or one is for no operation of it.
    """
    answers = {answer.id: answer for answer in continuation.answers}
    asked = {op_id for op_id, _ in state.batch}
    if len(answers) != len(continuation.answers) or not set(answers) <= asked:
        raise ContinuationRefusedError("invalid")
    if set(answers) != asked and not continuation.cancel:
        raise ContinuationRefusedError("invalid")
    entries: list[tuple[str, str, Mapping[str, Any]]] = []
    for op_id, key in state.batch:
        if op_id not in answers:
            continue
        wire = answers[op_id].to_wire()
        del wire["id"]
        entries.append((op_id, key, wire))
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


def _described(meta: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], list[str]]:
    """The client as a modern request describes itself: its capabilities and the extension's features."""
    caps = (meta or {}).get(CLIENT_CAPABILITIES_META)
    capabilities = cast("Mapping[str, Any]", caps) if isinstance(caps, Mapping) else {}
    extensions = capabilities.get("extensions")
    settings = (
        cast("Mapping[str, Any]", extensions).get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    )
    features = cast("Mapping[str, Any]", settings).get("features") if isinstance(settings, Mapping) else None
    names = [name for name in features if isinstance(name, str)] if isinstance(features, list) else []
    return capabilities, names
