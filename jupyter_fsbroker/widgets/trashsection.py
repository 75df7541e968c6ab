"""The dashboard's Trash section: the newest entries, each with Restore, and Empty with a confirmation.

A :class:`TrashSection` is the body of the section ``fsbroker-section-trash``:
a summary line, one row per entry (newest first, at most ``limit``) with a
**Restore** button (DOM class ``fsbroker-restore``), and **Empty trash…**
(``fsbroker-empty-trash``), which asks first: **Delete for good**
(``fsbroker-empty-confirm``) deletes exactly the entries the question counted,
**Cancel** (``fsbroker-empty-cancel``) takes the question back.

Its buttons only call the trash's public methods
(:meth:`TrashCan.restore <jupyter_fsbroker.core.trashcan.TrashCan.restore>`,
:meth:`TrashCan.empty <jupyter_fsbroker.core.trashcan.TrashCan.empty>`), through
the dashboard's *act*, which runs them off the click's thread and shows what
they return. A restore never replaces what is at the entry's place: the
message then says how to do it from Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.format import format_bytes
from ..console.status import trash_summary
from ..core.errors import ConfigError
from ..core.retention import Retention
from ..core.trashcan import TrashCan
from ..core.trashentry import TrashEntry
from .closing import close_tree
from .markup import escape, muted, trash_entry_html
from .rows import Row, button_row, set_value, sync_rows
from .style import REJECT, WARN

__all__ = ["TrashSection"]


class TrashSection:
    """The body of the dashboard's Trash section.

    Parameters
    ----------
    trash
        The broker's trash.
    act
        Runs ``work`` (a button's action, which returns the HTML message to
        show) off the click's thread: ``act(thread_name, work)``.
    limit
        How many of the newest entries have a row.

    Attributes
    ----------
    body
        The widget to put in the section.
    empty_button, confirm_button, cancel_button
        **Empty trash…**, and the question's two answers (shown only while it is asked).
    """

    def __init__(
        self, trash: TrashCan, *, act: Callable[[str, Callable[[], str]], None], limit: int = 20
    ) -> None:
        self._trash = trash
        self._act = act
        self._limit = max(1, limit)
        self._rows: dict[str, Row] = {}
        self._entries: dict[str, TrashEntry] = {}
        self._asked: tuple[TrashEntry, ...] = ()
        self.summary = widgets.HTML()
        self.rows_box = widgets.VBox()
        self.more = widgets.HTML()
        self._none = widgets.HTML(muted("The trash is empty: what servers delete goes here first."))
        self.empty_button = _button(
            "Empty trash…", "fsbroker-empty-trash", WARN, "Delete every entry for good"
        )
        self.empty_button.on_click(lambda _button: self._ask())
        self.question = widgets.HTML()
        self.confirm_button = _button(
            "Delete for good", "fsbroker-empty-confirm", REJECT, "This cannot be undone"
        )
        self.confirm_button.on_click(lambda _button: self._confirm())
        self.cancel_button = _button("Cancel", "fsbroker-empty-cancel", "", "Keep the trash as it is")
        self.cancel_button.on_click(lambda _button: self._cancel())
        self.confirm_box = widgets.HBox(
            [self.question, self.confirm_button, self.cancel_button],
            layout=widgets.Layout(align_items="center", display="none"),
        )
        self.body = widgets.VBox(
            [self.summary, self.rows_box, self.more, self.empty_button, self.confirm_box]
        )

    def sync(self, entries: Sequence[TrashEntry], now: float, retention: Retention | None) -> None:
        """Show *entries* (newest first) as they are now (on the rendering thread)."""
        shown = list(entries[: self._limit])
        self._entries = {entry.id: entry for entry in shown}
        set_value(self.summary, escape(trash_summary(entries, retention)))
        items = [(entry.id, trash_entry_html(entry, now), True) for entry in shown]
        sync_rows(self._rows, self.rows_box, items, self._make_row, self._none)
        rest = len(entries) - len(shown)
        set_value(self.more, muted(f"… and {rest} more: broker.trash().list()") if rest else "")
        if self.empty_button.disabled == bool(entries):
            self.empty_button.disabled = not entries

    def _make_row(self, entry_id: str) -> Row:
        row = button_row("", "Restore", "fsbroker-restore", WARN, "Put it back where it was deleted from")
        row.button.on_click(lambda _button: self._act("fsbroker-restore", lambda: self._restore(entry_id)))
        return row

    def _restore(self, entry_id: str) -> str:
        entry = self._entries.get(entry_id)
        shown = entry.path if entry is not None else entry_id
        try:
            where = self._trash.restore(entry_id)
        except ConfigError as exc:
            return f"Could not restore <code>{escape(shown)}</code>: {escape(exc)}"
        return f"Restored <code>{escape(shown)}</code> to <code>{escape(where)}</code>."

    # -- emptying, with a question first -------------------------------------------------------------

    def _ask(self) -> None:
        asked = tuple(self._trash.list())
        if not asked:
            return
        self._asked = asked
        size = format_bytes(sum(entry.size for entry in asked))
        count = "the 1 entry" if len(asked) == 1 else f"all {len(asked)} entries"
        self.question.value = (
            f"<b>Delete {escape(count)} ({escape(size)}) for good?</b> This cannot be undone."
        )
        self.confirm_box.layout.display = "flex"

    def _confirm(self) -> None:
        asked, self._asked = self._asked, ()
        self.confirm_box.layout.display = "none"
        if asked:
            self._act("fsbroker-empty-trash", lambda: self._empty(asked))

    def _cancel(self) -> None:
        self._asked = ()
        self.confirm_box.layout.display = "none"

    def _empty(self, asked: tuple[TrashEntry, ...]) -> str:
        try:
            removed = self._trash.empty(entries=asked)
        except ConfigError as exc:
            return f"Could not empty the trash: {escape(exc)}"
        count = "1 trash entry" if len(removed) == 1 else f"{len(removed)} trash entries"
        return f"Deleted {escape(count)} for good."

    # -- for tests and frontends ---------------------------------------------------------------------

    def restore_buttons(self) -> dict[str, Any]:
        """The Restore buttons shown, by entry id, newest first."""
        return {entry_id: self._rows[entry_id].button for entry_id in self._entries if entry_id in self._rows}

    def disable(self) -> None:
        """Disable every button (the dashboard was retired)."""
        for button in (self.empty_button, self.confirm_button, self.cancel_button):
            button.disabled = True
        for row in self._rows.values():
            row.button.disabled = True

    def close(self) -> None:
        """Close every widget of the section."""
        for row in self._rows.values():
            row.close()
        self._rows.clear()
        close_tree(self._none)
        close_tree(self.body)


def _button(label: str, css: str, style: str, tooltip: str) -> Any:
    button = widgets.Button(description=label, tooltip=tooltip, layout=widgets.Layout(width="auto"))
    button.add_class(css)
    if style:
        button.add_class(style)
    return button
