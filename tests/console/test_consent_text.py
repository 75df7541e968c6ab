"""The text conversation of a consent request: one question, one set of answers, for stdin and terminals."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

from jupyter_fsbroker.console.consent_text import outcome_text, parse_answer, question_text
from jupyter_fsbroker.core.consent import ConsentDecision, ConsentItem, ConsentRequest
from jupyter_fsbroker.core.consent_facts import PathFacts
from tests.support.terminal import ask_at_the_terminal
from tests.support.views import WAIT, make_request

APPROVABLE = ("data/sales", "ref/tables")
ALL = ConsentDecision(APPROVABLE, ("read", "write"))
READ = ConsentDecision(APPROVABLE, ("read",))
DENY = ConsentDecision.deny()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("y", ALL),
        ("yes", ALL),
        ("Y\n", ALL),
        ("  YES  \n", ALL),
        ("r", READ),
        ("read", READ),
        ("R\n", READ),
        (" Read ", READ),
        ("n", DENY),
        ("no", DENY),
        ("N\n", DENY),
        ("", DENY),
        ("\n", DENY),
        ("maybe", DENY),
        ("yes please", DENY),  # only a clear yes approves
        ("ja", DENY),
    ],
)
def test_answers(answer: str, expected: ConsentDecision) -> None:
    assert parse_answer(make_request(), answer) == expected


def test_read_only_answer_refuses_when_reading_was_not_requested() -> None:
    request = make_request(operations=("write", "delete"))
    assert parse_answer(request, "r") == DENY
    # Delete is destructive: yes leaves it out (write is grantable in the writable root only); all grants it.
    yes = parse_answer(request, "y")
    assert (yes.approved_paths, yes.operations_for("data/sales")) == (("data/sales",), ("write",))
    assert parse_answer(request, "a") == ConsentDecision(APPROVABLE, ("write", "delete"))
    assert parse_answer(request, "all") == ConsentDecision(APPROVABLE, ("write", "delete"))


def test_question_names_every_path_and_the_answers() -> None:
    request = make_request(timeout=60, created_at=1000.0)
    text = question_text(request, now=1015.0)
    lines = text.splitlines()
    assert lines[0] == "analysis asks for access to your files: Profile the sales data"
    assert "  + data/sales" in lines
    assert "  + ref/tables  (read-only folder: write will not be granted here)" in lines
    assert (
        "  - /home/ana/config.json  (cannot be approved: outside the shared folders [outside_roots])" in lines
    )
    assert any(line.startswith("  - data/.env  (cannot be approved: a sensitive name") for line in lines)
    assert "  operations: read, write" in lines
    assert text.endswith("Approve? [y]es / [r]ead only / [N]o (denied in 45 s): ")


def test_question_offers_read_only_only_when_it_means_something() -> None:
    assert "[r]ead only" not in question_text(make_request(operations=("read",)))
    assert "[r]ead only" not in question_text(make_request(operations=("write",)))


def test_question_shows_the_servers_spelling_when_it_differs_and_escapes_it() -> None:
    request = make_request(message="hi\x1b[2J\u202eyes")
    text = question_text(request)
    assert "hi\\x1b[2J\\u202eyes" in text and "\x1b" not in text and "\u202e" not in text


def _done(value: ConsentDecision | None = None, *, cancel: bool = False) -> Future[ConsentDecision]:
    future: Future[ConsentDecision] = Future()
    if cancel:
        future.cancel()
    elif value is not None:
        future.set_result(value)
    return future


def test_outcomes() -> None:
    request = make_request()
    assert outcome_text(request, _done(READ)) == "(approved read on data/sales, ref/tables)"
    assert outcome_text(request, _done(DENY)) == "(denied)"
    assert outcome_text(request, _done(cancel=True)) == "(the request was withdrawn)"
    late = make_request(timeout=1, created_at=time.time() - 5)
    assert outcome_text(late, _done(cancel=True)) == "(no answer in time: denied)"
    failed: Future[ConsentDecision] = Future()
    failed.set_exception(RuntimeError("boom"))
    assert outcome_text(request, failed) == "(the request failed: denied)"


@pytest.mark.parametrize(("answer", "expected"), [(b"yes\n", ALL), (b"READ\n", READ), (b" no \n", DENY)])
def test_the_terminal_accepts_the_same_answers(answer: bytes, expected: ConsentDecision) -> None:
    decision, shown = ask_at_the_terminal(make_request(timeout=WAIT, created_at=time.time()), answer, WAIT)
    assert decision == expected
    assert "analysis asks for access to your files: Profile the sales data" in shown


def test_destructive_operations_are_named_and_yes_leaves_them_out() -> None:
    root = PathFacts("folder", True, "data", "/srv/share/data", files=20_000, more=False)
    request = ConsentRequest(
        server="analysis",
        connection_id="c0",
        message="",
        items=(ConsentItem("data", "data", True, facts=root),),
        operations=("read", "delete"),
        timeout=60,
        created_at=1000.0,
    )
    text = question_text(request, now=1000.0)
    assert (
        "  + data  (the whole shared folder: 20,000 files, subfolders included; "
        "delete: can delete 20,000 files — destructive, starts unticked)"
    ) in text.splitlines()
    assert text.endswith(
        "Approve? [y]es, without delete / [a]ll, including delete / [r]ead only / [N]o (denied in 60 s): "
    )
    assert parse_answer(request, "y") == ConsentDecision(("data",), ("read",), None, (("data", ("read",)),))
    assert parse_answer(request, "a") == ConsentDecision(("data",), ("read", "delete"))
    assert parse_answer(request, "") == DENY
