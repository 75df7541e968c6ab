"""Sending the ``files/*`` requests of one tool call: timeouts, retries, consent when a grant is missing.

Which refusals consent may cure is decided here (:func:`consent_may_cure`):
PROTOCOL.md's PERMISSION_DENIED ``not_granted``, any PERMISSION_DENIED without
a more specific reason, and a bare ``-32602`` without a reason (SEP-1708's
reference client answers a path that is not granted that way). Each is cured
by one ``files/consent`` per paths and operation and one repetition; a
refusal that comes back after that is raised as it is (a real ``-32602`` for
bad params stays :class:`~.exceptions.InvalidParamsError`).

A consent that names different operations for different paths is sent in
PROTOCOL.md's per-path form only to a client that lists ``perPathConsent``;
to any other it goes as flat requests, one per distinct set of operations
(:func:`flat_groups`), whose answers are merged into the one result the tool
sees (:meth:`~.answers.PathConsentResult.merged`).

Requests go out through the public ``ServerSession.send_request`` with a
generic request model and ``related_request_id`` set to the tool call's id, so
over Streamable HTTP they ride the tool call's own SSE stream; the raw result
dict comes back unchanged, and an error answer arrives as ``MCPError`` and
becomes the typed exception of :mod:`.exceptions`. On the helper's own stdio pipes
they go past the session, straight onto the pipe (:mod:`.direct`), with the
same results and errors. Every other module of the helper
sends through a :class:`Requester`; none builds mcp requests itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import anyio
import mcp_types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import RootModel

from ..wire.catalogue import NOT_GRANTED
from ..wire.methods import OPERATIONS
from .answers import ConsentResult, PathConsentResult, RootEntry, roots_from_result
from .direct import current_channel
from .exceptions import FilesRequestError, InvalidParamsError, PermissionDeniedError, error_from_jsonrpc
from .lenient import compact_params
from .replay import current_step
from .retry import RetryPolicy, Timeouts

__all__ = ["ConsentPaths", "Policies", "Requester", "check_names", "consent_may_cure", "flat_groups"]

#: The paths of a consent: one, several, or ``{path: operations}`` (the per-path form).
ConsentPaths = str | Sequence[str] | Mapping[str, Sequence[str]]

log = logging.getLogger(__name__)

_RawRequest = mcp_types.Request[dict[str, Any], str]


def check_names(kind: str, names: Sequence[str], known: Sequence[str]) -> None:
    """Raise ``ValueError`` for the first of *names* that is not one of *known*."""
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {kind} {name!r}; use some of {', '.join(known)}")


class _RawResult(RootModel[dict[str, Any]]):
    """A result taken as it came: a JSON object."""


def consent_may_cure(error: FilesRequestError) -> bool:
    """Whether *error* is a refusal that a ``files/consent`` may cure.

    PERMISSION_DENIED with reason ``not_granted`` or with no reason at all, and
    a plain ``-32602`` that gives no reason (no ``data.reason``, no
    ``data.expectedOffset``): what a client following SEP-1708's reference
    code sends for a path not granted. Every other reason (``outside_roots``,
    ``read_only``, ``sensitive`` ...) is final.
    """
    if isinstance(error, PermissionDeniedError):
        return error.reason in (None, NOT_GRANTED)
    if type(error) is InvalidParamsError:
        return error.reason is None and "expectedOffset" not in error.data
    return False


def flat_groups(access: Mapping[str, Sequence[str]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """``{path: operations}`` as flat consents: ``[(operations, paths), ...]``, one per set of operations.

    Paths that need the same set of operations (in any order) share one
    entry. Entries come in the order their first path comes in *access*, their
    paths in that order too, and the operations as the first path lists them
    (without repeats): the same request always gives the same prompts.
    """
    groups: dict[frozenset[str], tuple[tuple[str, ...], list[str]]] = {}
    for path, ops in access.items():
        wanted = tuple(dict.fromkeys(ops))
        groups.setdefault(frozenset(wanted), (wanted, []))[1].append(path)
    return [(ops, tuple(paths)) for ops, paths in groups.values()]


class Policies(Protocol):
    """Where a :class:`Requester` reads its policies (a :class:`~.files_client.FilesClient`)."""

    retry: RetryPolicy
    timeouts: Timeouts


class Requester:
    """The ``files/*`` requests of one tool call.

    Parameters
    ----------
    session, request_id
        The tool call's session and id (its requests ride the call's stream).
    policies
        Read at every request, so a change to them applies to the next one.
    consent_message, consent_operations, consent_paths, consent_access
        See :func:`~.capability.files`.
    per_path_consent
        Whether the client lists ``perPathConsent`` (takes per-path items in
        ``files/consent``).
    """

    def __init__(
        self,
        session: ServerSession,
        request_id: mcp_types.RequestId,
        policies: Policies,
        *,
        consent_message: str | None = None,
        consent_operations: tuple[str, ...] = (),
        consent_paths: tuple[str, ...] = (),
        consent_access: Mapping[str, Sequence[str]] | None = None,
        per_path_consent: bool = False,
    ) -> None:
        check_names("operation", consent_operations, OPERATIONS)
        for ops in (consent_access or {}).values():
            check_names("operation", ops, OPERATIONS)
        self._session = session
        self._per_path_consent = per_path_consent
        self._metadata = ServerMessageMetadata(related_request_id=request_id)
        self._policies = policies
        self._consent_message = consent_message
        self._consent_operations = consent_operations
        self._consent_paths = consent_paths
        self._consent_access = {path: tuple(ops) for path, ops in (consent_access or {}).items()}
        self._asked: dict[tuple[tuple[str, ...], str], bool] = {}
        self._asked_pairs: set[tuple[str, str]] = set()
        self._consent_lock = anyio.Lock()
        #: Seconds spent waiting for ``files/consent`` answers: the user's time, not the tool's.
        self.consent_seconds = 0.0

    @property
    def retry(self) -> RetryPolicy:
        """When refused requests are repeated."""
        return self._policies.retry

    @property
    def timeouts(self) -> Timeouts:
        """How long answers are awaited."""
        return self._policies.timeouts

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        nbytes: int = 0,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        binary: bool = False,
    ) -> dict[str, Any]:
        """Send one request and return its raw result, repeating refusals per the retry policy.

        With *binary*, a base64 ``content`` may come decoded, as ``bytes`` (on the
        helper's own pipes: see :class:`~.answers.ReadBytes`).
        """
        policy = retry or self.retry
        attempt = 0
        while True:
            try:
                return await self._send(method, params, timeout or self.timeouts.for_bytes(nbytes), binary)
            except FilesRequestError as exc:
                if attempt >= policy.retries or exc.code not in policy.codes:
                    raise
                delay = policy.delay(attempt, exc)
                log.debug("%s refused (%s); retry %d in %.3fs", method, exc.name, attempt + 1, delay)
                attempt += 1
                await anyio.sleep(delay)

    async def op(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        op: str,
        paths: Sequence[str],
        nbytes: int = 0,
        retry: RetryPolicy | None = None,
        binary: bool = False,
    ) -> dict[str, Any]:
        """:meth:`request` for operation *op* on *paths*, asking consent once on a curable refusal.

        Consent is asked only when a consent message was configured, and once
        per path and operation for this tool call (a path and operation that
        an earlier consent of the call asked for, granted or not, is not asked
        again; which refusals count: :func:`consent_may_cure`); then the
        request is repeated once: approved, it succeeds, and refused, the
        client's answer says why (denied, narrowed, timed out).
        """
        try:
            return await self.request(method, params, nbytes=nbytes, retry=retry, binary=binary)
        except FilesRequestError as exc:
            if self._consent_message is None or not consent_may_cure(exc):
                raise
            # Granted or not, the request is repeated once: refused again, the answer now says why.
            await self._auto_consent(tuple(paths), op)
        return await self.request(method, params, nbytes=nbytes, retry=retry, binary=binary)

    async def consent(
        self, message: str, paths: ConsentPaths, operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """Send ``files/consent`` (see :meth:`FilesClient.consent`)."""
        wanted: list[Any]
        asked_ops: list[str] | None
        if isinstance(paths, Mapping) and paths and not self._per_path_consent:
            # This client cannot read per-path items (an empty mapping has none: sent as it is).
            return await self._flat_consents(message, paths)
        if isinstance(paths, Mapping):  # the per-path form: each path with its own operations
            wanted = [{"path": path, "operations": list(ops)} for path, ops in paths.items()]
            asked, asked_ops = list(paths), list(dict.fromkeys(op for ops in paths.values() for op in ops))
        else:
            wanted = asked = [paths] if isinstance(paths, str) else list(paths)
            asked_ops = None if operations is None else list(operations)
        request = compact_params(
            message=message,
            requestedPaths=wanted,
            operations=None if operations is None else list(operations),
        )
        result = await self._ask(request)
        return ConsentResult.from_result(result, asked, asked_ops)

    async def require_consent(
        self, message: str, paths: ConsentPaths, operations: Sequence[str] | None = None
    ) -> ConsentResult:
        """:meth:`consent`, raising :class:`PermissionDeniedError` (``consent_refused``) on a refusal."""
        answer = await self.consent(message, paths, operations)
        if not answer.granted:
            raise PermissionDeniedError(
                "the user did not grant access",
                data={"error": "PERMISSION_DENIED", "reason": "consent_refused"},
                method="files/consent",
            )
        return answer

    async def _flat_consents(self, message: str, access: Mapping[str, Sequence[str]]) -> PathConsentResult:
        """*access* asked of a client that knows only the flat form: one request per set of operations.

        One after the other, so the user sees one prompt at a time; a refusal
        of one does not keep the others from being asked.
        """
        answers = []
        for ops, paths in flat_groups(access):
            request = compact_params(message=message, requestedPaths=list(paths), operations=list(ops))
            result = await self._ask(request)
            answers.append(ConsentResult.from_result(result, paths, ops))
        return PathConsentResult.merged(answers)

    async def _ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one ``files/consent``, adding the wait for its answer to :attr:`consent_seconds`."""
        started = time.perf_counter()
        try:
            return await self.request("files/consent", request, timeout=self.timeouts.consent)
        finally:
            self.consent_seconds += time.perf_counter() - started

    async def roots(self) -> tuple[RootEntry, ...]:
        """Ask the client for its roots (``roots/list``): the located ones and the named ones, merged."""
        return roots_from_result(await self.request("roots/list", None))

    async def _send(
        self, method: str, params: Mapping[str, Any] | None, timeout: float, binary: bool = False
    ) -> dict[str, Any]:
        step = current_step()
        if step is not None:  # the 2026-07-28 wire: answered from the journal, or by the next batch
            return await step.request(method, params)
        direct = current_channel()
        if direct is not None:  # the helper's own stdio pipes: past mcp's session (see .direct)
            return await direct.request(method, params, timeout, binary=binary)
        request = _RawRequest(method=method, params=dict(params or {}))
        try:
            result = await self._session.send_request(
                cast("mcp_types.ServerRequest", request),
                _RawResult,
                request_read_timeout_seconds=timeout,
                metadata=self._metadata,
            )
        except MCPError as exc:
            raise error_from_jsonrpc(exc.code, exc.message, exc.data, method=method) from None
        return result.root

    def _asked_before(self, paths: tuple[str, ...], op: str) -> bool:
        return all((path, op) in self._asked_pairs for path in paths)

    async def _auto_consent(self, paths: tuple[str, ...], op: str) -> bool:
        assert self._consent_message is not None
        key = (paths, op)
        async with self._consent_lock:
            if key not in self._asked:
                if self._asked_before(paths, op):  # a consent of this call already asked the user
                    return False
                answer = await self._ask_for(paths, op)
                self._asked[key] = answer.granted and op in answer.operations_on(paths)
            return self._asked[key]

    async def _ask_for(self, paths: tuple[str, ...], op: str) -> ConsentResult:
        assert self._consent_message is not None
        if self._consent_access:  # each path with the operations the tool needs there
            access = dict(self._consent_access)
            for path in paths:
                access[path] = tuple(dict.fromkeys((*access.get(path, ()), op)))
            self._asked_pairs.update((path, o) for path, ops in access.items() for o in ops)
            return await self.consent(self._consent_message, access)
        wanted = tuple(dict.fromkeys((op, *self._consent_operations)))
        asked = list(dict.fromkeys((*paths, *self._consent_paths)))
        self._asked_pairs.update((path, o) for path in asked for o in wanted)
        return await self.consent(self._consent_message, asked, wanted)
