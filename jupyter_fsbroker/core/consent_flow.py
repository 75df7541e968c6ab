"""Consent's flow: how a server's ``files/consent`` request reaches the user, and becomes grants.

A connection's :class:`ConsentFlow` builds a
:class:`~jupyter_fsbroker.core.consent.ConsentRequest` and hands it to the
connection's :class:`~jupyter_fsbroker.core.consent.Consenter`; it waits for the
decision with a timeout and denies when the time is up. The decision, narrowed
to what was asked, becomes the connection's grants.

Paths that live grants of the connection already cover for every operation
asked are approved at once, without asking anyone (PROTOCOL.md, "Already
granted"); only the rest is put to the user. A ``requestedPaths`` item may be a
string (it asks for the request's ``operations``) or ``{"path", "operations"}``
(PROTOCOL.md, "Per-path operations"); the result then also lists what was
approved on each path (``approved``).

What the user refused, narrowed or let time out is remembered by the
connection (:class:`~jupyter_fsbroker.core.refusals.Refusals`), so that the next
refusal of that path says why.

A consent never grants more than the user approved, never a path outside the
roots or a sensitive one, and never write or delete in a read-only root.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

from ..wire.timestamps import iso_utc
from .access import Access
from .audit import AuditNote
from .consent import ConsentDecision, Consenter, ConsentItem, ConsentRequest, withdraw
from .consent_facts import path_facts
from .errors import ConfigError, FilesError, InvalidParams
from .grants import OPERATIONS, normalize_operations
from .params import Params
from .paths import parse
from .refusals import CONSENT_DENIED, CONSENT_FAILED, CONSENT_NARROWED, CONSENT_TIMEOUT, CONSENT_WITHDRAWN
from .resolve import resolve
from .rootpath import RootPath

__all__ = ["ConsentFlow"]

log = logging.getLogger(__name__)

#: The answer to a consent that was refused, timed out or withdrawn: not an error.
_REFUSAL: dict[str, Any] = {"granted": False, "approvedPaths": [], "operations": []}


class ConsentFlow:
    """The ``files/consent`` requests of one connection: what is asked, who answers, what is granted.

    Parameters
    ----------
    access
        The connection's identity, state and broker.
    consenter
        Who asks the user.

    Notes
    -----
    A request goes :meth:`prepare` → :meth:`ask` (or :meth:`aask`) →
    :meth:`grant`; :meth:`run` does all three. :meth:`close` withdraws the
    prompts still open: they count as refused.
    """

    def __init__(self, access: Access, consenter: Consenter) -> None:
        self.consenter = consenter
        self._access = access
        self._lock = threading.Lock()
        self._pending: set[Future[ConsentDecision]] = set()
        self._closed = False

    def run(self, p: Params, note: AuditNote) -> dict[str, Any]:
        """Answer one ``files/consent`` request, blocking while the user decides."""
        prepared = self.prepare(p, note)
        if isinstance(prepared, dict):
            return prepared
        request, targets = prepared
        return self.grant(request, targets, self.ask(request), note)

    def prepare(
        self, p: Params, note: AuditNote
    ) -> tuple[ConsentRequest, dict[str, RootPath]] | dict[str, Any]:
        """Check a consent request and build what the user sees; or the result to send at once.

        Blocking: it reads what each path is on disk (a folder's files are
        counted, up to a cap), so it runs on a worker thread. Paths already
        covered by live grants for everything asked are approved at once;
        when nothing is left to ask, the result is sent without asking.

        Returns
        -------
        tuple or dict
            The request and the approvable paths as written with their
            locations; or the result to send at once.

        Raises
        ------
        InvalidParams
            ``requestedPaths`` or ``operations`` is missing, empty or unknown.
        """
        message = p.get("message", str, "")
        wanted = p.strings("operations", None)
        operations = _operations(OPERATIONS if wanted is None else wanted, "operations")
        asked, detailed = _requested(p, operations)
        items, targets = self._items(asked)
        already = [item for item in items if item.approvable and self._covered(targets[item.path], item)]
        for item in already:
            del targets[item.path]
        ask_items = [item for item in items if item not in already]
        # The record names the first path put to the user, not one that live grants already cover.
        note.path = ask_items[0].path if ask_items else next(iter(asked))
        if note.path in targets:
            note.locate(targets[note.path])
        union = tuple(op for op in OPERATIONS if any(op in item.operations for item in ask_items))
        access = self._access
        request = ConsentRequest(
            server=access.label,
            connection_id=access.owner,
            message=message,
            items=tuple(_flatten(ask_items, union)),
            operations=union or operations,
            timeout=access.broker.config.limits.consent_timeout,
            already=tuple(already),
            detailed=detailed,
            asker=access.asker,
        )
        if not request.approvable_paths:
            if already:
                return self._result(request, targets, {}, None, note)
            note.refused = "nothing_approvable"
            return dict(_REFUSAL)
        return request, targets

    def _covered(self, target: RootPath, item: ConsentItem) -> bool:
        """Whether live grants of this connection already give every grantable operation asked on *target*."""
        ops = item.grantable(item.operations)
        grants = self._access.broker.grants
        return bool(ops) and all(grants.find(self._access.owner, target, op) is not None for op in ops)

    def grant(
        self,
        request: ConsentRequest,
        targets: dict[str, RootPath],
        decision: ConsentDecision,
        note: AuditNote,
    ) -> dict[str, Any]:
        """Turn the user's decision, narrowed to what was asked, into grants and the result."""
        access = self._access
        approved: dict[str, tuple[str, ...]] = {}
        if not access.closed:
            for item in request.items:
                if item.path not in targets:
                    continue
                chosen = decision.operations_for(item.path)
                ops = tuple(op for op in item.grantable(request.operations_of(item)) if op in chosen)
                if ops:
                    approved[item.path] = ops
        expires = None if decision.duration is None else time.time() + decision.duration
        self._remember_refusals(request, targets, approved, decision, note)
        grants = access.broker.grants
        for path, ops in approved.items():
            for location in self._spellings(targets[path]):
                grants.add(
                    access.owner, location, ops, expires_at=expires, source="consent", server=access.label
                )
        return self._result(request, targets, approved, expires, note)

    def _result(
        self,
        request: ConsentRequest,
        targets: dict[str, RootPath],
        approved: dict[str, tuple[str, ...]],
        expires: float | None,
        note: AuditNote,
    ) -> dict[str, Any]:
        already = () if self._access.closed else request.already
        entries = [(item.rel or item.path, item.grantable(item.operations)) for item in already]
        entries += [(targets[path].rel, ops) for path, ops in approved.items()]
        if not entries:
            note.refused = "consent_refused"
            return dict(_REFUSAL)
        union = [op for op in OPERATIONS if any(op in ops for _, ops in entries)]
        result: dict[str, Any] = {
            "granted": True,
            "approvedPaths": [path for path, _ in entries],
            "operations": union,
        }
        if request.detailed or any(set(ops) != set(union) for _, ops in entries):
            result["approved"] = [{"path": path, "operations": list(ops)} for path, ops in entries]
        if expires is not None and approved:
            result["expiresAt"] = iso_utc(expires)
        return result

    def _remember_refusals(
        self,
        request: ConsentRequest,
        targets: dict[str, RootPath],
        approved: dict[str, tuple[str, ...]],
        decision: ConsentDecision,
        note: AuditNote,
    ) -> None:
        """Note what the user did not grant, and why, for the refusals that follow (and the audit)."""
        refusals = self._access.refusals
        nothing = not approved
        cause = decision.cause or (CONSENT_DENIED if nothing else CONSENT_NARROWED)
        if self._access.closed:
            cause = CONSENT_WITHDRAWN
        for item in request.items:
            if item.path not in targets:
                continue
            granted = approved.get(item.path, ())
            refused = [op for op in item.grantable(request.operations_of(item)) if op not in granted]
            target = targets[item.path]
            refusals.forget(target, granted)
            if refused:
                refusals.remember(target, refused, cause)
                note.cause = cause

    def withdrawn(self, request: ConsentRequest, targets: dict[str, RootPath], note: AuditNote) -> None:
        """The request was cancelled while its prompt was up: no answer goes out, the record says withdrawn.

        Its paths are remembered as refused (``consent_withdrawn``), as a
        prompt withdrawn by :meth:`close` is.
        """
        self._remember_refusals(request, targets, {}, ConsentDecision.deny(CONSENT_WITHDRAWN), note)
        note.refused = "consent_refused"
        note.cause = CONSENT_WITHDRAWN

    def ask(self, request: ConsentRequest) -> ConsentDecision:
        """Ask the consenter and wait (blocking) for the answer; deny on timeout or close."""
        future = self._submit(request)
        if future is None:
            return ConsentDecision.deny(CONSENT_FAILED if not self._closed else CONSENT_WITHDRAWN)
        try:
            return future.result(timeout=request.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ConsentDecision.deny(CONSENT_TIMEOUT)
        except concurrent.futures.CancelledError:
            return ConsentDecision.deny(_cancelled_cause(request))
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny(CONSENT_FAILED)
        finally:
            self._forget(future)

    async def aask(self, request: ConsentRequest) -> ConsentDecision:
        """:meth:`ask` awaited on the event loop, holding no thread while the user thinks."""
        future = self._submit(request)
        if future is None:
            return ConsentDecision.deny(CONSENT_FAILED if not self._closed else CONSENT_WITHDRAWN)
        try:
            # Shielded: a cancelled request must say why before its prompt is withdrawn (below);
            # unshielded, the cancellation would reach the prompt first, and it could only say
            # "withdrawn" without saying which withdrawal it was.
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), request.timeout)
        except TimeoutError:
            return ConsentDecision.deny(CONSENT_TIMEOUT)  # the prompt is withdrawn below, as timed out
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The request itself was cancelled: the connection closing, or the server.
                closed = self._closed or self._access.closed
                withdraw(future, "the connection closed" if closed else "the server cancelled its request")
                raise
            return ConsentDecision.deny(_cancelled_cause(request))  # withdrawn (connection closed)
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny(CONSENT_FAILED)
        finally:
            future.cancel()
            self._forget(future)

    def close(self) -> None:
        """Withdraw every prompt still open (they count as refused); refuse new ones."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        for future in pending:
            withdraw(future, "the connection closed")

    def _items(self, requested: dict[str, tuple[str, ...]]) -> tuple[list[ConsentItem], dict[str, RootPath]]:
        items: list[ConsentItem] = []
        targets: dict[str, RootPath] = {}
        broker = self._access.broker
        sensitive = broker.config.sensitive
        for path, ops in requested.items():
            try:
                target = parse(path, broker.roots)
            except FilesError as exc:
                items.append(ConsentItem(path, None, False, exc.reason, operations=ops))
                continue
            # As written, and as resolved: a link named notes.txt that points at .env is .env.
            if sensitive.matches(target.parts) or self._access.leads_to_sensitive(target, None):
                items.append(ConsentItem(path, target.rel, False, "sensitive", target.root.read_only, ops))
                continue
            facts = path_facts(target)
            items.append(ConsentItem(path, target.rel, True, None, target.root.read_only, ops, facts))
            targets[path] = target
        return items, targets

    def _spellings(self, target: RootPath) -> list[RootPath]:
        """The approved path as written, and its canonical form when a symlink leads elsewhere in the root."""
        spellings = [target]
        try:
            with resolve(self._access.broker.roots, target, check=lambda root, parts: None) as res:
                if res.root.id == target.root.id and res.location.parts != target.parts:
                    spellings.append(res.location)
        except (FilesError, OSError):
            pass
        return spellings

    def _submit(self, request: ConsentRequest) -> Future[ConsentDecision] | None:
        try:
            future = self.consenter.request_consent(request)
        except Exception:
            log.exception("the consenter failed; denying")
            return None
        with self._lock:
            if self._closed:
                future.cancel()
                return None
            self._pending.add(future)
        return future

    def _forget(self, future: Future[ConsentDecision]) -> None:
        with self._lock:
            self._pending.discard(future)


def _operations(ops: object, param: str) -> tuple[str, ...]:
    if not isinstance(ops, list | tuple) or not all(isinstance(op, str) for op in ops):
        raise InvalidParams(f"{param} must be a list of strings", reason="wrong_param_type", param=param)
    try:
        checked = normalize_operations(ops)
    except ConfigError as exc:
        raise InvalidParams(str(exc), reason="bad_value", param=param) from None
    if not checked:
        raise InvalidParams(f"{param} is empty", reason="bad_value", param=param)
    return checked


def _requested(p: Params, operations: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], bool]:
    """``requestedPaths`` as ``{path: operations}`` (strings ask for *operations*, objects for their
    own), and whether any item was an object."""
    raw = p.get("requestedPaths", list)
    detailed = False
    if not raw:
        raise InvalidParams("requestedPaths is empty", reason="bad_value", param="requestedPaths")
    asked: dict[str, tuple[str, ...]] = {}
    for entry in raw:
        if isinstance(entry, str):
            path, ops = entry, operations
        elif isinstance(entry, dict) and isinstance(entry.get("path"), str):
            detailed = True
            path = entry["path"]
            own = entry.get("operations")
            ops = operations if own is None else _operations(own, "requestedPaths[].operations")
        else:
            raise InvalidParams(
                "requestedPaths items must be strings or objects with a string path",
                reason="wrong_param_type",
                param="requestedPaths",
            )
        asked[path] = tuple(op for op in OPERATIONS if op in (*asked.get(path, ()), *ops))
    return asked, detailed


def _flatten(items: list[ConsentItem], union: tuple[str, ...]) -> list[ConsentItem]:
    """Items whose operations are the request's own are written without them (the flat form)."""
    return [item if item.operations != union else dataclasses.replace(item, operations=()) for item in items]


def _cancelled_cause(request: ConsentRequest) -> str:
    return CONSENT_TIMEOUT if request.timed_out() else CONSENT_WITHDRAWN
