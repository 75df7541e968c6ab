"""How an audit record ended, in one word and one tone: the vocabulary every view shares.

The dashboard, ``status()``, the JupyterLab panel and the notebook's
``broker.audit()`` all name an :class:`~jupyter_fsbroker.core.audit.AuditRecord`'s
outcome with one of a few words, and colour it by one rule:

* green, ``allowed``: the request was let through (a consent that granted
  something included);
* grey, ``asked for consent``: a refusal for want of a grant that the
  connection followed with a ``files/consent`` request, the normal first
  step of a consent flow, not a refusal to show in red;
* grey, ``not granted yet``: a refusal for want of a grant that no consent
  followed (yet); a server may still ask. A refusal whose grant went
  (revoked, expired, its folder removed) says so in its ``cause`` and is red;
  an earlier consent's cause never reaches a later request's record
  (:class:`~jupyter_fsbroker.core.audit.AuditRecord`), so a denied consent
  does not turn the next flow red;
* grey, ``withdrawn``: a consent request that ended before an answer (its
  call cancelled, its connection closed);
* grey, ``timed out``: a consent request no one answered in time;
* grey, ``failed``: a request the broker let through that failed on its own
  (a missing file, a bad parameter);
* red, ``refused``: everything else the broker refused — the user's denial,
  a path outside the shared folders, a sensitive one, a write in a read-only
  folder, a rate or size limit.

Whether a refusal was "asked for consent" depends on what its connection did
next, so :func:`outcomes` reads a sequence of records at once. Values and
rules only: nothing here decides whether anything is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .audit import AuditRecord
from .refusals import CONSENT_TIMEOUT, CONSENT_WITHDRAWN

__all__ = [
    "ALLOWED",
    "ASKED",
    "FAILED",
    "NOT_YET",
    "REFUSED",
    "TIMED_OUT",
    "WITHDRAWN",
    "RecordOutcome",
    "Tone",
    "outcome",
    "outcomes",
]

#: The colour of an outcome: green let through, grey nothing decided against the server, red refused.
Tone = Literal["green", "grey", "red"]


@dataclass(frozen=True)
class RecordOutcome:
    """One record's outcome: its word and its tone.

    Attributes
    ----------
    word
        ``"allowed"``, ``"asked for consent"``, ``"not granted yet"``,
        ``"withdrawn"``, ``"timed out"``, ``"failed"`` or ``"refused"``.
    tone
        ``"green"``, ``"grey"`` or ``"red"``.
    """

    word: str
    tone: Tone

    def to_json(self) -> dict[str, str]:
        """``{"word": ..., "tone": ...}``."""
        return {"word": self.word, "tone": self.tone}


#: Let through.
ALLOWED = RecordOutcome("allowed", "green")
#: The refusal that opens a consent flow.
ASKED = RecordOutcome("asked for consent", "grey")
#: A refusal for want of a grant that no consent followed.
NOT_YET = RecordOutcome("not granted yet", "grey")
#: A consent request withdrawn before an answer.
WITHDRAWN = RecordOutcome("withdrawn", "grey")
#: A consent request no one answered in time.
TIMED_OUT = RecordOutcome("timed out", "grey")
#: Let through, and failed on its own.
FAILED = RecordOutcome("failed", "grey")
#: Refused by the user or the broker's rules.
REFUSED = RecordOutcome("refused", "red")


def outcome(record: AuditRecord, *, asked: bool = False) -> RecordOutcome:
    """The outcome of one record.

    Parameters
    ----------
    record
        The record.
    asked
        Whether its connection followed it with a consent request (see
        :func:`outcomes`, which works it out).
    """
    if record.decision == "allow":
        return ALLOWED if record.error is None else FAILED
    if record.curable and record.cause is None:
        return ASKED if asked else NOT_YET
    if record.method == "files/consent":
        if record.cause == CONSENT_WITHDRAWN:
            return WITHDRAWN
        if record.cause == CONSENT_TIMEOUT:
            return TIMED_OUT
    return REFUSED


def outcomes(records: Sequence[AuditRecord]) -> tuple[RecordOutcome, ...]:
    """The outcome of each of *records* (in the order they were appended), in the same order.

    A refusal for want of a grant is ``asked for consent`` when a later record
    of the same connection is a ``files/consent`` request; otherwise ``not
    granted yet``.
    """
    asked: set[int] = set()
    waiting: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        if record.curable and record.cause is None:
            waiting.setdefault(record.connection_id, []).append(index)
        elif record.method == "files/consent":
            asked.update(waiting.pop(record.connection_id, ()))
    return tuple(outcome(record, asked=index in asked) for index, record in enumerate(records))
