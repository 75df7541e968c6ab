"""The sign-in card and the panel's sign-in state in a real kernel, read and used as a person would.

:func:`card_parts` finds the card's authorization link, paste field, Submit button and status
line; :func:`set_value` types into a field as a frontend does; :func:`waiting` is the
connection whose sign-in waits in a panel snapshot; :func:`everything_sent` is every message
the kernel published, as text.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from tests.kernel.harness import Kernel, Widget

__all__ = ["card_parts", "everything_sent", "set_value", "waiting"]


def set_value(kernel: Kernel, widget: Widget, value: str, subshell_id: str | None) -> None:
    """Type into a text field the way a frontend does: an ``update`` comm message."""
    data = {"method": "update", "state": {"value": value}, "buffer_paths": []}
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": widget.comm_id, "data": data})
    if subshell_id is not None:
        msg["header"]["subshell_id"] = subshell_id
    kernel.kc.shell_channel.send(msg)


def card_parts(kernel: Kernel, card: Widget) -> tuple[str, Widget, Widget, Widget]:
    """The card's authorization URL (from its link), paste field, Submit button and status line."""
    parts = kernel.descendants(card)
    link = next(w for w in parts if "fsbroker-signin-open" in str(w.state.get("value", "")))
    anchor = str(link.state["value"])
    assert 'target="_blank"' in anchor and 'rel="noopener"' in anchor
    url = html.unescape(re.search(r'href="([^"]+)"', anchor).group(1))  # type: ignore[union-attr]
    submit = next(w for w in parts if w.state.get("description") == "Submit")
    return (
        url,
        kernel.child(card, "fsbroker-signin-paste"),
        submit,
        kernel.child(card, "fsbroker-signin-status"),
    )


def waiting(state: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in state["connections"] if (c.get("auth") or {}).get("status") == "waiting"), None)


def everything_sent(kernel: Kernel) -> str:
    """Every message the kernel published (widget states, panel messages, outputs), as text."""
    return "\n".join(json.dumps(m["content"]) for m in kernel.iopub_log)
