"""What the views show a data scientist: per-path consent, finished prompts, the dashboard's sections,
the consent flow in the activity log, stale and lost views, and the state snapshot for other views."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]
import pytest

from jupyter_fsbroker.console.consent_text import outcome_text, parse_answer, question_text
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentItem, ConsentRequest
from jupyter_fsbroker.core.errors import PermissionDenied
from jupyter_fsbroker.kernel.snapshot import SNAPSHOT_VERSION, state_snapshot
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.dashboard import Dashboard
from jupyter_fsbroker.widgets.markup import activity_html
from jupyter_fsbroker.widgets.places import ConnectionCard
from jupyter_fsbroker.widgets.style import ACCEPT, REJECT, RESTARTED_LINES, WARN, style_html

from .conftest import WAIT, FakeConnection, FakeView, make_request


def report_request() -> ConsentRequest:
    """Read the data, write the report: a request in the per-path form."""
    return ConsentRequest(
        server="analysis",
        connection_id="c0",
        message="Profile sales and write the report",
        items=(
            ConsentItem("data/sales.csv", "data/sales.csv", True, operations=("read",)),
            ConsentItem("data/sales.report.md", "data/sales.report.md", True, operations=("write",)),
        ),
        operations=("read", "write"),
        timeout=120.0,
    )


def test_each_path_shows_the_operations_asked_for_it_as_checkboxes() -> None:
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(report_request(), future)
    assert [list(ops) for ops in prompt.path_ops] == [["read"], ["write"]]
    for ops in prompt.path_ops:
        for op, box in ops.items():
            assert type(box).__name__ == "Checkbox" and box.value is True  # an unmistakable on/off
            assert {"fsbroker-consent-op", f"fsbroker-op-{op}"} <= set(box._dom_classes)
    assert all(type(t).__name__ == "Checkbox" for t in prompt.op_toggles.values())
    assert ACCEPT in prompt.approve_button._dom_classes and REJECT in prompt.deny_button._dom_classes
    prompt.approve_button.click()
    decision = future.result(0)
    assert decision.operations_for("data/sales.csv") == ("read",)
    assert decision.operations_for("data/sales.report.md") == ("write",)
    assert prompt.outcome_text == (
        "Approved read on data/sales.csv; write on data/sales.report.md for this connection"
    )
    prompt.close()


def test_write_can_be_refused_on_one_path_only() -> None:
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future)  # read, write on data/sales and read-only ref/tables
    sales, ref = prompt.path_ops[0], prompt.path_ops[3]
    assert ref["write"].disabled and ref["write"].value is False  # a read-only folder: never write
    sales["write"].value = False
    assert prompt.op_toggles["write"].value is False  # the "all paths" box follows
    ref["read"].value = False
    assert prompt.op_toggles["read"].value is True
    prompt.checkboxes[3].value = True
    prompt.path_ops[3]["read"].value = True
    sales["write"].value = True
    prompt.path_ops[0]["read"].value = False
    prompt.approve_button.click()
    decision = future.result(0)
    assert decision.path_operations == (("data/sales", ("write",)), ("ref/tables", ("read",)))
    prompt.close()


def test_a_finished_prompt_shrinks_to_its_outcome() -> None:
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future)
    assert prompt.header.layout.display != "none"
    prompt.deny_button.click()
    assert "fsbroker-finished" in prompt._dom_classes
    shown = [child for child in prompt.children if child.layout.display != "none"]
    assert prompt.outcome in shown and len([c for c in shown if c is not prompt._style]) == 1
    assert "analysis" in prompt.outcome.value and prompt.outcome_text == "Denied"
    prompt.close()


def test_text_prompts_ask_per_path_too() -> None:
    request = report_request()
    text = question_text(request)
    assert "data/sales.csv: read" in text and "data/sales.report.md: write" in text
    assert parse_answer(request, "y").operations_for("data/sales.report.md") == ("write",)
    assert parse_answer(request, "r") == ConsentDecision(("data/sales.csv",), ("read",))
    future: Future[ConsentDecision] = Future()
    future.set_result(ConsentDecision.approve_all(request))
    assert outcome_text(request, future) == "(approved read on data/sales.csv; write on data/sales.report.md)"


def test_the_dashboard_is_compact_empty_sections_closed(broker: Broker) -> None:
    dash = Dashboard(broker, lambda: [])
    sections = dash._sections
    assert sections["folders"].open  # two shared folders: open
    for key in ("connections", "grants", "locks", "changes"):
        assert not sections[key].open, key
    assert sections["folders"].label == "Shared folders (2)"
    grant = broker.allow("data/x.csv", ops=("read",))
    assert dash.flush(WAIT)
    assert sections["grants"].open and sections["grants"].label == "Grants (1)"
    assert all(REJECT in b._dom_classes for b in dash.revoke_buttons().values())
    broker.grants.revoke(grant.id)
    assert dash.flush(WAIT)
    assert not sections["grants"].open
    assert "--jp-" in style_html() and "fsbroker-mod-warn" in style_html()
    dash.close()


def test_the_sections_are_headed_as_the_sidebar_heads_them(broker: Broker) -> None:
    dash = Dashboard(broker, lambda: [])
    grants = dash._sections["grants"]
    # A header button and a body, not ipywidgets' accordion.
    assert not any(isinstance(child, widgets.Accordion) for child in dash.children)
    assert "fsbroker-section-title" in grants.header._dom_classes and grants.header.icon == "caret-right"
    assert "text-transform: uppercase" in style_html()
    grants.header.click()  # the user opens an empty section
    assert grants.open and grants.header.icon == "caret-down"
    broker.allow("data/x.csv", ops=("read",))
    assert dash.flush(WAIT)
    assert grants.open and grants.label == "Grants (1)"
    grants.header.click()  # and closes it: a refresh leaves it closed
    broker.allow("data/sales", ops=("read",))
    assert dash.flush(WAIT)
    assert not grants.open and grants.label == "Grants (2)"
    dash.close()


def test_disconnect_wears_the_warn_colour(broker: Broker) -> None:
    conn = broker.connect("analysis")
    dash = Dashboard(broker, lambda: [FakeView("analysis", conn)])
    assert dash.flush(WAIT)
    [button] = dash.disconnect_buttons().values()
    assert WARN in button._dom_classes and button.button_style == ""
    dash.close()


def test_the_consent_flow_reads_as_such_in_the_activity_log(broker: Broker) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(ConsentDecision.approve_all))
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/x.csv"})
    pending = activity_html(broker.audit.records())
    assert "not granted yet" in pending and "fsbroker-tone-red" not in pending
    conn.handle("files/consent", {"requestedPaths": ["data/x.csv"], "operations": ["read"]})
    conn.handle("files/read", {"path": "data/x.csv"})
    html = activity_html(broker.audit.records())
    assert "asked for consent" in html and "fsbroker-tone-red" not in html
    record = broker.audit.records()[0]
    assert (record.decision, record.reason) == ("deny", "not_granted")  # the record stays truthful
    # A refusal with a known cause is a real deny.
    conn.revoke()
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/x.csv"})
    assert "fsbroker-tone-red" in activity_html(broker.audit.records())
    assert "the user revoked it" in activity_html(broker.audit.records())


def test_an_earlier_denial_does_not_turn_the_next_flow_red(broker: Broker) -> None:
    conn = broker.connect("analysis", consenter=CallbackConsenter(lambda request: ConsentDecision.deny()))
    asks = {"requestedPaths": ["data/x.csv"], "operations": ["read"]}
    for _ in range(2):  # the server asks, the user denies; the next call starts the same way
        with pytest.raises(PermissionDenied):
            conn.handle("files/read", {"path": "data/x.csv"})
        conn.handle("files/consent", asks)
    rows = activity_html(broker.audit.records()).split("<tr>")[2:]  # newest first, after the header
    assert ["fsbroker-tone-red" in row for row in rows] == [True, False, True, False]
    assert all("asked for consent" in row for row in rows[1::2])
    assert all(">refused<" in row and "the user denied it" in row for row in rows[::2])


def test_a_waiting_request_shows_in_the_summary_line(broker: Broker) -> None:
    request = make_request()
    dash = Dashboard(broker, lambda: [], pending=lambda: [request])
    assert "1 consent request waiting" in dash.header.value
    assert "analysis waits for your consent" in dash.header.value
    dash.close()


def test_a_retired_dashboard_stays_but_says_it_is_stale(broker: Broker) -> None:
    broker.allow("data/x.csv", ops=("read",))
    dash = Dashboard(broker, lambda: [])
    dash.retire("the broker was closed")
    assert dash.retired and "Stale" in dash.header.value and "fsbroker-stale" in dash._dom_classes
    assert all(button.disabled for button in dash.revoke_buttons().values())
    broker.allow("data/sales", ops=("read",))
    assert dash.flush(WAIT)
    assert len(dash.revoke_buttons()) == 1  # it no longer follows the broker
    dash.close()
    assert dash.comm is None


def test_the_snapshot_is_json_for_another_view(broker: Broker, data: Path) -> None:
    broker.allow("data/x.csv", ops=("read",))
    conn = broker.connect("analysis")
    conn.handle("files/read", {"path": "data/x.csv", "keepLocked": True})
    request = make_request()
    snap = state_snapshot(broker, [FakeView("analysis", conn)], pending=[request])
    assert json.loads(json.dumps(snap)) == snap
    assert snap["version"] == SNAPSHOT_VERSION
    assert [r["name"] for r in snap["roots"]] == ["data", "ref"]
    assert snap["connections"][0]["name"] == "analysis"
    assert snap["grants"][0]["path"] == "data/x.csv" and snap["grants"][0]["holder"] == "all servers"
    assert snap["locks"][0]["path"] == "data/x.csv" and snap["locks"][0]["heldBy"] == "analysis"
    [waiting] = snap["pending"]
    assert waiting["id"] == request.id and waiting["items"][0]["operations"] == ["read", "write"]
    assert waiting["items"][3]["grantable"] == ["read"]  # ref/tables is read-only
    assert snap["activity"][-1]["method"] == "files/read"


def test_each_view_carries_the_rules_that_grey_it_once_its_kernel_restarted(broker: Broker) -> None:
    # After a restart the kernel sends nothing: the page greys the views with the style sheet
    # they brought with them, so each must carry it (a card may be alone on the page).
    dash = Dashboard(broker)
    prompt = ConsentPrompt(make_request(), Future())
    card = ConnectionCard(FakeConnection())
    try:
        for view, cls in (
            (dash, "fsbroker-dashboard"),
            (prompt, "fsbroker-consent"),
            (card, "fsbroker-connection"),
        ):
            assert cls in view._dom_classes
            sheets = [c.value for c in view.children if "<style>" in str(getattr(c, "value", ""))]
            assert sheets == [style_html()], cls
            line = json.dumps(RESTARTED_LINES[cls])
            assert f".{cls}.jupyter-widgets-disconnected" in sheets[0] and line in sheets[0], cls
        assert all(line.startswith("The kernel restarted or stopped: ") for line in RESTARTED_LINES.values())
    finally:
        for view in (dash, prompt, card):
            view.close()
