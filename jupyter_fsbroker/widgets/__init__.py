"""Views of the broker: consent prompts, the dashboard, transfer progress (widgets), and text.

* :mod:`.consent` — :class:`ConsentPrompt`, one ``files/consent`` request as a widget.
* :mod:`.dashboard` — :class:`Dashboard`, the live view with the kill switches;
  :mod:`.markup` — its sections as escaped HTML; :mod:`.rows` — the rows its sections are
  made of; :mod:`.trashsection` — its Trash section (Restore, Empty).
* :mod:`.progress` — :class:`TransferProgress`, bars for chunked transfers.
* :mod:`.places` — where prompts show outside the dashboard: a call's panel, a
  connection's card, the shelf that keeps the last few decided.
* :mod:`.closing` — closing a widget and everything it is made of.
* :mod:`.style` — the views' style sheet, in JupyterLab's CSS variables.
* :mod:`.text` — the dashboard as text and the helpers every view shares;
  :mod:`.consent_text` — a consent request as a text question and its answers;
  :mod:`.terminal` — :class:`TerminalConsenter`, the terminal prompt.

Views observe the broker and never decide policy: every button calls a public
method of the broker or of a connection. Modules here import ``ipywidgets``
only where they build widgets; :mod:`.text`, :mod:`.markup`, :mod:`.consent_text`
and :mod:`.terminal` need nothing, and the widget classes below are imported on
first use, so ``import jupyter_fsbroker.widgets.text`` (the CLI, a terminal
IPython) never loads ``ipywidgets``.

Stable DOM classes, for tests and users' CSS: ``fsbroker-consent``,
``fsbroker-approve``, ``fsbroker-deny``, ``fsbroker-dashboard``,
``fsbroker-disconnect``, ``fsbroker-revoke``, ``fsbroker-force-unlock``,
``fsbroker-changes``, ``fsbroker-activity``, ``fsbroker-progress``,
``fsbroker-connection``, ``fsbroker-call``; in the prompt ``fsbroker-consent-row``,
``fsbroker-consent-path``, ``fsbroker-consent-op`` with ``fsbroker-op-<operation>``,
``fsbroker-consent-all-op``, ``fsbroker-finished``; in the dashboard ``fsbroker-section``,
``fsbroker-section-<name>``, ``fsbroker-stale``, ``fsbroker-restore``, ``fsbroker-empty-trash``,
``fsbroker-empty-confirm``, ``fsbroker-empty-cancel``; ``fsbroker-result``, ``fsbroker-tools``; and the
button colours ``fsbroker-mod-accept``, ``fsbroker-mod-warn``, ``fsbroker-mod-reject``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy
from .terminal import TerminalConsenter
from .text import ConnectionView, status_text

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
