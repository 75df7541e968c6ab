"""A call's running line under its cell: ``running: analysis · watch_changes · 12 s`` [Cancel].

:class:`RunningLine` shows the words its owner gives (the kernel's running call
says them, with the seconds it has run) and ticks once a second on the views'
clock (:meth:`~.view_thread.ViewThread.clock`); its Cancel button calls the
owner's ``cancel`` and says "cancelling…" until the owner closes the line, when
the call ends. It decides nothing: what Cancel does is the owner's.

Threading: built, ticked and closed on the views' thread when given one (the
kernel's are); the click runs on the shell or subshell thread that received it,
and only calls ``cancel``, which must return at once. One lock orders a tick and
the close, so a tick never changes a closed widget.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from .closing import close_parts
from .style import REJECT, style_html
from .text_fallback import WholeText

if TYPE_CHECKING:
    from .view_thread import ViewThread

__all__ = ["RunningLine"]

#: Seconds between two ticks of the line's seconds.
TICK = 1.0


class RunningLine(WholeText, widgets.HBox):  # type: ignore[misc]
    """One call in flight and its Cancel (DOM classes ``fsbroker-running``, ``fsbroker-cancel-call``).

    Parameters
    ----------
    text
        Returns the line's words now (``running: analysis · watch_changes · 12 s``).
    cancel
        Cancels the call (must return at once).
    views
        The views' thread, whose clock ticks the line; ``None``: the line does not tick.

    Attributes
    ----------
    label, cancel_button
        The line's words and its Cancel button.
    """

    children: tuple[Any, ...]

    def __init__(
        self, text: Callable[[], str], cancel: Callable[[], object], *, views: ViewThread | None = None
    ) -> None:
        self._text = text
        self._cancel = cancel
        self._lock = threading.Lock()
        self._closed = False
        self._cancelling = False
        self.label = widgets.HTML(self._words())
        self.label.add_class("fsbroker-running-text")
        self.cancel_button = widgets.Button(
            description="Cancel", tooltip="Cancel this call: the server is told to stop"
        )
        self.cancel_button.add_class("fsbroker-cancel-call")
        self.cancel_button.add_class(REJECT)
        style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        super().__init__([self.label, self.cancel_button, style])
        self.add_class("fsbroker-running")
        self.cancel_button.on_click(self._clicked)
        if views is not None:
            views.clock(self._tick, TICK)

    def __repr__(self) -> str:
        return self._text()

    def fallback_text(self) -> str:
        # A saved notebook shows this long after the call ended: "running: … · 1 s" would be wrong.
        return ""

    def _words(self) -> str:
        said = html.escape(self._text())
        if self._cancelling:
            said += " · cancelling…"
        return f'<span class="fsbroker-soft">{said}</span>'

    def _clicked(self, _button: Any) -> None:
        with self._lock:
            if self._closed or self._cancelling:
                return
            self._cancelling = True
            self.cancel_button.disabled = True
            self.label.value = self._words()
        self._cancel()

    def _tick(self) -> float | None:
        """Say the seconds again; the seconds until the next tick, or ``None`` once closed."""
        with self._lock:
            if self._closed:
                return None
            self.label.value = self._words()
        return TICK

    @property
    def closed(self) -> bool:
        """Whether the line was closed (its call ended)."""
        return self._closed

    def close(self) -> None:
        """The call ended: the line goes away. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.comm is not None:
            close_parts(self)
        super().close()
