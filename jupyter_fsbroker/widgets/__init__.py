"""The widget views of the broker: consent prompts, the dashboard, transfer progress.

* :mod:`.consent_prompt` — :class:`ConsentPrompt`, one ``files/consent`` request as a widget;
  :mod:`.consent_rows` — the rows and buttons it is made of.
* :mod:`.dashboard` — :class:`Dashboard`, the live view with the kill switches;
  :mod:`.dashboard_sections` — its sections with a button per row (Disconnect, Revoke,
  Force release); :mod:`.dashboard_feeds` — its activity, change and server log feeds;
  :mod:`.markup` — its sections as escaped HTML; :mod:`.rows` — the rows its sections are
  made of; :mod:`.trashsection` — its Trash section (Restore, Empty).
* :mod:`.progress` — :class:`TransferProgress`, bars for chunked transfers.
* :mod:`.running` — a call's running line under its cell, with its Cancel button.
* :mod:`.places` — where prompts show outside the dashboard: a call's panel, a
  connection's card, the shelf that keeps the last few decided.
* :mod:`.view_thread` — :class:`~.view_thread.ViewThread`, the one thread every view of a
  notebook changes on (and its clock).
* :mod:`.closing` — closing a widget and everything it is made of.
* :mod:`.style` — the views' style sheet, in JupyterLab's CSS variables.

The text views (the dashboard as text, the terminal prompt, the words every view shares) are
:mod:`jupyter_fsbroker.console`; ``TerminalConsenter``, ``status_text`` and ``ConnectionView``
still resolve here, with a :class:`DeprecationWarning`, for one release.

Views observe the broker and never decide policy: every button calls a public
method of the broker or of a connection. Modules here import ``ipywidgets``
only where they build widgets (:mod:`.markup` needs nothing), and the widget
classes below are imported on first use.

Stable DOM classes, for tests and users' CSS: ``fsbroker-consent``,
``fsbroker-approve``, ``fsbroker-deny``, ``fsbroker-dashboard``,
``fsbroker-disconnect``, ``fsbroker-revoke``, ``fsbroker-force-unlock``,
``fsbroker-changes``, ``fsbroker-activity``, ``fsbroker-progress``,
``fsbroker-connection``, ``fsbroker-call``, ``fsbroker-running``, ``fsbroker-cancel-call``;
in the prompt ``fsbroker-consent-row``,
``fsbroker-consent-path``, ``fsbroker-consent-op`` with ``fsbroker-op-<operation>``,
``fsbroker-consent-all-op``, ``fsbroker-finished``; in the dashboard ``fsbroker-section``,
``fsbroker-section-<name>``, ``fsbroker-stale``, ``fsbroker-restore``, ``fsbroker-empty-trash``,
``fsbroker-empty-confirm``, ``fsbroker-empty-cancel``; ``fsbroker-result``, ``fsbroker-tools``; and the
button colours ``fsbroker-mod-accept``, ``fsbroker-mod-warn``, ``fsbroker-mod-reject``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .consent_prompt import ConsentPrompt
    from .dashboard import Dashboard
    from .progress import TransferProgress

__all__ = [
    "ConsentPrompt",
    "Dashboard",
    "TransferProgress",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {"ConsentPrompt": ".consent_prompt", "Dashboard": ".dashboard", "TransferProgress": ".progress"},
    moved={
        "ConnectionView": "jupyter_fsbroker.console",
        "TerminalConsenter": "jupyter_fsbroker.console",
        "status_text": "jupyter_fsbroker.console",
    },
)
