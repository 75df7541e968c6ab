"""Text views: the dashboard as text, the helpers the widgets share, and the terminal prompt's words."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from jupyter_fsbroker.console import status
from jupyter_fsbroker.console.format import format_age, format_bytes, printable, reason_text
from jupyter_fsbroker.console.status import decision_text, status_text
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision
from jupyter_fsbroker.core.errors import FilesError, PermissionDenied
from tests.support.terminal import ask_at_the_terminal
from tests.support.views import WAIT, FakeView, make_request


def test_status_text(broker: Broker) -> None:
    empty = status_text(broker)
    assert "2 shared folders, 0 connections, 0 grants, 0 locks" in empty
    assert "Connections:\n  (none)" in empty and "Grants:\n  (none)" in empty

    pre = broker.allow("data/sales", ops=("read",))
    conn = broker.connect(
        "analysis", consenter=CallbackConsenter(lambda r: ConsentDecision(r.approvable_paths, ("read",), 900))
    )
    conn.handle("files/consent", {"requestedPaths": ["data/x.csv"], "operations": ["read"]})
    lock_id = conn.handle("files/read", {"path": "data/x.csv", "keepLocked": True})["lockId"]
    view = FakeView("analysis", conn, transport="http")
    out = status_text(broker, lambda: [view])
    assert out.splitlines()[0].startswith(
        "jupyter_fsbroker: 2 shared folders, 1 connection, 2 grants, 1 lock;"
    )
    assert "8 B read, 0 B written" in out.splitlines()[0]
    assert "  data  " in out and "(read-write)" in out and "(read-only)" in out
    assert "  analysis  server Analysis Server  http  protocol 2025-06-18  connected" in out
    assert f"  all servers  data/sales  read  until revoked  [{pre.id}]" in out
    assert (
        "  analysis  data/x.csv  read  14 min left" in out
        or "  analysis  data/x.csv  read  15 min left" in out
    )
    assert re.search(rf"  data/x\.csv  held by analysis  for \d+ s  \[{lock_id}\]", out)
    assert "  analysis  read 8 B  written 0 B  (2 allowed, 0 denied)" in out
    assert "files/read  data/x.csv  allowed  8 B" in out
    assert "files/consent" in out
    assert status_text(broker, [view]).count("analysis") >= 3  # a plain sequence works too


def test_status_text_says_what_the_other_views_say(broker: Broker) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(lambda r: ConsentDecision.deny()))
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/x.csv"})
    conn.handle("files/consent", {"requestedPaths": ["data/x.csv"], "operations": ["read"]})
    activity = status_text(broker).split("Recent activity (newest first):\n")[1].splitlines()
    consent, refusal = activity
    assert re.fullmatch(
        r"  ([01]\d|2[0-3]):[0-5]\d:[0-5]\d  analysis  files/consent  data/x\.csv  refused "
        r"\(consent_refused: the user denied it\)",
        consent,
    )
    assert refusal.endswith("files/read  data/x.csv  asked for consent (PERMISSION_DENIED: not_granted)")


def test_status_text_of_a_closed_broker(broker: Broker) -> None:
    broker.close()
    assert "(broker closed)" in status_text(broker)


def test_helpers() -> None:
    assert reason_text("outside_roots") == "outside the shared folders"
    assert reason_text("some_new_reason") == "some new reason"
    assert reason_text(None) == "not allowed"
    assert format_bytes(0) == "0 B" and format_bytes(999) == "999 B"
    assert format_bytes(1500) == "1.5 kB" and format_bytes(3 * 1024 * 1024) == "3.1 MB"
    assert format_age(5) == "5 s" and format_age(900) == "15 min" and format_age(3600) == "1 h"
    assert format_age(3900) == "1 h 5 min" and format_age(3 * 86400) == "3 d"
    request = make_request()
    assert decision_text(request, ConsentDecision.deny()) == "Denied"
    assert (
        decision_text(request, ConsentDecision(("data/sales", "data/.env"), ("read", "delete"), 900))
        == "Approved read on data/sales for 15 min"
    )


def test_terminal_prompt_names_reasons_in_words() -> None:
    decision, out = ask_at_the_terminal(make_request(timeout=WAIT, created_at=time.time()), b"r\n", WAIT)
    assert decision == ConsentDecision(("data/sales", "ref/tables"), ("read",))
    assert "outside the shared folders [outside_roots]" in out
    assert "read-only folder: write will not be granted here" in out


def test_text_views_load_no_widgets() -> None:
    code = (
        "import sys, jupyter_fsbroker.console, jupyter_fsbroker.widgets\n"
        "print('ipywidgets' in sys.modules)\n"
        "from jupyter_fsbroker.widgets import Dashboard\n"
        "print('ipywidgets' in sys.modules, Dashboard.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "jupyter_fsbroker.widgets.dashboard"]
    assert status.ConnectionView.__name__ == "ConnectionView"


def test_server_chosen_strings_cannot_drive_the_terminal(broker: Broker) -> None:
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("data/\u202ecod.exe") == "data/\\u202ecod.exe"
    assert printable("two\nlines\tand tab") == "two lines and tab"
    assert printable("données/中.csv") == "données/中.csv"
    conn = broker.connect("analysis")
    for path in ("data/\x1b[31mred", "data/\u202eevil"):
        with pytest.raises(FilesError):  # refused; only its audit record matters here
            conn.handle("files/read", {"path": path})
    out = status_text(broker)
    assert "\x1b" not in out and "\u202e" not in out
    assert "data/\\x1b[31mred" in out


def test_terminal_prompt_escapes_the_message() -> None:
    decision, shown = ask_at_the_terminal(
        make_request(timeout=WAIT, message="hi\x1b[2J\u202eyes"), b"n\n", WAIT
    )
    assert decision == ConsentDecision.deny()
    assert "hi\\x1b[2J\\u202eyes" in shown and "\x1b" not in shown
