"""Closing a widget and everything it is made of, so that views that come and go leave nothing behind.

ipywidgets keeps every widget (a ``Layout`` and a ``Style`` too) in the kernel's
registry until it is closed, and closing a widget leaves its children, layout
and style open. Every view here closes through these two functions. They never
close anything that was not handed to them. :func:`watch_comm_closed` notices
the other way a widget ends: its frontend closing its comm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

__all__ = ["close_parts", "close_tree", "watch_comm_closed"]


def close_parts(widget: Any) -> None:
    """Close what *widget* is made of: its descendants, and their and its layout and style.

    *widget* itself stays open (a view's own ``close`` calls this, then its
    base class's ``close``).
    """
    for child in tuple(getattr(widget, "children", ()) or ()):
        close_tree(child)
    for name in ("layout", "style"):
        part = getattr(widget, name, None)
        if isinstance(part, widgets.Widget):
            part.close()


def close_tree(widget: Any) -> None:
    """Close *widget* and everything it is made of (see :func:`close_parts`)."""
    close_parts(widget)
    widget.close()


def watch_comm_closed(widget: Any, callback: Callable[[], object]) -> bool:
    """Call *callback()* (on the kernel's shell thread) if a frontend closes *widget*'s comm.

    A frontend that cannot open a widget (Notebook 7's file browser tab, for a
    notebook made with *Files → New*) closes its comm; from then on the kernel
    answers that widget's clicks with "No such comm". Returns whether the hook
    could be set (the widget has a comm). ipywidgets itself sets no close
    callback on its comms.
    """
    comm = getattr(widget, "comm", None)
    on_close = getattr(comm, "on_close", None)
    if on_close is None:
        return False
    on_close(lambda _msg: callback())
    return True
