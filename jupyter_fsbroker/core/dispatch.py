"""The request dispatch: one ``files/*`` request from its envelope to its handler and its audit record.

:class:`Dispatch` is made once by the :class:`~jupyter_fsbroker.core.broker.Broker`;
every :class:`~jupyter_fsbroker.core.connection.Connection` of that broker hands
its requests to it (``Connection → Dispatch → handler(ctx)``). For each request
it looks up the method's handler (:mod:`jupyter_fsbroker.core.handlers`), reads
the params, applies the connection's operation rate, makes the
:class:`~jupyter_fsbroker.core.context.RequestContext` the handler gets, maps
whatever the handler raises to a ``FilesError``
(:func:`~jupyter_fsbroker.core.errors.to_files_error`), and writes one audit
record per request (announced in the audit file before the handler runs when
the audit is required: a request whose announcement cannot be written is
refused, PERMISSION_DENIED ``audit_unavailable``). It refuses params holding a
lone surrogate (-32602: only a name that is not valid UTF-8 has one, and none
is ever created or echoed), and checks that JSON can carry every answer before
it leaves (:mod:`jupyter_fsbroker.core.names`).

No request is ever answered without its audit record, and no record holds file content.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

from .audit import AuditLog, AuditNote, AuditRecord
from .context import ConnectionState, RequestContext
from .errors import (
    ClosedError,
    FilesError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    PermissionDenied,
    RateLimited,
    TooLarge,
    to_files_error,
)
from .handlers import (
    changes,
    changes_params,
    consent,
    create,
    delete,
    list_directory,
    read,
    rename_path,
    stat_path,
    still_watched,
    unlock,
    unwatch,
    watch,
    write,
)
from .hop import off_loop
from .listeners import Listeners
from .names import find_surrogate, readable
from .params import Params
from .refusals import CONSENT_CAUSES
from .services import BrokerServices
from .transfers import Transfer

__all__ = ["Dispatch"]

log = logging.getLogger(__name__)


class Dispatch:
    """Decides and performs the ``files/*`` requests of every connection of one broker.

    Parameters
    ----------
    services
        The state the connections share (the broker).
    audit
        Where each request's record goes.
    transfers
        The listeners told about every chunk read or staged.
    executor
        The worker threads of :meth:`ahandle` (raises
        :class:`~jupyter_fsbroker.core.errors.ClosedError` once the broker closed).
    """

    def __init__(
        self,
        services: BrokerServices,
        audit: AuditLog,
        transfers: Listeners[[Transfer]],
        executor: Callable[[], concurrent.futures.Executor],
    ) -> None:
        self._services = services
        self._audit = audit
        self._progress = transfers.notify
        self._executor = executor

    def handle(self, conn: ConnectionState, method: str, params: object) -> dict[str, Any]:
        """Decide and perform one ``files/*`` request of *conn* (blocking).

        Raises
        ------
        FilesError
            The answer to send as the JSON-RPC error.
        """
        with _Envelope(self, conn, method) as note:
            handler, ctx = self._begin(conn, method, params, note)
            return _wire_safe(method, handler(ctx))

    async def ahandle(self, conn: ConnectionState, method: str, params: object) -> dict[str, Any]:
        """:meth:`handle`, awaitable: file I/O on the worker threads, consent prompts on the loop."""
        if method == "files/consent":
            return await self._aconsent(conn, method, params)
        if method == "files/changes":
            return await self._achanges(conn, method, params)
        try:
            executor = self._executor()
        except ClosedError as exc:  # the broker closed
            raise to_files_error(exc) from None
        return await off_loop(executor, self.handle, conn, method, params)

    async def _aconsent(self, conn: ConnectionState, method: str, params: object) -> dict[str, Any]:
        # The prompt is awaited on the loop, so that a request waiting for the user holds no thread.
        with _Envelope(self, conn, method) as note:
            _, ctx = self._begin(conn, method, params, note)
            flow = conn.consent
            # Off the loop: preparing reads what each path is on disk (a folder's files are counted).
            prepared = await off_loop(self._executor(), flow.prepare, ctx.params, note)
            if isinstance(prepared, dict):
                return _wire_safe(method, prepared)
            request, targets = prepared
            try:
                decision = await flow.aask(request)
            except asyncio.CancelledError:
                flow.withdrawn(request, targets, note)
                raise
            granted = await off_loop(self._executor(), flow.grant, request, targets, decision, note)
            return _wire_safe(method, granted)

    async def _achanges(self, conn: ConnectionState, method: str, params: object) -> dict[str, Any]:
        # Waited for on the loop: a files/changes waiting for an event holds no worker thread, so
        # the other operations of its batch (and of every other call) go on meanwhile.
        with _Envelope(self, conn, method) as note:
            _, ctx = self._begin(conn, method, params, note)
            watch_id, cursor, wait_ms, max_events = changes_params(ctx)
            log = conn.changes
            if wait_ms:
                await log.await_changes(watch_id, cursor, wait_ms)
                changes_params(ctx)  # the connection or the watch may have ended meanwhile
            events = log.take(watch_id, cursor, max_events, still_watched(ctx))
            return _wire_safe(method, events.to_result())

    def _begin(
        self, conn: ConnectionState, method: str, params: object, note: AuditNote
    ) -> tuple[_Handler, RequestContext]:
        """Check one request's envelope; its handler and the context it runs with."""
        handler = _HANDLERS.get(method)
        if handler is None:
            raise MethodNotFound(f"unknown method {method!r}", reason="unknown_method")
        p = Params(params)
        raw_path = p.raw.get("path")
        note.path = readable(raw_path) if isinstance(raw_path, str) else None
        bad = find_surrogate(p.raw, skip=_CODEC_DECIDES)
        if bad is not None:
            # Only a name that is not valid UTF-8 on disk has one: never create it, never echo it.
            raise InvalidParams(
                f"parameter {bad!r} holds a lone surrogate, which names no character",
                reason="lone_surrogate",
                param=bad,
            )
        if conn.closed:
            raise PermissionDenied(conn.access.close_reason, reason="connection_closed")
        conn.rate.take_op(path=note.path)
        config = self._services.config
        if config.audit_required:
            try:
                self._audit.announce(note, server=conn.server, connection_id=conn.id)
            except OSError:  # logged by the audit log
                # The server learns that the notebook's audit failed, not where the audit file is.
                raise PermissionDenied(
                    "the notebook requires an audit record before any access, and cannot write one now",
                    reason="audit_unavailable",
                ) from None
        return handler, RequestContext(conn, self._services, p, note, config.limits, self._progress)

    def _failed(self, exc: Exception, conn: ConnectionState, note: AuditNote) -> FilesError:
        """The answer for *exc*, which a request of *conn* raised (logged when unexpected)."""
        error = to_files_error(exc, note.path)
        if error is exc:
            if note.path is not None and error.path is None and not isinstance(error, MethodNotFound):
                error.path = note.path
        elif not isinstance(exc, _EXPECTED):
            log.exception("unexpected error in %s for server %s", note.method, conn.server)
        return error

    def _record(self, conn: ConnectionState, note: AuditNote, error: FilesError | None) -> None:
        """Write the audit record of one request; *error* is its answer, ``None`` when it succeeded."""
        try:
            self._audit.append(
                AuditRecord(
                    time=note.started,
                    server=conn.server,
                    connection_id=conn.id,
                    method=note.method,
                    path=note.path,
                    canonical=note.canonical,
                    root=note.root,
                    decision="deny"
                    if note.refused is not None or isinstance(error, _POLICY_REFUSALS)
                    else "allow",
                    error=None if error is None else _error_name(error),
                    reason=note.refused if error is None else error.reason,
                    bytes=note.bytes if error is None else 0,
                    duration_ms=(time.perf_counter() - note.clock) * 1000.0,
                    lock_id=note.lock_id,
                    cause=_own_cause(note, error),
                    audit_id=note.audit_id,
                )
            )
        except Exception:  # pragma: no cover - the audit never breaks a request
            log.exception("could not record an audit entry")


class _Envelope:
    """One request's audit record, written however it ends, and the answer for what it raised."""

    __slots__ = ("_conn", "_dispatch", "note")

    def __init__(self, dispatch: Dispatch, conn: ConnectionState, method: str) -> None:
        self._dispatch = dispatch
        self._conn = conn
        self.note = AuditNote(method)

    def __enter__(self) -> AuditNote:
        return self.note

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        dispatch, conn, note = self._dispatch, self._conn, self.note
        if not isinstance(exc, Exception):
            # Succeeded, or cancelled (no answer is sent then, so its record carries no error).
            dispatch._record(conn, note, None)
            return False
        error = dispatch._failed(exc, conn, note)
        dispatch._record(conn, note, error)
        if error is exc:
            return False
        raise error from _cause(exc)


#: What a request may meet besides its answers: the OS refusing, the connection closing under it.
_EXPECTED = (OSError, ClosedError)


def _own_cause(note: AuditNote, error: FilesError | None) -> str | None:
    """The cause a request's record keeps: its own, never an earlier consent's.

    The answer to a request for a path the user refused earlier names that
    consent's cause (the server learns why); the consent's own record already
    says it, and this request is a new one (often the refusal that opens the
    next consent flow), so its record leaves it out.
    """
    if error is None:
        return note.cause
    cause = error.data.get("cause", note.cause)
    return None if error.reason == "not_granted" and cause in CONSENT_CAUSES else cause


def _cause(exc: Exception) -> Exception | None:
    """What an answer made from *exc* keeps as its cause: the unexpected only (the rest says enough)."""
    return None if isinstance(exc, _EXPECTED) else exc


#: Parameters whose lone surrogates their codec judges (ENCODING_ERROR), not the dispatch.
_CODEC_DECIDES = frozenset({"content"})

#: Results whose bulk is made wire-safe where it is made: ``files/list`` names (sent readable,
#: ``undecodableName``), ``files/read`` content (a lone surrogate in decoded text is ENCODING_ERROR).
_SAFE_AT_SOURCE = {"files/list": frozenset({"entries"}), "files/read": frozenset({"content"})}


def _wire_safe(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """*result*, once sure JSON can carry it; else an error that says so, rather than a dead connection.

    The causes are fixed where names and text are made; this is the last line.
    """
    bad = find_surrogate(result, skip=_SAFE_AT_SOURCE.get(method, frozenset()))
    if bad is not None:
        log.error("the answer to %s holds text JSON cannot carry (at %s)", method, bad)
        raise InternalError(f"the answer to {method} cannot be sent", reason="unencodable_reply")
    return result


#: Errors that are the broker's policy saying no; other errors happen to allowed requests.
_POLICY_REFUSALS = (PermissionDenied, RateLimited, TooLarge)


def _error_name(error: FilesError) -> str:
    if error.name is not None:
        return error.name
    return {-32602: "INVALID_PARAMS", -32601: "METHOD_NOT_FOUND"}.get(error.code, "INTERNAL_ERROR")


_Handler = Callable[[RequestContext], dict[str, Any]]
_HANDLERS: dict[str, _Handler] = {
    "files/read": read,
    "files/write": write,
    "files/list": list_directory,
    "files/stat": stat_path,
    "files/create": create,
    "files/delete": delete,
    "files/rename": rename_path,
    "files/watch": watch,
    "files/unwatch": unwatch,
    "files/changes": changes,
    "files/unlock": unlock,
    "files/consent": consent,
}
