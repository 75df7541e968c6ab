"""Where prompts show outside the dashboard: the connection card, a call's panel, and the shelf's limit."""

from __future__ import annotations

from concurrent.futures import Future

import ipywidgets

from jupyter_fsbroker.core.consent import ConsentDecision
from jupyter_fsbroker.protocol.roots_offer import RootsNotice
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.places import KEEP_DECIDED, CallPanel, ConnectionCard, PromptShelf, card_text

from .conftest import FakeConnection, make_request


def _prompt() -> ConsentPrompt:
    future: Future[ConsentDecision] = Future()
    return ConsentPrompt(make_request(), future)


def test_card_text_follows_the_connection_and_escapes_what_the_server_chose() -> None:
    conn = FakeConnection(server_name="<script>\u202e")
    assert card_text(conn) == (
        "Connected <b>analysis</b> — server &lt;script&gt;\\u202e, stdio, MCP 2025-06-18, 1 tool"
    )
    conn.close()
    assert card_text(conn) == "<i>analysis</i>: disconnected (closed by the user)"


def test_the_card_says_why_the_server_got_the_folders_names_only_in_words_it_cannot_mark_up() -> None:
    notice = RootsNotice("<b>fs</b>", ("data",), "it seems to open files itself", "Connect with X.")
    conn = FakeConnection(roots_notice=notice)
    line, below = card_text(conn).split("<br>")
    assert line == "Connected <b>analysis</b> — server Analysis Server, stdio, MCP 2025-06-18, 1 tool"
    assert below == (
        '<span class="fsbroker-roots-notice">&lt;b&gt;fs&lt;/b&gt; asked where the shared folders are '
        "(roots/list) and got only their names (data): it seems to open files itself. Connect with X.</span>"
    )
    card = ConnectionCard(conn)
    conn.roots_notice = None  # dropped: the server used files/*
    card.update()
    assert "fsbroker-roots-notice" not in card.line.value
    card.close()


def test_card_updates_its_line_and_holds_prompts_it_does_not_own() -> None:
    conn = FakeConnection()
    card = ConnectionCard(conn)
    assert "fsbroker-connection" in card._dom_classes
    assert card.children == (card.line, card.prompts)
    prompt = _prompt()
    card.add_prompt(prompt)
    assert card.prompts.children == (prompt,)
    conn.close()
    card.update()
    assert "disconnected" in card.line.value
    card.remove_prompt(prompt)
    card.remove_prompt(prompt)  # not shown: ignored
    card.add_prompt(prompt)
    card.close()
    assert card.comm is None and card.line.comm is None
    assert prompt.comm is not None and not prompt.closed  # the prompt belongs to whoever added it
    card.update()  # a closed card ignores updates
    card.add_prompt(prompt)
    prompt.close()


def test_call_panel_shows_what_the_call_adds() -> None:
    first, second = ipywidgets.HTML("a"), ipywidgets.HTML("b")
    panel = CallPanel([first])
    assert "fsbroker-call" in panel._dom_classes
    panel.add(second)
    assert panel.children == (first, second)
    panel.close()
    assert panel.comm is None and first.comm is not None and second.comm is not None


def test_shelf_keeps_the_last_decided_prompts_and_closes_older_ones() -> None:
    card = ConnectionCard(FakeConnection())
    shelf = PromptShelf(card)
    prompts = [_prompt() for _ in range(KEEP_DECIDED + 2)]
    open_one = _prompt()
    shelf.put(open_one)
    for prompt in prompts:
        prompt.future.set_result(ConsentDecision.deny())
        shelf.put(prompt)
    shown = card.prompts.children
    assert open_one in shown  # undecided prompts always stay
    assert [p for p in prompts if p in shown] == prompts[-KEEP_DECIDED:]
    assert all(p.closed for p in prompts[:2]) and not any(p.closed for p in prompts[2:])
    assert not open_one.closed
