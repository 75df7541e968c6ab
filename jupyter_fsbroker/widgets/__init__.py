"""Views of the broker: consent prompts, the dashboard, transfer progress (widgets), and text.

Views observe the broker and never decide policy: every button calls a public
method of the broker or of a connection. Modules here import ``ipywidgets``
only where they build widgets; :mod:`.text` needs nothing, and the widget
classes below are imported on first use, so ``import jupyter_fsbroker.widgets.text``
(the CLI, a terminal IPython) never loads ``ipywidgets``.

Stable DOM classes, for tests and users' CSS: ``fsbroker-consent``,
``fsbroker-approve``, ``fsbroker-deny``, ``fsbroker-dashboard``,
``fsbroker-disconnect``, ``fsbroker-revoke``, ``fsbroker-force-unlock``,
``fsbroker-changes``, ``fsbroker-activity``, ``fsbroker-progress``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy
from .text import ConnectionView, TerminalConsenter, status_text

if TYPE_CHECKING:
    from .consent import ConsentPrompt
    from .dashboard import Dashboard
    from .progress import TransferProgress

__all__ = [
    "ConnectionView",
    "ConsentPrompt",
    "Dashboard",
    "TerminalConsenter",
    "TransferProgress",
    "status_text",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {"ConsentPrompt": ".consent", "Dashboard": ".dashboard", "TransferProgress": ".progress"},
)
