"""Consent: how a server's ``files/consent`` request reaches the user and back.

The broker builds a :class:`ConsentRequest` (which server asks, its message,
each requested path and whether it can be approved at all) and hands it to a
:class:`Consenter`. A consenter only *returns a future*: the notebook's widget,
the terminal prompt or a test resolves it with a :class:`ConsentDecision` when
the user answers. The broker waits for it with a timeout and denies when the
time is up, so no consenter can hang a request, and nothing ever blocks inside
a click handler.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "CallbackConsenter",
    "ConsentDecision",
    "ConsentItem",
    "ConsentRequest",
    "Consenter",
    "DenyingConsenter",
]


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
