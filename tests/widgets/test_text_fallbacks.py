"""What the views say where widgets do not render (GitHub, nbconvert, a console): one line each.

A widget's ``text/plain`` is its ``repr`` (ipywidgets cuts it at 110 characters;
ours are kept whole), and it is fixed when the widget is displayed.
"""

from __future__ import annotations

from concurrent.futures import Future

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.dashboard import Dashboard
from jupyter_fsbroker.widgets.markup import plain
from jupyter_fsbroker.widgets.places import CallPanel, ConnectionCard
from jupyter_fsbroker.widgets.progress import TransferProgress
from jupyter_fsbroker.widgets.running import RunningLine

from .conftest import FakeConnection, make_request


def _text(widget: object) -> str:
    bundle = widget._repr_mimebundle_()  # type: ignore[attr-defined]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    return str(bundle["text/plain"])


def test_plain_drops_tags_and_styles_and_decodes_entities() -> None:
    assert (
        plain("<style>.x { color: red }</style><b>2</b> grants &amp;\n <i>1</i> lock") == "2 grants & 1 lock"
    )


def test_the_dashboard_says_its_summary_line(broker: Broker) -> None:
    dash = Dashboard(broker)
    try:
        assert _text(dash) == repr(dash)
        assert repr(dash).startswith("<File broker — 2 shared folders · 0 connections")
        assert "<style" not in repr(dash) and "{" not in repr(dash)
    finally:
        dash.close()


def test_the_card_says_its_line() -> None:
    conn = FakeConnection()
    card = ConnectionCard(conn)
    assert _text(card) == "<Connected analysis — server Analysis Server, stdio, MCP 2025-06-18, 1 tool>"
    conn.close()
    card.update()
    assert repr(card) == "<analysis: disconnected (closed by the user)>"
    card.close()


def test_a_long_card_line_is_kept_whole() -> None:
    # ipywidgets cuts a widget's text at 110 characters, mid-word: "13 tools, not sa…".
    conn = FakeConnection(
        name="a-connection-with-a-long-name",
        server_name="jupyter-fsbroker-analysis (a server with a long name of its own)",
        transport="http",
        tools=tuple({"name": f"tool_{n}"} for n in range(13)),
    )
    card = ConnectionCard(conn)
    try:
        text = _text(card)
        assert len(text) > 110 and text == repr(card) and "…" not in text
        assert text.endswith("13 tools>")
    finally:
        card.close()


def test_a_call_panel_says_what_it_shows(broker: Broker) -> None:
    request = make_request()  # two paths to approve, two that cannot be
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(request, future)
    progress = TransferProgress(broker)
    panel = CallPanel([progress, prompt])
    try:
        assert repr(prompt) == (
            "<consent request from 'analysis': read, write on 2 paths, 2 not approvable (waiting)>"
        )
        # A saved output keeps the text of the moment it was shown: no "(waiting)" in it.
        assert _text(panel) == (
            "<file transfer progress (a live widget)>; "
            "<consent request from 'analysis': read, write on 2 paths, 2 not approvable>"
        )
        future.set_result(ConsentDecision.deny())
        assert repr(prompt).endswith("(answered)>")
        assert repr(CallPanel()) == "<an empty call panel>"
    finally:
        panel.close()
        progress.close()
        prompt.close()


def test_a_running_line_leaves_no_words_in_a_saved_output() -> None:
    # The text is fixed when the panel is displayed, while the call runs; a saved notebook shows it
    # long after the call ended, so the line says nothing there and the panel only what else it holds.
    line = RunningLine(lambda: "running: analysis · watch_changes · 1 s", lambda: None)
    prompt = ConsentPrompt(make_request(), Future())
    alone, beside = CallPanel([line]), CallPanel([line, prompt])
    try:
        assert repr(line) == "running: analysis · watch_changes · 1 s"
        assert _text(line) == "" and _text(alone) == ""
        assert _text(beside) == _text(prompt) == repr(prompt).removesuffix(" (waiting)>") + ">"
    finally:
        for widget in (beside, alone, prompt, line):
            widget.close()
