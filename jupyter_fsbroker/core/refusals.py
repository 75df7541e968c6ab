"""Why a path is not granted: what one connection's user refused, narrowed or let time out.

When a consent ends without granting everything asked, the connection's
:class:`Refusals` notes, per path and operation, why (the user denied it,
approved less, did not answer in time, the prompt was withdrawn). The next
refusal of that path and operation then names the cause instead of a bare "not
granted" (see :meth:`~jupyter_fsbroker.core.access.Access.check`). A note
only explains: the refusal's ``reason`` stays ``not_granted``, so a server may
still ask again; a later grant of the path clears the note, and notes are
forgotten after ten minutes.

Values and a small thread-safe table only: nothing here decides whether
anything is allowed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .rootpath import RootPath

__all__ = [
    "CAUSES",
    "CONSENT_CAUSES",
    "CONSENT_DENIED",
    "CONSENT_FAILED",
    "CONSENT_NARROWED",
    "CONSENT_TIMEOUT",
    "CONSENT_WITHDRAWN",
    "Refusal",
    "Refusals",
    "cause_text",
]

#: The user answered Deny.
CONSENT_DENIED = "consent_denied"
#: The user approved less than asked (another path, or fewer operations).
CONSENT_NARROWED = "consent_narrowed"
#: Nobody answered before the consent timeout.
CONSENT_TIMEOUT = "consent_timeout"
#: The prompt was withdrawn (the connection closed, the call was cancelled).
CONSENT_WITHDRAWN = "consent_withdrawn"
#: The prompt could not be shown.
CONSENT_FAILED = "consent_failed"

#: The causes that an ended consent leaves on its paths (the rest are the grants' own fate).
CONSENT_CAUSES = frozenset(
    {CONSENT_DENIED, CONSENT_NARROWED, CONSENT_TIMEOUT, CONSENT_WITHDRAWN, CONSENT_FAILED}
)

#: Every cause, in words, for messages.
CAUSES: dict[str, str] = {
    CONSENT_DENIED: "the user denied it",
    CONSENT_NARROWED: "the user approved less than was asked",
    CONSENT_TIMEOUT: "the consent request timed out (no answer)",
    CONSENT_WITHDRAWN: "the consent request was withdrawn",
    CONSENT_FAILED: "the consent request could not be shown",
    "no_one_to_ask": "no one could be asked for consent",
    "revoked": "the user revoked it",
    "expired": "its grant expired",
    "root_removed": "its shared folder was removed",
    "connection_closed": "the connection was closed",
}

#: Refusals older than this are forgotten (seconds).
_KEEP = 600.0
#: The most refusals one connection remembers.
_MAX = 256


def cause_text(cause: str) -> str:
    """A cause (``consent_timeout``) in words (``the consent request timed out (no answer)``)."""
    return CAUSES.get(cause, cause.replace("_", " "))


@dataclass(frozen=True)
class Refusal:
    """One path and operation the user did not grant, and why."""

    location: RootPath
    operation: str
    cause: str
    at: float


class Refusals:
    """The refusals of one connection's consents. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Refusal] = []

    def remember(self, location: RootPath, operations: list[str] | tuple[str, ...], cause: str) -> None:
        """Note that *operations* on *location* were not granted, because of *cause*."""
        now = time.time()
        with self._lock:
            self._items = [
                r
                for r in self._items
                if now - r.at < _KEEP and not (r.location == location and r.operation in operations)
            ]
            self._items.extend(Refusal(location, op, cause, now) for op in operations)
            del self._items[:-_MAX]

    def forget(self, location: RootPath, operations: list[str] | tuple[str, ...]) -> None:
        """*operations* on *location* were granted: drop their refusals (and those below it)."""
        if not operations:
            return
        with self._lock:
            self._items = [
                r for r in self._items if not (r.operation in operations and location.contains(r.location))
            ]

    def find(self, location: RootPath, operation: str) -> Refusal | None:
        """The newest refusal covering *operation* on *location*, or ``None``."""
        now = time.time()
        with self._lock:
            for index in range(len(self._items) - 1, -1, -1):
                refusal = self._items[index]
                if (
                    refusal.operation == operation
                    and refusal.location.contains(location)
                    and now - refusal.at < _KEEP
                ):
                    return refusal
        return None
