"""A consent request as a text conversation: the question, the answers it accepts, and what came of it.

Both text prompts use this module: the terminal's (:class:`~.prompt.TerminalConsenter`)
and the stdin prompt a blocked notebook cell shows where widget clicks cannot
arrive (:mod:`jupyter_fsbroker.kernel.prompting`). So they ask the same question
and accept the same answers:

=====================  ==========================================================
answer                 decision
=====================  ==========================================================
``y``, ``yes``         every approvable path, for every operation asked for it
                       except the destructive ones (delete; write over an
                       existing file): what the cell's prompt starts ticked
``a``, ``all``         everything approvable, destructive operations included
                       (offered only when some are asked)
``r``, ``read``        every approvable path asked for reading, for reading
                       only (when reading was requested; otherwise a refusal)
``n``, ``no``, empty   a refusal (so is anything else: only a clear yes approves)
=====================  ==========================================================

Answers are case-insensitive and may carry surrounding spaces. Everything a
server chose (its name, message and paths) is shown through
:func:`~.format.printable`, so it cannot drive a terminal. This module decides
nothing beyond reading the user's words: the broker still drops whatever was not
approvable or not requested. It never imports ``ipywidgets``.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Literal

from ..core.consent import ConsentDecision, ConsentItem, ConsentRequest, withdrawal_reason
from ..core.consent_facts import covers_text, effect_text
from .format import printable, reason_text

__all__ = [
    "ALL_ANSWERS",
    "APPROVE_ANSWERS",
    "DENY_ANSWERS",
    "READ_ANSWERS",
    "TIMED_OUT",
    "WITHDRAWN",
    "Ending",
    "ending",
    "item_facts_text",
    "item_label",
    "outcome_text",
    "parse_answer",
    "question_text",
    "withdrawn_text",
]

#: Answers that approve everything approvable but destructive operations.
APPROVE_ANSWERS = frozenset({"y", "yes"})
#: Answers that approve everything approvable, destructive operations included.
ALL_ANSWERS = frozenset({"a", "all"})
#: Answers that approve reading only.
READ_ANSWERS = frozenset({"r", "read"})
#: The answers the question names for a refusal (anything not in the two sets above refuses too).
DENY_ANSWERS = frozenset({"n", "no", ""})

#: A prompt's outcome when no one answered in time (the cell's prompt and the panel say the same).
TIMED_OUT = "Timed out — denied"
#: A prompt's outcome when the request was withdrawn before an answer, for no reason given.
WITHDRAWN = "Withdrawn before an answer"


def withdrawn_text(future: Future[ConsentDecision]) -> str:
    """A withdrawn request's outcome: what happened (``Withdrawn: the call was interrupted``)."""
    why = withdrawal_reason(future)
    return f"Withdrawn: {why}" if why else WITHDRAWN


#: How a consent request whose future is done ended (:func:`ending`).
Ending = Literal["answered", "timeout", "withdrawn", "failed"]


def ending(request: ConsentRequest, future: Future[ConsentDecision]) -> Ending:
    """How a request whose *future* is done ended; every view that says so (the prompts, the panel) asks here.

    A cancelled future is the timeout or a withdrawal, as
    :meth:`~jupyter_fsbroker.core.consent.ConsentRequest.timed_out` tells (the
    wire's ``cause`` says the same). A future that ended with an exception
    failed: the request counts as denied. Otherwise ``future.result()`` is the answer.
    """
    if future.cancelled():
        return "timeout" if request.timed_out() else "withdrawn"
    return "failed" if future.exception() is not None else "answered"


def item_label(item: ConsentItem) -> str:
    """How a requested path is named to the user: root-relative, with the server's spelling if it differs."""
    shown = printable(item.rel or item.path)
    return shown if shown == printable(item.path) else f"{shown}  ({printable(item.path)})"


def item_facts_text(item: ConsentItem, operations: tuple[str, ...]) -> str:
    """What granting *item* means, in one line: what it covers, what each operation does, what is destructive.

    ``the whole shared folder: 1,204 files, subfolders included; delete: can delete 1,204 files —
    destructive, starts unticked``. Empty when there is nothing to say. Used by the
    text prompt and the cell's prompt alike (the panel's dialog gets the same
    parts through the request's JSON).
    """
    parts = [covers_text(item.facts)]
    if item.read_only:
        dropped = [op for op in operations if op in ("write", "delete")]
        parts.append(
            f"read-only folder: {' and '.join(dropped)} will not be granted here"
            if dropped
            else "read-only folder"
        )
    destructive = item.destructive(item.grantable(operations))
    shown = item.rel or item.path
    for op in item.grantable(operations):
        effect = effect_text(item.facts, op, shown)
        mark = " — destructive, starts unticked" if op in destructive else ""
        if effect or mark:
            parts.append(f"{op}: {effect or 'destroys data'}{mark}")
    return printable("; ".join(part for part in parts if part))


def _offers_read_only(request: ConsentRequest) -> bool:
    return "read" in request.operations and len(request.operations) > 1


def _ticked(request: ConsentRequest) -> dict[str, tuple[str, ...]]:
    """``{path: operations}`` a prompt starts ticked: all that is grantable but destructive."""
    return {i.path: i.ticked(request.operations_of(i)) for i in request.items if i.approvable}


def _destructive(request: ConsentRequest) -> tuple[str, ...]:
    """The destructive operations asked on any approvable path (canonical order)."""
    found = {
        op
        for i in request.items
        if i.approvable
        for op in i.destructive(i.grantable(request.operations_of(i)))
    }
    return tuple(op for op in request.operations if op in found)


def question_text(request: ConsentRequest, *, now: float | None = None) -> str:
    """The request as a text prompt, ending with the question and no line break.

    Parameters
    ----------
    request
        What the server asks for, as the broker prepared it.
    now
        The current time, for the seconds left; default :func:`time.time`.

    Returns
    -------
    str
        Several lines: who asks and why, one line per path (``+`` approvable,
        ``-`` not, with what it covers and what each operation does, or the
        reason in words and its code), the operations, and
        ``Approve? [y]es / [r]ead only / [N]o (denied in 118 s): ``; with
        destructive operations asked, ``[y]es`` names what it leaves out and
        ``[a]ll`` is offered.
    """
    message = printable(request.message) if request.message else "(no message)"
    lines = [f"{printable(request.server)} asks for access to your files: {message}"]
    if request.who:
        lines.append(f"  ({printable(request.who)})")
    per_path = request.per_path
    for item in request.items:
        if item.approvable:
            asked = request.operations_of(item)
            facts = item_facts_text(item, asked)
            note = f"  ({facts})" if facts else ""
            ops = f": {', '.join(asked)}" if per_path else ""
            lines.append(f"  + {item_label(item)}{ops}{note}")
        else:
            reason = f"{reason_text(item.reason)} [{item.reason or 'not_allowed'}]"
            lines.append(f"  - {item_label(item)}  (cannot be approved: {reason})")
    if not per_path:
        lines.append(f"  operations: {', '.join(request.operations)}")
    left = max(0, round(request.deadline - (time.time() if now is None else now)))
    read = " / [r]ead only" if _offers_read_only(request) else ""
    risky = _destructive(request)
    if risky:
        named = " and ".join(risky)
        ticked = any(_ticked(request).values())
        yes = f"[y]es, without {named} / " if ticked else ""
        lines.append(f"Approve? {yes}[a]ll, including {named}{read} / [N]o (denied in {left} s): ")
    else:
        lines.append(f"Approve? [y]es{read} / [N]o (denied in {left} s): ")
    return "\n".join(lines)


def parse_answer(request: ConsentRequest, answer: str) -> ConsentDecision:
    """The decision a typed *answer* stands for (see the table in the module docstring).

    Parameters
    ----------
    request
        The request answered.
    answer
        The line the user typed, with or without its line break.

    Returns
    -------
    ConsentDecision
        All approvable paths for all requested operations (without the
        destructive ones for ``yes``), the same paths for reading only, or a refusal.
    """
    word = answer.strip().lower()
    if word in ALL_ANSWERS and _destructive(request):
        return ConsentDecision.approve_all(request)
    if word in APPROVE_ANSWERS:
        if not _destructive(request):
            return ConsentDecision.approve_all(request)
        ticked = _ticked(request)
        if request.per_path or any(set(ops) != set(request.operations) for ops in ticked.values()):
            return ConsentDecision.per_path(ticked)
        return ConsentDecision(tuple(ticked), request.operations)
    if word in READ_ANSWERS and "read" in request.operations:
        if request.per_path:
            reading = [i.path for i in request.items if i.approvable and "read" in request.operations_of(i)]
            return ConsentDecision(tuple(reading), ("read",))
        return ConsentDecision(request.approvable_paths, ("read",))
    return ConsentDecision.deny()


_ENDED: dict[Ending, str] = {
    "timeout": "(no answer in time: denied)",
    "withdrawn": "(the request was withdrawn)",
    "failed": "(the request failed: denied)",
}


def outcome_text(request: ConsentRequest, future: Future[ConsentDecision]) -> str:
    """What became of a request whose *future* is done, in one line for a text prompt.

    Returns
    -------
    str
        ``(approved read on data/sales)``, ``(denied)``, ``(no answer in time: denied)``,
        ``(the request was withdrawn)`` or ``(the request failed: denied)``.
    """
    how = ending(request, future)
    if how == "withdrawn" and withdrawal_reason(future):
        return f"(withdrawn: {withdrawal_reason(future)})"
    if how != "answered":
        return _ENDED[how]
    decision = future.result()
    if not decision.granted:
        return "(denied)"
    if decision.path_operations:
        parts = "; ".join(f"{', '.join(ops)} on {path}" for path, ops in decision.path_operations)
        return printable(f"(approved {parts})")
    return printable(f"(approved {', '.join(decision.operations)} on {', '.join(decision.approved_paths)})")
