"""The parts the dashboard's sections are made of: a collapsible :class:`Section`, and rows with a button.

A section's rows are kept by key and updated in place (:func:`sync_rows`), so
that a refresh changes only what changed and a button a user is about to click
stays the same widget. Views only: a row's button does what its maker wired it to.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from .closing import close_tree

__all__ = ["Row", "Section", "button_row", "set_value", "sync_rows"]


@dataclass
class Section:
    """One collapsible part of the dashboard: its title, its body, whether it was empty."""

    title: str
    accordion: Any
    empty: bool = True

    @classmethod
    def collapsible(cls, key: str, title: str, body: Any) -> Section:
        """A closed section around *body* (DOM classes ``fsbroker-section`` and ``fsbroker-section-KEY``)."""
        accordion = widgets.Accordion(children=[body], titles=(title,), selected_index=None)
        accordion.add_class("fsbroker-section")
        accordion.add_class(f"fsbroker-section-{key}")
        return cls(title, accordion)

    def show(self, count: int) -> None:
        """Title it with *count*; open it with its first row, close it when it empties."""
        title = f"{self.title} ({count})" if count else self.title
        if tuple(self.accordion.titles) != (title,):
            self.accordion.titles = (title,)
        empty = count == 0
        if empty != self.empty:  # opens with its first row, closes when it empties; else the user decides
            self.accordion.selected_index = None if empty else 0
            self.empty = empty


@dataclass
class Row:
    """One line of a section with an action button."""

    box: Any
    text: Any
    button: Any

    def close(self) -> None:
        """Close the row's widgets."""
        close_tree(self.box)


def set_value(widget: Any, value: str) -> None:
    """Set *widget*'s value only if it changes (each change is a message to the frontend)."""
    if widget.value != value:
        widget.value = value


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
