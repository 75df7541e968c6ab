"""How to sign in to a server that asks for MCP authorization: the :class:`OAuth` value.

A server that answers ``401`` with ``WWW-Authenticate`` starts the flow of the MCP
authorization spec (2025-11-25, OAuth 2.1); :class:`OAuth` says what this client may bring to
it. Everything is optional: with nothing given, the client registers itself with the
authorization server (dynamic client registration) and asks for the scopes the server names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlparse

if TYPE_CHECKING:
    from .pending_sign_in import ReceiverKind, SignIn

__all__ = ["OAuth", "Redirect", "SignInPrompt"]

#: The stores ``OAuth(store=...)`` names (or a folder, as a :class:`~pathlib.Path`).
STORES = ("auto", "keyring", "file", "memory")

#: Called on the event loop when a person must sign in, with the pending
#: :class:`~.pending_sign_in.SignIn` (its ``authorization_url`` is the page to open; views
#: subscribe to it). It must not block (opening a browser is done separately, in a worker thread).
SignInPrompt = Callable[["SignIn"], object]

#: Where the authorization server's redirect comes back (see :attr:`OAuth.redirect`).
Redirect = Literal["auto", "loopback", "page", "paste"]


@dataclass(frozen=True)
class OAuth:
    """Settings for signing in to one server (``connect(..., auth=OAuth(...))``).

    Parameters
    ----------
    client_id, client_secret
        A client registered with the authorization server beforehand. Without them the
        client uses *client_metadata_url* where the server supports it, else dynamic
        registration. The secret is never shown (``repr`` hides it).
    client_metadata_url
        The https URL of this client's metadata document (a Client ID Metadata Document):
        where the authorization server supports them, it is the client's id.
    scope
        The scopes to ask for (space-separated); default: those the server names in its
        challenge or metadata, and none if it names none.
    open_browser
        Open the authorization page with :mod:`webbrowser` (``BROWSER`` is honoured) when a
        person must sign in; ``False``: only *on_sign_in* is told.
    on_sign_in
        Told the pending :class:`~.pending_sign_in.SignIn` when a person must sign in (the
        command line prints its ``authorization_url``; the notebook shows a card).
    store
        Where signed-in tokens are kept: ``"auto"`` (the default: the user's data folder,
        readable by the user only, with the secrets in the system keyring where one works
        and the ``keyring`` extra is installed), ``"keyring"`` (the same, warning where no
        keyring works), ``"file"`` (the data folder only), ``"memory"`` (this process only),
        or a folder for the file store.
    redirect
        Where the authorization server's redirect comes back: ``"loopback"`` (a listener on
        ``127.0.0.1``, for a browser on this machine), ``"page"`` (*page_url*, a page that
        hands the address on, e.g. the JupyterLab extension's callback page), ``"paste"``
        (the loopback address, which a browser elsewhere cannot load: the person pastes
        the address it ended on). ``"auto"``: *page_url* when given, else loopback. A
        pasted address completes a sign-in whatever the receiver.
    page_url
        The callback page's URL, for ``redirect="page"`` (and ``"auto"``).
    sign_in_timeout
        Seconds a person has to complete a sign-in.
    max_step_ups
        How many times in one connection a server may ask for more scope (``403
        insufficient_scope``) for the same scope before the call fails instead.
    """

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    scope: str | None = None
    open_browser: bool = True
    on_sign_in: SignInPrompt | None = field(default=None, repr=False, compare=False)
    store: str | Path = "auto"
    redirect: Redirect = "auto"
    page_url: str | None = None
    sign_in_timeout: float = 600.0
    max_step_ups: int = 2

    @property
    def receiver(self) -> ReceiverKind:
        """Where the redirect is expected: *redirect*, with ``"auto"`` decided."""
        if self.redirect == "auto":
            return "page" if self.page_url is not None else "loopback"
        return self.redirect

    def __post_init__(self) -> None:
        if self.client_secret is not None and not self.client_id:
            raise ValueError("a client secret needs its client id")
        if self.client_metadata_url is not None:
            parsed = urlparse(self.client_metadata_url)
            if parsed.scheme != "https" or not parsed.netloc or parsed.path in ("", "/"):
                raise ValueError("the client metadata URL must be an https URL with a path")
        if isinstance(self.store, str) and self.store not in STORES:
            raise ValueError(
                f"store must be one of {', '.join(map(repr, STORES))} or a folder, not {self.store!r}"
            )
        if self.redirect not in ("auto", "loopback", "page", "paste"):
            raise ValueError(f"redirect must be auto, loopback, page or paste, not {self.redirect!r}")
        if self.page_url is not None and urlparse(self.page_url).scheme not in ("http", "https"):
            raise ValueError("the callback page's URL must be an http(s) URL")
        if self.redirect == "page" and self.page_url is None:
            raise ValueError("redirect='page' needs the callback page's URL (page_url)")
        if not self.sign_in_timeout > 0:
            raise ValueError("sign_in_timeout must be positive")
        if self.max_step_ups < 0:
            raise ValueError("max_step_ups must not be negative")
