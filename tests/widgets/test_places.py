"""Where prompts show outside the dashboard: the connection card, a call's panel, and the shelf's limit."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import ipywidgets

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision
from jupyter_fsbroker.kernel.views import NotebookViews
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


def test_the_card_says_which_era_of_mcp_the_connection_speaks() -> None:
    modern = FakeConnection(protocol_version="2026-07-28", era="modern")
    assert card_text(modern) == (
        "Connected <b>analysis</b> — server Analysis Server, stdio, "
        "MCP 2026-07-28, 2026-07-28 era (files in batches), 1 tool"
    )
    legacy = FakeConnection(era="legacy")
    assert card_text(legacy) == (
        "Connected <b>analysis</b> — server Analysis Server, stdio, MCP 2025-06-18, handshake era, 1 tool"
    )


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


@dataclass(eq=False)
class _NoticeWhileTheCardIsBuilt(FakeConnection):
    """A connection whose notice appears just after the card being built has read its state, and
    whose change is shown (on the views' thread) before the card follows the connection."""

    id: str = "c1"
    views: Any = None
    _notice: RootsNotice | None = None
    _read: bool = False

    @property  # type: ignore[override]
    def roots_notice(self) -> RootsNotice | None:
        notice = self._notice
        if not self._read and self.views is not None:
            self._read = True
            self._notice = RootsNotice("fs", ("data",), "it seems to open files itself", "Connect with X.")
            self.views.connection_changed(self)
            self.views.thread.settle()
        return notice

    @roots_notice.setter
    def roots_notice(self, notice: RootsNotice | None) -> None:
        self._notice = notice


def test_a_card_shows_the_notice_that_came_before_it_followed_its_connection(broker: Broker) -> None:
    views = NotebookViews(broker, tuple, widgets=True, closed=lambda: False)
    conn = _NoticeWhileTheCardIsBuilt()
    conn.views = views
    try:
        views.show_card(conn)  # type: ignore[arg-type]
        views.thread.settle()
        card = views._cards[conn.id][0]
        assert "fsbroker-roots-notice" in card.line.value, card.line.value
    finally:
        views.close()


def test_card_updates_its_line_and_holds_prompts_it_does_not_own() -> None:
    conn = FakeConnection()
    card = ConnectionCard(conn)
    assert "fsbroker-connection" in card._dom_classes
    line, prompts, style = card.children  # the style sheet, hidden, greys the card after a restart
    assert (line, prompts) == (card.line, card.prompts)
    assert style.layout.display == "none" and "jupyter-widgets-disconnected" in style.value
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
