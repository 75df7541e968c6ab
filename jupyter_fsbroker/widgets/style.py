"""The views' look: one small style sheet in JupyterLab's own CSS variables, shipped inside the widgets.

JupyterLab themes (light, dark, high contrast) set ``--jp-…`` variables; the
rules below use only those (with plain fallbacks for other frontends), so the
consent prompt and the dashboard read well in every theme. Buttons take the
colours of JupyterLab's own dialogs: accept (the brand colour) for Approve,
warn (red, destructive) for the kill switch — Disconnect is red in the
JupyterLab sidebar too —, reject (neutral) for Deny, Revoke and Force release.
The sections are headed as JupyterLab's sidebars head theirs (small capitals on
the panel's own background, a caret), and an outcome's colour follows its tone
(:mod:`..core.outcomes`): ``fsbroker-tone-green``, ``-grey``, ``-red``.
Every rule is scoped to an ``fsbroker-…`` class, so nothing else on the page
changes. Views only: nothing here reads the broker.
"""

from __future__ import annotations

import json

__all__ = ["ACCEPT", "CSS", "DISCONNECTED_CSS", "REJECT", "RESTARTED_LINES", "WARN", "style_html"]

#: Button classes, in the manner of JupyterLab's ``jp-mod-accept`` / ``jp-mod-warn`` / ``jp-mod-reject``.
ACCEPT = "fsbroker-mod-accept"
WARN = "fsbroker-mod-warn"
REJECT = "fsbroker-mod-reject"

CSS = """
.fsbroker-consent, .fsbroker-dashboard {
  font-family: var(--jp-ui-font-family, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--jp-ui-font-color1, #222);
  background: var(--jp-layout-color1, transparent);
  border: var(--jp-border-width, 1px) solid var(--jp-border-color2, #ccc);
  border-radius: var(--jp-border-radius, 2px);
  padding: 4px 8px;
  margin: 4px 0;
}
.fsbroker-consent { border-left: 3px solid var(--jp-warn-color1, #f57c00); }
.fsbroker-consent.fsbroker-finished { border-left-color: var(--jp-border-color1, #999); padding: 2px 8px; }
.fsbroker-consent .widget-checkbox, .fsbroker-consent .widget-checkbox input { margin: 0; }
.fsbroker-consent .widget-checkbox input { margin-right: 4px; }
.fsbroker-consent .widget-checkbox { margin-right: 6px; }
.fsbroker-consent .widget-checkbox input { accent-color: var(--jp-brand-color1, #1976d2); }
.fsbroker-consent-row { align-items: center; gap: 4px; }
.fsbroker-consent-ops { gap: 8px; margin-left: 12px; }
.fsbroker-op { width: auto !important; }
.fsbroker-consent .fsbroker-destructive { color: var(--jp-error-color1, #d32f2f); }
.fsbroker-consent .fsbroker-destructive::after { content: "\\26A0"; margin-left: 2px; }
.fsbroker-note { color: var(--jp-ui-font-color2, #666); }
.fsbroker-countdown { color: var(--jp-ui-font-color2, #666); }
.fsbroker-muted { color: var(--jp-ui-font-color2, #666); font-style: italic; }
.fsbroker-soft { color: var(--jp-ui-font-color2, #666); }
.fsbroker-tone-green { color: var(--jp-success-color1, #2e7d32); }
.fsbroker-tone-grey { color: var(--jp-ui-font-color2, #666); }
.fsbroker-tone-red { color: var(--jp-error-color1, #c62828); }
.fsbroker-dashboard table { border-collapse: collapse; font-size: var(--jp-ui-font-size1, 13px); }
.fsbroker-dashboard th { color: var(--jp-ui-font-color2, #666); font-weight: normal; text-align: left; }
.fsbroker-dashboard td, .fsbroker-dashboard th { padding: 0 0.8em 0 0; vertical-align: top; }
.fsbroker-dashboard code, .fsbroker-consent code {
  background: var(--jp-layout-color2, #eee); color: var(--jp-content-font-color1, inherit);
  padding: 0 2px; border-radius: 2px;
}
.fsbroker-stale { opacity: 0.6; }
.fsbroker-banner {
  color: var(--jp-warn-color0, #e65100);
  background: var(--jp-warn-color3, #fff3e0);
  padding: 2px 6px;
}
.fsbroker-section { border-top: var(--jp-border-width, 1px) solid var(--jp-border-color2, #e0e0e0); }
.jupyter-widgets.jupyter-button.fsbroker-section-title {
  width: 100%; height: auto; margin: 0; padding: 4px 2px; text-align: left; line-height: normal;
  background: var(--jp-layout-color1, transparent); color: var(--jp-ui-font-color1, #222);
  font-family: var(--jp-ui-font-family, sans-serif); font-size: var(--jp-ui-font-size0, 11px);
  font-weight: 600; text-transform: uppercase; letter-spacing: 0.5px; box-shadow: none; border: none;
}
.jupyter-widgets.jupyter-button.fsbroker-section-title:hover { background: var(--jp-layout-color2, #eee); }
.jupyter-widgets.jupyter-button.fsbroker-section-title i { margin-right: 4px; }
.fsbroker-section-body { padding: 0 2px 6px 16px; }
.jupyter-widgets.jupyter-button.fsbroker-mod-accept {
  background: var(--jp-accept-color-normal, var(--jp-brand-color1, #1976d2));
  color: var(--jp-ui-inverse-font-color1, #fff);
}
.jupyter-widgets.jupyter-button.fsbroker-mod-warn {
  background: var(--jp-warn-color-normal, var(--jp-error-color1, #d32f2f));
  color: var(--jp-ui-inverse-font-color1, #fff);
}
.jupyter-widgets.jupyter-button.fsbroker-mod-reject {
  background: var(--jp-reject-color-normal, var(--jp-layout-color3, #9e9e9e));
  color: var(--jp-ui-inverse-font-color1, #fff);
}
.jupyter-widgets.jupyter-button.fsbroker-mod-accept:disabled,
.jupyter-widgets.jupyter-button.fsbroker-mod-warn:disabled,
.jupyter-widgets.jupyter-button.fsbroker-mod-reject:disabled { opacity: 0.45; }
.fsbroker-dashboard .jupyter-button, .fsbroker-consent .jupyter-button { height: 24px; line-height: 24px; }
"""


# Views whose kernel went away. JupyterLab's widget manager (jupyterlab-manager 5) marks every
# view ``jupyter-widgets-disconnected`` when the kernel restarts, and so are views it restores
# from a notebook's saved widget state (no kernel behind them), with a red broken-chain icon
# before each one: a dashboard became a column of icons with a Disconnect that looked alive. The
# rules below hide the icons inside our views, grey them, let no click reach their buttons, and
# put one line on top saying what to run (a stylesheet line, so it needs nothing from the dead
# kernel). An answered consent prompt is a receipt and stays as it was, without the icons.
#: The line each view shows once its kernel restarted or stopped, by the view's DOM class.
RESTARTED_LINES = {
    "fsbroker-dashboard": (
        "The kernel restarted or stopped: this dashboard is stale and its buttons do nothing. "
        "For a live one, run %load_ext jupyter_fsbroker and %fsbroker status again."
    ),
    "fsbroker-connection": (
        "The kernel restarted or stopped: this connection ended with it. Run the cells again to connect."
    ),
    "fsbroker-consent": (
        "The kernel restarted or stopped: this request ended with it and its buttons do nothing. "
        "Run the cell again to be asked again."
    ),
    "fsbroker-signin": (
        "The kernel restarted or stopped: this sign-in card is stale and does nothing. "
        "Connect again to sign in."
    ),
}
_OFF = ".jupyter-widgets-disconnected"
#: The views that show a line (a pending consent prompt only: an answered one is a receipt).
_LINED = {
    "fsbroker-dashboard": f".fsbroker-dashboard{_OFF}",
    "fsbroker-connection": f".fsbroker-connection{_OFF}",
    "fsbroker-consent": f".fsbroker-consent{_OFF}:not(.fsbroker-finished)",
    "fsbroker-signin": f".fsbroker-signin{_OFF}",
}
DISCONNECTED_CSS = (
    ",\n".join(
        [
            *(
                f".{view}{_OFF} {_OFF}::before"
                for view in ("fsbroker-dashboard", "fsbroker-consent", "fsbroker-signin", "fsbroker-progress")
            ),
            *(
                f".{view}{_OFF} {_OFF}:not(.fsbroker-consent)::before"
                for view in ("fsbroker-call", "fsbroker-connection")
            ),
            f".fsbroker-call{_OFF}::before",
            f".fsbroker-progress{_OFF}::before",
            f".fsbroker-consent.fsbroker-finished{_OFF}::before",
        ]
    )
    + " { content: none; display: none; }\n"
    + ",\n".join(_LINED.values())
    + " { cursor: not-allowed; }\n"
    + ",\n".join(
        f"{rule} > {'*' if view != 'fsbroker-connection' else ':not(.widget-vbox)'}"
        for view, rule in _LINED.items()
    )
    + " { opacity: 0.45; filter: grayscale(1); pointer-events: none; }\n"
    + ",\n".join(f"{rule}::before" for rule in _LINED.values())
    + """ {
  display: block; align-self: stretch; padding: 2px 6px; margin-bottom: 4px;
  font: inherit; font-weight: bold; white-space: normal;
  color: var(--jp-warn-color0, #e65100); background: var(--jp-warn-color3, #fff3e0);
}
"""
    + "".join(
        f"{_LINED[view]}::before {{ content: {json.dumps(line)}; }}\n"
        for view, line in RESTARTED_LINES.items()
    )
)


def style_html() -> str:
    """The style sheet as the value of an ``ipywidgets.HTML`` (which inserts it as given)."""
    rules = (CSS + DISCONNECTED_CSS).strip().splitlines()
    return "<style>" + " ".join(line.strip() for line in rules) + "</style>"
