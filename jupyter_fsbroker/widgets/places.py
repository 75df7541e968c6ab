"""Where consent prompts show outside the dashboard: a call's panel, a connection's card, and the shelf.

* :class:`CallPanel` — what a blocked cell shows in its own output while one of
  its tool calls runs: the call's transfer progress and consent prompts.
* :class:`ConnectionCard` — one line under the cell that connected (the
  connection's state), with room for the prompts its server sends while no cell
  waits for it.
* :class:`PromptShelf` — puts prompts into such a view (a card, the dashboard),
  keeping only the last few decided ones so a long-lived view does not grow
  without end.

Views only: they show what they are given and read the connection, and decide
nothing; the prompts they show belong to whoever added them (closing a view
leaves its prompts open).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.status import ConnectionView, era_text, roots_notice_text, sandbox_text
from .closing import close_parts
from .markup import escape, plain
from .style import style_html
from .text_fallback import WholeText, fallback_text

__all__ = [
    "KEEP_DECIDED",
    "CallPanel",
    "CardSource",
    "ConnectionCard",
    "PromptShelf",
    "PromptView",
    "card_text",
]

log = logging.getLogger(__name__)


#: Decided prompts kept visible in a view.
KEEP_DECIDED = 3


class PromptView(Protocol):
    """A view with a prompt area (the dashboard, a connection card)."""

    def add_prompt(self, prompt: Any) -> None:
        """Show *prompt* (thread-safe)."""
        ...

    def remove_prompt(self, prompt: Any) -> None:
        """Stop showing *prompt* (thread-safe); a prompt not shown is ignored."""
        ...


class PromptShelf:
    """Puts consent prompts into a view's prompt area, keeping at most *keep_decided* decided ones.

    Parameters
    ----------
    view
        Where the prompts show.
    keep_decided
        How many decided prompts (answered, timed out or withdrawn: their
        ``done`` is true) stay; older ones are removed from the view and closed.

    Notes
    -----
    Thread-safe: requests are put from the broker's loop thread and from cells.
    """

    def __init__(self, view: PromptView, *, keep_decided: int = KEEP_DECIDED) -> None:
        self.view = view
        self._keep = max(0, keep_decided)
        self._lock = threading.Lock()
        self._prompts: list[Any] = []

    def put(self, prompt: Any) -> None:
        """Show *prompt* in the view; drop the oldest decided prompts beyond the limit."""
        self.view.add_prompt(prompt)
        with self._lock:
            self._prompts.append(prompt)
            decided = [p for p in self._prompts if p.done]
            drop = decided[: max(0, len(decided) - self._keep)]
            self._prompts = [p for p in self._prompts if p not in drop]
        for old in drop:
            try:
                self.view.remove_prompt(old)
                old.close()
            except Exception:  # a view that is going away must not break the request that arrives
                log.debug("could not remove a consent prompt", exc_info=True)


class CallPanel(WholeText, widgets.VBox):  # type: ignore[misc]
    """A blocked cell's panel for its call: progress bars and consent prompts (DOM class ``fsbroker-call``).

    Parameters
    ----------
    children
        What to show at first.
    """

    children: tuple[Any, ...]  # the VBox trait, typed for this module

    def __init__(self, children: tuple[Any, ...] | list[Any] = ()) -> None:
        super().__init__(list(children))
        self.add_class("fsbroker-call")

    def add(self, *items: Any) -> None:
        """Show *items* below what is shown already."""
        self.children = (*self.children, *items)

    def __repr__(self) -> str:
        return "; ".join(repr(child) for child in self.children) or "<an empty call panel>"

    def fallback_text(self) -> str:
        # What a view without widgets shows (GitHub, nbconvert): what the panel holds, in words.
        return "; ".join(text for child in self.children if (text := fallback_text(child)))

    def close(self) -> None:
        """Close the panel; what it shows is left to whoever added it."""
        if self.comm is not None:
            self.children = ()
            close_parts(self)
        super().close()


class CardSource(ConnectionView, Protocol):
    """What the card reads of a connection: a :class:`~..console.status.ConnectionView`, and more."""

    @property
    def closed(self) -> bool: ...

    @property
    def close_reason(self) -> str | None: ...

    @property
    def tools(self) -> tuple[dict[str, Any], ...]: ...


def card_text(conn: CardSource) -> str:
    """The card's line as HTML: ``Connected <b>analysis</b> — server …, stdio, MCP …, 4 tools``.

    Below it, while the server has one, the notice that it was told only the
    shared folders' names (class ``fsbroker-roots-notice``).
    """
    name = escape(conn.name)
    if conn.closed:
        return f"<i>{name}</i>: disconnected ({escape(conn.close_reason or 'closed')})"
    tools = len(conn.tools)
    sandbox = sandbox_text(conn)
    notice = roots_notice_text(conn)
    return (
        f"Connected <b>{name}</b> — server {escape(conn.server_name or '?')}, {escape(conn.transport)}, "
        f"MCP {escape(conn.protocol_version or '?')}"
        + (f", {escape(era_text(conn))}" if era_text(conn) else "")
        + f", {tools} tool{'' if tools == 1 else 's'}"
        + (f", {escape(sandbox)}" if sandbox else "")
        + (f'<br><span class="fsbroker-roots-notice">{escape(notice)}</span>' if notice else "")
    )


class ConnectionCard(WholeText, widgets.VBox):  # type: ignore[misc]
    """One connection's line, with room for its consent prompts (DOM class ``fsbroker-connection``).

    Parameters
    ----------
    connection
        The connection shown.

    Attributes
    ----------
    connection
        As given.
    line
        The connection's state (see :func:`card_text`).
    prompts
        Consent prompts asked while no cell waits (see :meth:`add_prompt`);
        they belong to whoever added them.
    """

    def __init__(self, connection: CardSource) -> None:
        line = widgets.HTML(card_text(connection))
        prompts = widgets.VBox()
        # The style sheet travels with the card: after a kernel restart it is what greys the card.
        style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        super().__init__([line, prompts, style])
        self.connection = connection
        self.line = line
        self.prompts = prompts
        self.lost = False
        self._lock = threading.Lock()
        self._closed = False
        self._retired = False
        self.add_class("fsbroker-connection")

    def __repr__(self) -> str:
        # What a view without widgets shows (GitHub, nbconvert): the card's line, as text.
        return f"<{plain(self.line.value)}>"

    def update(self) -> None:
        """Show the connection's state now (any thread)."""
        text = card_text(self.connection)
        with self._lock:
            if not self._closed and not self._retired and self.line.value != text:
                self.line.value = text

    def mark_lost(self) -> None:
        """A frontend closed the card's comm: nothing sent to it arrives any more."""
        self.lost = True

    def retire(self, why: str) -> None:
        """Stay on the page but say that the card no longer follows its connection (*why*)."""
        with self._lock:
            if self._closed or self._retired:
                return
            self._retired = True
            self.line.value = f"{card_text(self.connection)} — <i>stale: {escape(why)}</i>"
            self.add_class("fsbroker-stale")

    def add_prompt(self, prompt: Any) -> None:
        """Show a consent prompt below the line (thread-safe)."""
        with self._lock:
            if not self._closed:
                self.prompts.children = (*self.prompts.children, prompt)

    def remove_prompt(self, prompt: Any) -> None:
        """Take a prompt away (thread-safe); a prompt not shown is ignored."""
        with self._lock:
            if not self._closed:
                self.prompts.children = tuple(p for p in self.prompts.children if p is not prompt)

    def close(self) -> None:
        """Close the card and its line. Idempotent.

        The prompts it shows are left to whoever added them (they close them).
        """
        with self._lock:
            already, self._closed = self._closed, True
        if not already:
            self.prompts.children = ()
            close_parts(self)
        super().close()
