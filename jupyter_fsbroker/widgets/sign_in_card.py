"""The sign-in card: where a person signs in to a server from the connecting cell.

A link styled as a button, "Sign in to <server> (<issuer>)", opens the authorization page in a
new tab (``target="_blank" rel="noopener"``: the kernel cannot open a tab, and a link works while
the cell blocks). Below it a paste field and Submit, for when the redirect cannot reach the
kernel: the value is read and cleared at once, and never echoed to other frontends, so the
code never stays in the widget's state,
and a refused address (another sign-in's ``state``, another issuer's ``iss``) is said in the
status line while the sign-in keeps waiting. Once done the card says "Signed in to <issuer>".

DOM classes: ``fsbroker-signin`` (the card), ``fsbroker-signin-open`` (the link),
``fsbroker-signin-paste`` (the field), ``fsbroker-signin-status`` (the status line). Changes
come on the views' thread (:class:`~.view_thread.ViewThread`); a click completes the sign-in on
the thread that received it (it returns at once). Views only: the sign-in decides.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]
from traitlets import Unicode

from ..console.sign_in_text import sign_in_title, sign_in_words
from .closing import close_parts
from .markup import escape, plain
from .style import ACCEPT, style_html
from .text_fallback import WholeText
from .view_thread import ViewThread

__all__ = ["SignInCard", "link_html"]

_LINK_STYLE = (
    "display:inline-block;padding:2px 12px;border-radius:2px;text-decoration:none;"
    "background:var(--jp-brand-color1,#1976d2);color:var(--jp-ui-inverse-font-color1,#fff)"
)


def link_html(sign_in: Any) -> str:
    """The link that opens the authorization page in a new tab."""
    return (
        f'<a class="fsbroker-signin-open {ACCEPT}" href="{escape(sign_in.authorization_url)}" '
        f'target="_blank" rel="noopener" style="{_LINK_STYLE}">{escape(sign_in_title(sign_in))}</a>'
    )


class _PasteField(widgets.Text):  # type: ignore[misc]
    """A text field whose typed value the kernel never echoes to the other frontends (ipywidgets 8
    broadcasts each change it receives): a pasted address holds a one-time code."""

    value = Unicode("", help="the address, read and cleared at once").tag(sync=True, echo_update=False)


class SignInCard(WholeText, widgets.VBox):  # type: ignore[misc]
    """One pending sign-in's card (see the module docstring).

    Parameters
    ----------
    sign_in
        The pending :class:`~jupyter_fsbroker.protocol.auth.SignIn`.
    answer
        Completes it with a pasted address: ``(accepted, words for the person)``.
    views
        The thread the card changes on; ``None``: the thread of the change.
    """

    def __init__(
        self, sign_in: Any, answer: Callable[[str], tuple[bool, str]], *, views: ViewThread | None = None
    ) -> None:
        self.sign_in = sign_in
        self._answer = answer
        self._views = views
        self._lock = threading.Lock()
        self._closed = False
        self.link = widgets.HTML(link_html(sign_in))
        self.paste = _PasteField(
            placeholder="the address your browser ended on", layout=widgets.Layout(width="28em")
        )
        self.paste.add_class("fsbroker-signin-paste")
        self.submit = widgets.Button(description="Submit", tooltip="complete the sign-in with this address")
        self.submit.on_click(self._submit)
        self.form = widgets.HBox([self.paste, self.submit])
        self.status = widgets.HTML(escape(sign_in_words(sign_in)))
        self.status.add_class("fsbroker-signin-status")
        self._refusal = ""
        style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        super().__init__([style, self.link, self.form, self.status])
        self.add_class("fsbroker-signin")
        self._unsubscribe = sign_in.subscribe(self._changed)

    def __repr__(self) -> str:
        # What a view without widgets shows: the same words.
        return f"<{plain(self.status.value)}>"

    def _changed(self, sign_in: Any) -> None:
        views = self._views
        if views is None or not views.post(self.update):
            self.update()

    def update(self) -> None:
        """Show where the sign-in is now."""
        with self._lock:
            if self._closed:
                return
            sign_in = self.sign_in
            words = escape(sign_in_words(sign_in))
            if sign_in.state == "waiting":
                if self._refusal and not sign_in.answered:
                    words = f"{escape(self._refusal)}<br>{words}"
            else:
                self.link.layout.display = "none"
                self.form.layout.display = "none"
            if self.status.value != words:
                self.status.value = words

    def _submit(self, _button: Any = None) -> None:
        address, self.paste.value = self.paste.value, ""  # never kept in the widget's state
        if not address.strip():
            return
        accepted, words = self._answer(address)
        self._refusal = "" if accepted else words
        self._changed(self.sign_in)

    def close(self) -> None:
        """Stop following the sign-in and close the card. Idempotent."""
        with self._lock:
            already, self._closed = self._closed, True
        if not already:
            self._unsubscribe()
            close_parts(self)
        super().close()
