"""The notebook's sign-ins to servers that ask for authorization: :class:`NotebookSignIns`.

A URL connection signs in when its server answers ``401`` with OAuth metadata (MCP
authorization): the settings come from ``connect(auth=...)`` or the ``FSBroker.oauth_*``
traitlets (:meth:`NotebookSignIns.settings_for`). When a person must sign in, the protocol
layer hands over a :class:`~jupyter_fsbroker.protocol.auth.SignIn`; this module keeps it by
connection name, rings the connecting cell (which shows the sign-in card, see
:meth:`NotebookSignIns.wait_connecting`), records ``auth/…`` audit records (the issuer and
resource only), and tells the views of every change. The JupyterLab panel completes a sign-in
with a relayed or pasted address (:meth:`NotebookSignIns.respond`) and reads its state
(:meth:`NotebookSignIns.auth_json`).

The kernel cannot open a browser tab for the person (it may run on another machine), so the
sign-in settings never open one: the card's link does. Where the redirect comes back
(:meth:`NotebookSignIns.receiver`): the JupyterLab extension's callback page when a panel says
it serves one and the page is not on a loopback origin (a remote kernel); a loopback page's
browser is asked to fetch a probe from the kernel's loopback first (:mod:`.loopback_probe`: an
SSH tunnel makes a local page with a remote kernel); else the kernel's loopback listener. A
pasted address works with either.

Nothing here reads or shows a token: the state comes from the store's record (issuer, expiry).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ..core.audit import USER_ACTOR, AuditLog, AuditRecord
from ..core.errors import ConfigError
from ..core.listeners import Listeners
from ..wire.timestamps import iso_utc
from .loopback_probe import reaches_loopback
from .settings import FSBroker

if TYPE_CHECKING:  # the MCP client is imported with the first URL connection
    from ..protocol.auth import OAuth, ReceiverKind, SignIn

__all__ = ["CALLBACK_PAGE", "NotebookSignIns", "PanelPage"]

T = TypeVar("T")

#: Where JupyterLab serves the extension's callback page, below its base URL.
CALLBACK_PAGE = "lab/extensions/jupyter_fsbroker/static/oauth-callback.html"

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
# How long a relayed answer waits for the flow's verdict: below the callback page's 5 s wait
# for an answer (labextension/static/oauth-callback.js), after which it offers the address.
_VERDICT_WAIT = 4.0


@dataclass(frozen=True)
class PanelPage:
    """Where a panel's page is (from its ``hello``): its origin and JupyterLab's base URL."""

    origin: str
    base_url: str
    callback_page: bool

    @property
    def loopback(self) -> bool:
        return urlsplit(self.origin).hostname in _LOOPBACK_HOSTS

    @property
    def page_url(self) -> str:
        """The callback page's URL: ``<origin><baseUrl>lab/extensions/…/oauth-callback.html``."""
        base = "/" + "/".join(part for part in self.base_url.split("/") if part)
        return self.origin.rstrip("/") + base.rstrip("/") + "/" + CALLBACK_PAGE


@dataclass
class _Entry:
    """One connection name's sign-in settings and its latest sign-in."""

    url: str
    settings: OAuth
    sign_in: SignIn | None = None


class NotebookSignIns:
    """The sign-ins of one notebook broker (see the module docstring). Thread-safe.

    Parameters
    ----------
    settings
        The ``FSBroker`` configurable (the ``oauth_*`` traitlets).
    audit
        Where the ``auth/…`` records go.
    """

    def __init__(self, settings: FSBroker, audit: AuditLog) -> None:
        self._settings = settings
        self._audit = audit
        self._listeners: Listeners[[SignIn]] = Listeners()
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._pages: dict[str, PanelPage] = {}
        self._bells: dict[str, concurrent.futures.Future[SignIn]] = {}
        self._prober: Callable[[str], object] | None = None

    def subscribe(self, listener: Callable[[SignIn], None]) -> Callable[[], None]:
        """Call *listener* (any thread, must not block) with each sign-in that changed."""
        return self._listeners.add(listener)

    def _changed(self, sign_in: SignIn) -> None:
        self._listeners.notify(sign_in)

    # -- settings ------------------------------------------------------------------------------

    def receiver(self) -> ReceiverKind:
        """Where a new sign-in's redirect comes back (``FSBroker.oauth_redirect``, ``auto`` decided)."""
        wanted = str(self._settings.oauth_redirect)
        if wanted != "auto":
            return wanted  # type: ignore[return-value]
        if self._remote_page() is not None:
            return "page"
        page, prober = self._any_page(), self._prober
        if page is not None and page.loopback and prober is not None:
            # A loopback page may still be far from the kernel (an SSH tunnel): ask its browser.
            return "loopback" if reaches_loopback(prober) else "page"
        return "loopback"

    def set_prober(self, prober: Callable[[str], object] | None) -> None:
        """Who asks the panels to fetch a probe URL (:mod:`.loopback_probe`); ``None``: nobody."""
        self._prober = prober

    def _remote_page(self) -> PanelPage | None:
        with self._lock:
            pages = list(self._pages.values())
        return next((p for p in pages if p.callback_page and not p.loopback), None)

    def _any_page(self) -> PanelPage | None:
        with self._lock:
            pages = list(self._pages.values())
        return next((p for p in pages if p.callback_page), None)

    def settings_for(self, name: str, url: str | None, auth: OAuth | bool | None) -> OAuth | None:
        """The sign-in settings of ``connect(name, url=url, auth=auth)``.

        *auth* ``None`` or ``True``: the ``FSBroker.oauth_*`` settings; ``False``: no sign-in
        (a ``401`` fails the connection); an :class:`~jupyter_fsbroker.protocol.auth.OAuth`:
        those settings (the notebook shows the sign-in instead of opening a browser). A
        command's connection never signs in.

        Raises
        ------
        ConfigError
            *auth* for a command, or a value that means nothing, or traitlets that cannot work.
        """
        import dataclasses

        from ..protocol.auth import OAuth

        if url is None:
            if auth not in (None, False):
                raise ConfigError("auth is for servers reached by URL (a command's server runs here)")
            return None
        if auth is False:
            with self._lock:
                self._entries.pop(name, None)  # the panel shows no sign-in for it any more
            return None
        try:
            if auth is None or auth is True:
                base = self.traitlet_settings()
            elif isinstance(auth, OAuth):
                base = auth
            else:
                raise ConfigError(f"auth must be an OAuth, True, False or None, not {auth!r}")
            redirect = base.redirect if base.redirect != "auto" else self.receiver()
            page = self._remote_page() or self._any_page()
            page_url = base.page_url or (page.page_url if page is not None else None)
            if redirect == "page" and page_url is None:
                raise ConfigError("oauth_redirect='page' needs the JupyterLab extension's callback page")
            settings = dataclasses.replace(
                base,
                open_browser=False,
                redirect=redirect,
                page_url=page_url if redirect == "page" else None,
                on_sign_in=lambda sign_in: self._started(name, sign_in, base.on_sign_in),
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        with self._lock:
            self._entries[name] = _Entry(url, settings)
        return settings

    def traitlet_settings(self) -> OAuth:
        """The sign-in settings of the ``FSBroker.oauth_*`` traitlets."""
        from ..protocol.auth import OAuth

        s = self._settings
        return OAuth(
            client_id=s.oauth_client_id or None,
            client_secret=(s.oauth_client_secret or None) if s.oauth_client_id else None,
            client_metadata_url=s.oauth_client_metadata_url or None,
            scope=s.oauth_scope or None,
            store=s.oauth_store,
        )

    # -- panels --------------------------------------------------------------------------------

    def panel_attached(self, key: str, page: PanelPage | None) -> None:
        """A panel said where its page is (``None``: it did not say)."""
        with self._lock:
            if page is None:
                self._pages.pop(key, None)
            else:
                self._pages[key] = page

    def panel_detached(self, key: str) -> None:
        with self._lock:
            self._pages.pop(key, None)

    # -- sign-ins (the event loop) -------------------------------------------------------------

    def _started(self, name: str, sign_in: SignIn, told: Callable[[SignIn], object] | None) -> None:
        with self._lock:
            entry = self._entries.get(name)
            previous = entry.sign_in if entry is not None else None
            if entry is not None:
                entry.sign_in = sign_in
            bell = self._bells.get(name)
        if previous is not None and previous is not sign_in:
            previous.cancel()
        sign_in.subscribe(self._follow)
        if bell is not None and not bell.done():
            bell.set_result(sign_in)
        self._changed(sign_in)
        if told is not None:
            told(sign_in)

    def _follow(self, sign_in: SignIn) -> None:
        """Each change of a sign-in: its audit record, then the views."""
        if sign_in.state == "completed":
            self._record("auth/signed_in", sign_in.server, sign_in.issuer, sign_in.resource)
        elif sign_in.state in ("failed", "cancelled"):
            self._record(
                "auth/sign_in_failed", sign_in.server, sign_in.issuer, sign_in.resource, sign_in.error
            )
        self._changed(sign_in)

    def _record(
        self, method: str, server: str, issuer: str | None, resource: str, reason: str | None = None
    ) -> None:
        record = AuditRecord(
            time.time(),
            server,
            "",
            method,
            None,
            None,
            None,
            "deny" if method == "auth/sign_in_failed" else "allow",
            reason=reason,
            actor=USER_ACTOR[1],
            issuer=issuer,
            resource=resource,
        )
        self._audit.append(record)

    # -- the connecting cell -------------------------------------------------------------------

    def wait_connecting(
        self, name: str, future: concurrent.futures.Future[T], show: Callable[[SignIn], None]
    ) -> T:
        """Wait for *future* (connecting *name*); each sign-in it starts is shown (*show*) on this thread
        (the cell's, so the card lands in its output). Ctrl-C cancels the connecting."""
        bell = self._ring(name)
        try:
            while True:
                waited: tuple[concurrent.futures.Future[Any], ...] = (future, bell)
                concurrent.futures.wait(waited, return_when=concurrent.futures.FIRST_COMPLETED)
                if bell.done():
                    sign_in, bell = bell.result(), self._ring(name)
                    show(sign_in)
                if future.done():
                    return future.result()
        except BaseException:
            future.cancel()
            raise
        finally:
            self._unring(name)

    async def await_connecting(
        self, name: str, future: concurrent.futures.Future[T], show: Callable[[SignIn], None]
    ) -> T:
        """:meth:`wait_connecting` for async cells."""
        bell = self._ring(name)
        wrapped = asyncio.wrap_future(future)
        try:
            while True:
                rung = asyncio.wrap_future(bell)
                await asyncio.wait((wrapped, rung), return_when=asyncio.FIRST_COMPLETED)
                if bell.done():
                    sign_in, bell = bell.result(), self._ring(name)
                    show(sign_in)
                else:
                    rung.cancel()
                if wrapped.done():
                    return wrapped.result()
        except BaseException:
            future.cancel()
            raise
        finally:
            self._unring(name)

    def _ring(self, name: str) -> concurrent.futures.Future[SignIn]:
        bell: concurrent.futures.Future[SignIn] = concurrent.futures.Future()
        with self._lock:
            self._bells[name] = bell
        return bell

    def _unring(self, name: str) -> None:
        with self._lock:
            self._bells.pop(name, None)

    # -- what views and the panel may do -------------------------------------------------------

    def find(self, sign_in_id: str) -> SignIn | None:
        """The latest sign-in whose id is *sign_in_id*."""
        with self._lock:
            entries = list(self._entries.values())
        return next(
            (e.sign_in for e in entries if e.sign_in is not None and e.sign_in.id == sign_in_id), None
        )

    def waiting(self) -> list[SignIn]:
        """The sign-ins that wait for a person, in the order of their connections' names."""
        with self._lock:
            entries = sorted(self._entries.items())
        return [e.sign_in for _, e in entries if e.sign_in is not None and e.sign_in.state == "waiting"]

    def respond(self, sign_in_id: str, address: str) -> tuple[bool, str]:
        """Complete the sign-in *sign_in_id* with *address*; ``(ok, words for the person)``.

        The words wait (briefly) for the flow's verdict: "Signed in" once the tokens arrived,
        "Sign-in failed: <why>" if the flow failed, else a neutral "Sign-in received". The
        address is never repeated in the words.
        """
        from ..protocol.auth import SignInError

        sign_in = self.find(sign_in_id)
        if sign_in is None:
            return False, "That sign-in is unknown here."
        ended = threading.Event()

        def changed(changed: SignIn) -> None:
            if changed.state != "waiting":
                ended.set()

        unsubscribe = sign_in.subscribe(changed)
        try:
            sign_in.complete(address)
            if sign_in.state == "cancelled":
                return False, f"The authorization server said no; {sign_in.server} is not signed in."
            # "Signed in" only once the tokens are in hand: the code is still to be exchanged.
            ended.wait(_VERDICT_WAIT)
        except SignInError as exc:
            return False, f"Not accepted: {exc}."
        finally:
            unsubscribe()
        if sign_in.state == "completed":
            return True, f"Signed in to {sign_in.server}."
        if sign_in.state != "waiting":
            return False, f"Sign-in failed: {SignInError(sign_in.error or 'failed').reason}."
        return True, f"Sign-in received; signing in to {sign_in.server}."

    def sign_out(self, name: str, url: str | None) -> bool:
        """Forget the stored sign-in of the connection *name* (at *url* if it never signed in
        here), end its waiting sign-in; whether there was a stored one.

        Raises
        ------
        ConfigError
            Nothing is known of *name*.
        """
        from ..protocol.auth import resource_of, sign_out

        with self._lock:
            entry = self._entries.get(name)
        if entry is None and url is None:
            raise ConfigError(f"no connection named {name!r} signs in")
        target = entry.url if entry is not None else url
        assert target is not None
        settings = entry.settings if entry is not None else self.traitlet_settings()
        if entry is not None and entry.sign_in is not None:
            entry.sign_in.cancel()
        known = sign_out(target, settings)
        issuer = entry.sign_in.issuer if entry is not None and entry.sign_in is not None else None
        self._record("auth/signed_out", name, issuer, resource_of(target))
        return known

    def auth_json(self, name: str) -> dict[str, Any] | None:
        """The panel's ``auth`` of the connection *name* (``PROTOCOL.md``); ``None``: it does not sign in."""
        from ..protocol.auth import resource_of, store_for

        with self._lock:
            entry = self._entries.get(name)
        if entry is None:
            return None
        resource = resource_of(entry.url)
        try:
            record = store_for(entry.settings).load(resource)
        except OSError:
            record = None
        sign_in = entry.sign_in
        issuer = (record.issuer if record is not None else None) or (sign_in.issuer if sign_in else None)
        if sign_in is not None and sign_in.state == "waiting":
            status = "waiting"
        elif record is not None and record.signed_in:
            status = "signed_in"
        elif sign_in is not None and sign_in.state == "failed":
            status = "failed"
        else:
            status = "signed_out"
        expires = record.expires_at if record is not None and record.signed_in else None
        return {
            "status": status,
            "issuer": issuer,
            "resource": resource,
            "expiresAt": iso_utc(expires) if expires is not None else None,
            "error": sign_in.error if sign_in is not None and status == "failed" else None,
            "signIn": {"id": sign_in.id, "url": sign_in.authorization_url, "receiver": sign_in.receiver}
            if sign_in is not None and status == "waiting"
            else None,
        }
