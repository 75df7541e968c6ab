"""The parts a consent prompt is made of: one row per requested path, the "all paths" row, the answers.

Builders only: each returns new widgets with the prompt's DOM classes, and
wires nothing (:class:`~.consent_prompt.ConsentPrompt` observes and resolves).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.consent_text import item_facts_text, item_label
from ..console.format import printable, reason_text
from ..core.consent import ConsentItem, ConsentRequest
from .style import ACCEPT, REJECT

__all__ = [
    "DESTRUCTIVE_CLASS",
    "DURATION_CHOICES",
    "PathRow",
    "all_paths_row",
    "already_note",
    "answer_buttons",
    "duration_choices",
    "duration_toggle",
    "op_box",
    "path_row",
]

#: The duration choices: label and seconds (``0`` stands for "as long as the connection lasts", whose
#: label names the connection: see :func:`duration_choices`).
DURATION_CHOICES: tuple[tuple[str, int], ...] = (("until you disconnect", 0), ("15 min", 900), ("1 h", 3600))

#: The DOM class of an operation that can destroy data (delete; write over an existing file).
DESTRUCTIVE_CLASS = "fsbroker-destructive"


def duration_choices(request: ConsentRequest) -> list[tuple[str, int]]:
    """:data:`DURATION_CHOICES` for *request*, the first naming whom to disconnect.

    ``until you disconnect analysis``, ``15 min``, ``1 h``.
    """
    return [(request.until_disconnect, 0), *DURATION_CHOICES[1:]]


@dataclass(frozen=True)
class PathRow:
    """The row of one requested path: the row, the path's checkbox and one checkbox per operation."""

    row: Any
    checkbox: Any
    ops: dict[str, Any]


def op_box(op: str, enabled: bool, *, ticked: bool | None = None, destructive: bool = False) -> Any:
    """The checkbox of operation *op* (``fsbroker-consent-op``, ``fsbroker-op-OP``); unchecked if disabled.

    *ticked* (default: *enabled*) is its first value; a *destructive* one is
    marked (:data:`DESTRUCTIVE_CLASS`: the style sheet colours it and adds a warning sign).
    """
    box = widgets.Checkbox(
        value=enabled if ticked is None else (ticked and enabled),
        disabled=not enabled,
        description=op,
        indent=False,
        layout=widgets.Layout(width="auto"),
        style={"description_width": "initial"},
    )
    box.add_class("fsbroker-consent-op")
    box.add_class(f"fsbroker-op-{op}")
    box.add_class("fsbroker-op")
    if destructive:
        box.add_class(DESTRUCTIVE_CLASS)
    return box


def _item_note(item: ConsentItem, operations: tuple[str, ...]) -> str:
    if not item.approvable:
        return f"&nbsp;<i>cannot be approved: {html.escape(reason_text(item.reason))}</i>"
    facts = item_facts_text(item, operations)
    if not facts:
        return ""
    # The real location on hover (a checkbox with a description shows that as its title instead).
    where = html.escape(printable(item.facts.location), quote=True)
    title = f' title="{where}"' if where else ""
    return f'&nbsp;<i class="fsbroker-consent-covers"{title}>({html.escape(facts)})</i>'


def path_row(request: ConsentRequest, item: ConsentItem) -> PathRow:
    """The row of *item* (``fsbroker-consent-row``): its checkbox, a note, the operations asked for it."""
    box = widgets.Checkbox(
        value=item.approvable,
        disabled=not item.approvable,
        description=item_label(item),
        indent=False,
        layout=widgets.Layout(width="auto"),
        style={"description_width": "initial"},
    )
    box.add_class("fsbroker-consent-path")
    asked = request.operations_of(item)
    grantable = item.grantable(asked)
    ticked = item.ticked(asked)
    destructive = item.destructive(asked)
    ops = {
        op: op_box(op, op in grantable, ticked=op in ticked, destructive=op in destructive) for op in asked
    }
    note = widgets.HTML(_item_note(item, asked))
    note.add_class("fsbroker-note")
    row = widgets.HBox([box, note, *ops.values()])
    row.add_class("fsbroker-consent-row")
    return PathRow(row, box, ops)


def all_paths_row(request: ConsentRequest) -> tuple[Any, dict[str, Any]]:
    """The "all paths" row (``fsbroker-consent-all``) and its checkbox per operation.

    Hidden when it would say nothing the path rows do not: one approvable path,
    or a request that asks each path its own operations.
    """
    risky = {op for item in request.items for op in item.destructive(request.operations_of(item))}
    toggles = {op: op_box(op, True, destructive=op in risky) for op in request.operations}
    for op, toggle in toggles.items():
        toggle.remove_class("fsbroker-consent-op")
        toggle.add_class("fsbroker-consent-all-op")
        toggle.tooltip = f"Allow {op} on every path (uncheck to refuse it)"
    row = widgets.HBox([widgets.HTML("All paths:&nbsp;"), *toggles.values()])
    row.add_class("fsbroker-consent-all")
    if sum(1 for item in request.items if item.approvable) < 2 or request.per_path:
        row.layout.display = "none"
    return row, toggles


def duration_toggle(default_duration: float | None, request: ConsentRequest | None = None) -> Any:
    """The duration choice (values from :data:`DURATION_CHOICES`), *default_duration* selected if offered."""
    choices = {seconds for _, seconds in DURATION_CHOICES}
    initial = 0 if default_duration is None else int(default_duration)
    return widgets.ToggleButtons(
        options=list(DURATION_CHOICES if request is None else duration_choices(request)),
        value=initial if initial in choices else 0,
        style={"button_width": "auto"},
    )


def answer_buttons() -> tuple[Any, Any]:
    """**Approve** (``fsbroker-approve``) and **Deny** (``fsbroker-deny``), in the answer colours."""
    approve = widgets.Button(description="Approve", icon="check", tooltip="Grant what is checked")
    approve.add_class("fsbroker-approve")
    approve.add_class(ACCEPT)
    deny = widgets.Button(description="Deny", icon="times", tooltip="Grant nothing")
    deny.add_class("fsbroker-deny")
    deny.add_class(REJECT)
    return approve, deny


def already_note(request: ConsentRequest) -> Any:
    """The line naming what was granted already and not asked again (hidden when nothing was)."""
    text = ""
    if request.already:
        shown = ", ".join(html.escape(printable(i.rel or i.path)) for i in request.already)
        text = f"Already granted (not asked again): {shown}"
    note = widgets.HTML(text, layout=widgets.Layout(display=None if text else "none"))
    note.add_class("fsbroker-note")
    return note
