"""Consent as the user meets it: the question (:class:`ConsentRequest`), the answer, who asks.

A connection's consent flow (:mod:`jupyter_fsbroker.core.consent_flow`) builds a
:class:`ConsentRequest` (which server asks, its message, each requested path
and whether it can be approved at all) and hands it to a :class:`Consenter`. A
consenter only *returns a future*: the notebook's widget, the terminal prompt
or a test resolves it with a :class:`ConsentDecision` when the user answers.
The flow waits for it with a timeout and denies when the time is up, so no
consenter can hang a request, and nothing ever blocks inside a click handler.

This module holds the values and the two simplest consenters; what becomes of
a decision (the grants) is the flow's.
"""

from __future__ import annotations

import secrets
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..wire.timestamps import iso_utc
from .consent_facts import Asker, PathFacts, asker_text, covers_text, effect_text, until_disconnect
from .grants import OPERATIONS

__all__ = [
    "NO_ONE_TO_ASK",
    "TIMEOUT_SLACK",
    "CallbackConsenter",
    "ConsentDecision",
    "ConsentItem",
    "ConsentRequest",
    "Consenter",
    "DenyingConsenter",
    "note_withdrawal",
    "withdraw",
    "withdrawal_reason",
]


#: Seconds before its deadline within which a request ending unanswered counts as timed out
#: (:meth:`ConsentRequest.timed_out`).
TIMEOUT_SLACK = 1.0


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
    operations
        The operations asked for this path; empty: those of the request
        (see :meth:`ConsentRequest.operations_of`).
    facts
        What the path is on disk (a folder and how many files, a file and its
        size, nothing yet), for the user to weigh.
    """

    path: str
    rel: str | None
    approvable: bool
    reason: str | None = None
    read_only: bool = False
    operations: tuple[str, ...] = ()
    facts: PathFacts = field(default_factory=PathFacts)

    def destructive(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """The operations of *asked* that can destroy data here (delete; write over an existing file).

        The prompts mark them and start them unticked.
        """
        return tuple(op for op in asked if self.facts.destructive(op))

    def ticked(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """The operations of *asked* a prompt starts ticked: grantable and not destructive."""
        return tuple(op for op in self.grantable(asked) if not self.facts.destructive(op))

    def grantable(self, asked: tuple[str, ...]) -> tuple[str, ...]:
        """The operations of *asked* that can be granted here (no write or delete in a read-only root)."""
        if not self.approvable:
            return ()
        return tuple(op for op in asked if not (self.read_only and op in ("write", "delete")))


@dataclass(frozen=True)
class ConsentRequest:
    """A server's request for access, as shown to the user.

    Attributes
    ----------
    server, connection_id
        Who asks: the connection's name and id.
    message
        The server's reason, as it wrote it.
    items
        The paths put to the user, in request order (those that cannot be
        approved too, so the user sees everything that was asked).
    operations
        Every operation asked for, on any path (their union, in canonical order).
    timeout
        Seconds before an unanswered request is refused.
    already
        Paths approved at once because live grants already cover them (not asked).
    detailed
        The server asked in the per-path form: the result lists what was
        approved on each path (``approved``).
    asker
        Who asks: the server's own name, where it runs, whether it is sandboxed.
    """

    server: str
    connection_id: str
    message: str
    items: tuple[ConsentItem, ...]
    operations: tuple[str, ...]
    timeout: float
    id: str = field(default_factory=lambda: "consent_" + secrets.token_hex(6))
    created_at: float = field(default_factory=time.time)
    already: tuple[ConsentItem, ...] = ()
    detailed: bool = False
    asker: Asker = field(default_factory=Asker)

    @property
    def who(self) -> str:
        """Who asks, beside the user's label: the server's own name, where it runs, sandboxed ('' unknown)."""
        return asker_text(self.asker, self.server)

    @property
    def until_disconnect(self) -> str:
        """The label of the duration that lasts the connection (``until you disconnect analysis``)."""
        return until_disconnect(self.server)

    def operations_of(self, item: ConsentItem) -> tuple[str, ...]:
        """The operations asked for *item*: its own, or the request's."""
        return item.operations or self.operations

    @property
    def per_path(self) -> bool:
        """Whether different paths ask for different operations."""
        return len({self.operations_of(item) for item in self.items if item.approvable}) > 1

    def to_json(self) -> dict[str, Any]:
        """The request as a JSON-ready dict (camelCase), for views outside the kernel."""
        return {
            "id": self.id,
            "server": self.server,
            "connectionId": self.connection_id,
            "message": self.message,
            "operations": list(self.operations),
            "items": [self._item_json(item) for item in self.items],
            "asker": {
                "title": self.asker.title,
                "place": self.asker.place,
                "host": self.asker.host,
                "sandboxed": self.asker.sandboxed,
                "text": self.who,
            },
            "untilDisconnect": self.until_disconnect,
            "already": [item.rel or item.path for item in self.already],
            "createdAt": iso_utc(self.created_at),
            "deadline": iso_utc(self.deadline),
        }

    def _item_json(self, item: ConsentItem) -> dict[str, Any]:
        asked = self.operations_of(item)
        facts = item.facts
        shown = item.rel or item.path
        return {
            "path": item.path,
            "rel": item.rel,
            "approvable": item.approvable,
            "reason": item.reason,
            "readOnly": item.read_only,
            "operations": list(asked),
            "grantable": list(item.grantable(asked)),
            "destructive": list(item.destructive(asked)),
            "ticked": list(item.ticked(asked)),
            "kind": facts.kind,
            "wholeRoot": facts.whole_root,
            "location": facts.location,
            "files": facts.files,
            "moreFiles": facts.more,
            "size": facts.size,
            "covers": covers_text(facts),
            "effects": {op: text for op in asked if (text := effect_text(facts, op, shown))},
        }

    @property
    def deadline(self) -> float:
        """``time.time()`` at which an unanswered request is denied."""
        return self.created_at + self.timeout

    def timed_out(self, now: float | None = None) -> bool:
        """Whether the request ending unanswered at *now* (default: now) is its timeout, not a withdrawal.

        The broker stops waiting at about the deadline, timed on another
        clock, so an end within :data:`TIMEOUT_SLACK` seconds of it (a tenth
        of the timeout for a short one) counts as the timeout; an earlier
        end is a withdrawal (the call ended, the connection closed). The
        wire's ``cause`` and every view that says how a request ended ask here.
        """
        slack = min(TIMEOUT_SLACK, self.timeout / 10)
        return (time.time() if now is None else now) >= self.deadline - slack

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
        Operations the user approves on every approved path; a subset of those
        requested (each path still gets only what was asked for it).
    duration
        Seconds the grants last; ``None`` for as long as the connection lasts.
    path_operations
        ``((path, operations), ...)``: the operations approved on each path,
        when they differ from path to path; it then overrides *operations*
        (see :meth:`operations_for` and :meth:`per_path`).
    cause
        Why nothing (or less) was approved, when the user did not say it
        themselves: ``consent_timeout``, ``consent_withdrawn``, ``consent_failed``,
        ``no_one_to_ask``. ``None`` for the user's own answer.
    """

    approved_paths: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    duration: float | None = None
    path_operations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cause: str | None = None

    @property
    def granted(self) -> bool:
        """Whether anything at all is approved."""
        return any(self.operations_for(path) for path in self.approved_paths)

    def operations_for(self, path: str) -> tuple[str, ...]:
        """The operations approved on *path* (as the server wrote it); ``()`` when it is not approved."""
        if path not in self.approved_paths:
            return ()
        if self.path_operations:
            return dict(self.path_operations).get(path, ())
        return self.operations

    @classmethod
    def deny(cls, cause: str | None = None) -> ConsentDecision:
        """A refusal (*cause*: why, when the user did not answer themselves)."""
        return cls(cause=cause)

    @classmethod
    def approve_all(cls, request: ConsentRequest, *, duration: float | None = None) -> ConsentDecision:
        """Everything approvable in *request*, each path for all operations asked for it."""
        if request.per_path:
            return cls.per_path(
                {item.path: request.operations_of(item) for item in request.items if item.approvable},
                duration=duration,
            )
        return cls(request.approvable_paths, request.operations, duration)

    @classmethod
    def per_path(
        cls, approved: dict[str, tuple[str, ...]] | dict[str, list[str]], *, duration: float | None = None
    ) -> ConsentDecision:
        """A decision with its own operations for each path (``{path: operations}``).

        Paths with no operations are left out.
        """
        kept = {path: tuple(ops) for path, ops in approved.items() if ops}
        union = tuple(op for op in OPERATIONS if any(op in ops for ops in kept.values()))
        return cls(tuple(kept), union, duration, tuple(kept.items()))


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
        future.set_result(ConsentDecision.deny(NO_ONE_TO_ASK))
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


#: The cause of a refusal where no one can be asked (a CLI without a terminal).
NO_ONE_TO_ASK = "no_one_to_ask"


#: Why each withdrawn request's future was cancelled: the first reason given wins.
_WITHDRAWN: weakref.WeakKeyDictionary[Future[Any], str] = weakref.WeakKeyDictionary()
_WITHDRAWN_LOCK = threading.Lock()


def withdraw(future: Future[Any], why: str) -> None:
    """Cancel a consent request's *future*, noting *why* for the views that say how it ended.

    *why* completes "Withdrawn: …" (``"the call was interrupted"``). A future
    already done keeps its outcome, and a reason given first is kept.
    """
    note_withdrawal(future, why)
    future.cancel()


def note_withdrawal(future: Future[Any], why: str) -> None:
    """Note *why* a consent request's *future* is about to be withdrawn, without cancelling it yet.

    For a withdrawal that something else carries out (a cancelled call cancels the
    requests it made on its way down). A reason given first is kept.
    """
    if future.done():
        return
    with _WITHDRAWN_LOCK:
        _WITHDRAWN.setdefault(future, why)


def withdrawal_reason(future: Future[Any]) -> str | None:
    """Why :func:`withdraw` cancelled *future*; ``None`` if it said nothing (or was not withdrawn)."""
    with _WITHDRAWN_LOCK:
        return _WITHDRAWN.get(future)
