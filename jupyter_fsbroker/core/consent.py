"""Consent: how a server's ``files/consent`` request reaches the user, and becomes grants.

A connection's :class:`ConsentFlow` builds a :class:`ConsentRequest` (which
server asks, its message, each requested path and whether it can be approved
at all) and hands it to a :class:`Consenter`. A consenter only *returns a
future*: the notebook's widget, the terminal prompt or a test resolves it with
a :class:`ConsentDecision` when the user answers. The flow waits for it with a
timeout and denies when the time is up, so no consenter can hang a request,
and nothing ever blocks inside a click handler. The decision, narrowed to what
was asked, becomes the connection's grants.

A consent never grants more than the user approved, never a path outside the
roots or a sensitive one, and never write or delete in a read-only root.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .access import Access
from .audit import AuditNote
from .errors import ConfigError, FilesError, InvalidParams
from .grants import OPERATIONS, normalize_operations
from .params import Params
from .paths import parse, resolve
from .rootpath import RootPath
from .timestamps import iso_utc

__all__ = [
    "CallbackConsenter",
    "ConsentDecision",
    "ConsentFlow",
    "ConsentItem",
    "ConsentRequest",
    "Consenter",
    "DenyingConsenter",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsentItem:
    """One requested path as the user sees it.

    Attributes
    ----------
    path
        The path as the server wrote it.
    rel
        Its root-relative spelling when it lies inside a root, else ``None``.
    approvable
        Whether the user can approve it at all.
    reason
        Why not (``outside_roots``, ``sensitive``, ...), for the user.
    read_only
        The path lies in a read-only root: only read and watch can be granted.
    """

    path: str
    rel: str | None
    approvable: bool
    reason: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class ConsentRequest:
    """A server's request for access, as shown to the user."""

    server: str
    connection_id: str
    message: str
    items: tuple[ConsentItem, ...]
    operations: tuple[str, ...]
    timeout: float
    id: str = field(default_factory=lambda: "consent_" + secrets.token_hex(6))
    created_at: float = field(default_factory=time.time)

    @property
    def deadline(self) -> float:
        """``time.time()`` at which an unanswered request is denied."""
        return self.created_at + self.timeout

    @property
    def approvable_paths(self) -> tuple[str, ...]:
        """The requested paths the user may approve."""
        return tuple(item.path for item in self.items if item.approvable)


@dataclass(frozen=True)
class ConsentDecision:
    """The user's answer.

    Attributes
    ----------
    approved_paths
        Requested paths (as the server wrote them) the user approves; a subset
        of the approvable ones (the broker drops anything else).
    operations
        Operations the user approves; a subset of those requested.
    duration
        Seconds the grants last; ``None`` for as long as the connection lasts.
    """

    approved_paths: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    duration: float | None = None

    @property
    def granted(self) -> bool:
        return bool(self.approved_paths and self.operations)

    @classmethod
    def deny(cls) -> ConsentDecision:
        """A refusal."""
        return cls()

    @classmethod
    def approve_all(cls, request: ConsentRequest, *, duration: float | None = None) -> ConsentDecision:
        """Everything approvable in *request*, for all requested operations."""
        return cls(request.approvable_paths, request.operations, duration)


@runtime_checkable
class Consenter(Protocol):
    """Asks the user. Implementations must not block: they return a future.

    The broker cancels the future when the request times out or the connection
    closes; implementations may watch for that (``future.add_done_callback``)
    to update what they show.
    """

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        """Show *request* to the user; resolve the future with their decision."""
        ...


class DenyingConsenter:
    """Refuses every request at once: the default where nobody can be asked."""

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        future.set_result(ConsentDecision.deny())
        return future


class CallbackConsenter:
    """Answers at once with a function of the request: for scripts, policies and tests.

    Parameters
    ----------
    decide
        Called with each request; returns the decision. It runs on the
        broker's worker thread, so it must be quick.
    """

    def __init__(self, decide: Callable[[ConsentRequest], ConsentDecision]) -> None:
        self._decide = decide

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        try:
            future.set_result(self._decide(request))
        except BaseException as exc:
            future.set_exception(exc)
        return future


# -- the flow of one connection ------------------------------------------------------------------

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
        """Check a consent request and build what the user sees; a refusal when nothing is approvable.

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
        requested = p.strings("requestedPaths")
        assert requested is not None
        if not requested:
            raise InvalidParams("requestedPaths is empty", reason="bad_value", param="requestedPaths")
        wanted = p.strings("operations", None)
        try:
            operations = normalize_operations(OPERATIONS if wanted is None else wanted)
        except ConfigError as exc:
            raise InvalidParams(str(exc), reason="bad_value", param="operations") from None
        if not operations:
            raise InvalidParams("operations is empty", reason="bad_value", param="operations")
        note.path = requested[0]
        items, targets = self._items(list(dict.fromkeys(requested)))
        access = self._access
        request = ConsentRequest(
            server=access.label,
            connection_id=access.owner,
            message=message,
            items=tuple(items),
            operations=operations,
            timeout=access.broker.config.limits.consent_timeout,
        )
        if not request.approvable_paths:
            note.refused = "nothing_approvable"
            return dict(_REFUSAL)
        return request, targets

    def grant(
        self,
        request: ConsentRequest,
        targets: dict[str, RootPath],
        decision: ConsentDecision,
        note: AuditNote,
    ) -> dict[str, Any]:
        """Turn the user's decision, narrowed to what was asked, into grants and the result."""
        approved = [path for path in decision.approved_paths if path in targets]
        ops_ok = [op for op in request.operations if op in decision.operations]
        access = self._access
        if not approved or not ops_ok or access.closed:
            note.refused = "consent_refused"
            return dict(_REFUSAL)
        expires = None if decision.duration is None else time.time() + decision.duration
        grants = access.broker.grants
        for path in approved:
            target = targets[path]
            granted_ops = [op for op in ops_ok if not (target.root.read_only and op in ("write", "delete"))]
            for location in self._spellings(target):
                grants.add(
                    access.owner,
                    location,
                    granted_ops,
                    expires_at=expires,
                    source="consent",
                    server=access.label,
                )
        result: dict[str, Any] = {
            "granted": True,
            "approvedPaths": [targets[path].rel for path in approved],
            "operations": ops_ok,
        }
        if expires is not None:
            result["expiresAt"] = iso_utc(expires)
        return result

    def ask(self, request: ConsentRequest) -> ConsentDecision:
        """Ask the consenter and wait (blocking) for the answer; deny on timeout or close."""
        future = self._submit(request)
        if future is None:
            return ConsentDecision.deny()
        try:
            return future.result(timeout=request.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ConsentDecision.deny()
        except concurrent.futures.CancelledError:
            return ConsentDecision.deny()
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny()
        finally:
            self._forget(future)

    async def aask(self, request: ConsentRequest) -> ConsentDecision:
        """:meth:`ask` awaited on the event loop, holding no thread while the user thinks."""
        future = self._submit(request)
        if future is None:
            return ConsentDecision.deny()
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), request.timeout)
        except TimeoutError:
            return ConsentDecision.deny()  # wait_for cancelled the future: the prompt withdraws
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the request itself was cancelled (server cancelled, connection closing)
            return ConsentDecision.deny()  # the consent was withdrawn (connection closed)
        except Exception:
            log.exception("the consenter failed; denying")
            return ConsentDecision.deny()
        finally:
            future.cancel()
            self._forget(future)

    def close(self) -> None:
        """Withdraw every prompt still open (they count as refused); refuse new ones."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    def _items(self, requested: list[str]) -> tuple[list[ConsentItem], dict[str, RootPath]]:
        items: list[ConsentItem] = []
        targets: dict[str, RootPath] = {}
        broker = self._access.broker
        sensitive = broker.config.sensitive
        for path in requested:
            try:
                target = parse(path, broker.roots)
            except FilesError as exc:
                items.append(ConsentItem(path, None, False, exc.reason))
                continue
            if sensitive.matches(target.parts):
                items.append(ConsentItem(path, target.rel, False, "sensitive", target.root.read_only))
                continue
            items.append(ConsentItem(path, target.rel, True, None, target.root.read_only))
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
