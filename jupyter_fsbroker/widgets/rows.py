"""The parts the dashboard's sections are made of: a collapsible :class:`Section`, and rows with a button.

A section's rows are kept by key and updated in place (:func:`sync_rows`), so
that a refresh changes only what changed and a button a user is about to click
stays the same widget. Views only: a row's button does what its maker wired it to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from .closing import close_tree

__all__ = ["Row", "Section", "button_row", "set_value", "sync_rows"]


class Section:
    """One collapsible part of the dashboard, headed as JupyterLab's sidebars head theirs.

    A full-width header (DOM class ``fsbroker-section-title``: a caret, the
    title in small capitals, its count) above the body, instead of
    ipywidgets' grey accordion, so that the dashboard and the JupyterLab
    sidebar look alike. A click on the header opens or closes the body.

    Parameters
    ----------
    key
        Names the section's DOM class ``fsbroker-section-KEY``.
    title
        The title, without its count.
    body
        The widget shown when the section is open.
    """

    def __init__(self, key: str, title: str, body: Any) -> None:
        self.title = title
        self.empty = True
        self._lock = threading.Lock()
        self._count = 0
        self.header = widgets.Button(
            description=title, icon="caret-right", layout=widgets.Layout(width="100%")
        )
        self.header.add_class("fsbroker-section-title")
        self.body = widgets.Box([body], layout=widgets.Layout(display="none"))
        self.body.add_class("fsbroker-section-body")
        self.box = widgets.VBox([self.header, self.body])
        self.box.add_class("fsbroker-section")
        self.box.add_class(f"fsbroker-section-{key}")
        self.header.on_click(lambda _button: self.toggle())

    @classmethod
    def collapsible(cls, key: str, title: str, body: Any) -> Section:
        """A closed section around *body*."""
        return cls(key, title, body)

    @property
    def open(self) -> bool:
        """Whether the body shows."""
        return bool(self.body.layout.display != "none")

    @property
    def label(self) -> str:
        """The header's text: the title and its count."""
        return str(self.header.description)

    def toggle(self) -> None:
        """Open a closed section, close an open one (the header's click)."""
        with self._lock:
            self._set_open(not self.open)

    def show(self, count: int) -> None:
        """Title it with *count*; open it with its first row, close it when it empties."""
        with self._lock:
            label = f"{self.title} ({count})" if count else self.title
            set_value(self.header, label, trait="description")
            empty = count == 0
            if empty != self.empty:  # opens with its first row, closes when it empties; else the user decides
                self._set_open(not empty)
                self.empty = empty

    def _set_open(self, open_: bool) -> None:
        display = None if open_ else "none"
        if self.body.layout.display != display:
            self.body.layout.display = display
        icon = "caret-down" if open_ else "caret-right"
        if self.header.icon != icon:
            self.header.icon = icon


@dataclass
class Row:
    """One line of a section with an action button."""

    box: Any
    text: Any
    button: Any

    def close(self) -> None:
        """Close the row's widgets."""
        close_tree(self.box)


def set_value(widget: Any, value: str, *, trait: str = "value") -> None:
    """Set *widget*'s *trait* only if it changes (each change is a message to the frontend)."""
    if getattr(widget, trait) != value:
        setattr(widget, trait, value)


def button_row(text: str, label: str, css: str, style: str, tooltip: str) -> Row:
    """A row: a button (DOM classes *css* and *style*) before the HTML *text*."""
    button = widgets.Button(description=label, tooltip=tooltip, layout=widgets.Layout(width="auto"))
    button.add_class(css)
    button.add_class(style)
    text_widget = widgets.HTML(text)
    box = widgets.HBox([button, text_widget], layout=widgets.Layout(align_items="center"))
    return Row(box, text_widget, button)


def sync_rows(
    rows: dict[Any, Row],
    box: Any,
    items: Sequence[tuple[Hashable, str, bool]],
    make: Callable[[Any], Row],
    empty: Any,
) -> None:
    """Update the rows of one section in place: keep, update, add and close rows by key.

    Parameters
    ----------
    rows
        The rows shown, by key (updated).
    box
        The section's body.
    items
        ``(key, text, enabled)`` of each row to show, in order.
    make
        Makes the row of a new key.
    empty
        What the body shows without rows.
    """
    order: list[Row] = []
    wanted = set()
    for key, text, enabled in items:
        wanted.add(key)
        row = rows.get(key)
        if row is None:
            row = rows[key] = make(key)
        set_value(row.text, text)
        if row.button.disabled == enabled:
            row.button.disabled = not enabled
        order.append(row)
    for key in [key for key in rows if key not in wanted]:
        rows.pop(key).close()
    children = tuple(row.box for row in order) or (empty,)
    if tuple(box.children) != children:
        box.children = children
