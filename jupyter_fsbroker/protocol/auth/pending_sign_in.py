"""One sign-in waiting for a person: :class:`SignIn`, observable, completed from wherever the redirect lands.

When a server asks for authorization and no stored token will do, the flow builds the
authorization URL (it holds ``state`` and the PKCE challenge, never a code or a token) and
waits for the authorization server's redirect. Where that redirect lands depends on the
receiver (:data:`ReceiverKind`): the loopback listener (:mod:`.receivers`), a page served by
the Jupyter server the browser already talks to (the JupyterLab extension relays its query),
or the person's own paste of the address the browser ended on. All three end in
:meth:`SignIn.complete` (the loopback listener in :meth:`SignIn.accept`), so ``state`` is
checked in one place.

Observers (:meth:`SignIn.subscribe`) are called on every change, on the thread that made it
(the event loop, a comm's thread, a widget's): a view hops to its own thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import threading
from collections.abc import Callable
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from ...core.listeners import Listeners
from .receivers import AuthorizationResponse
from .sign_in_errors import SignInError, SignInKind

__all__ = ["ReceiverKind", "SignIn", "SignInState", "parse_address"]


#: Where the authorization server's redirect comes back.
ReceiverKind = Literal["loopback", "page", "paste"]
#: Where a sign-in is.
SignInState = Literal["waiting", "completed", "failed", "cancelled"]

# The redirect's parameters (RFC 6749 §4.1.2, RFC 9207); anything else in an address is ignored.
_PARAMETERS = ("code", "state", "iss", "error")


def parse_address(address: str) -> dict[str, str]:
    """The redirect's parameters in *address*: a whole URL, ``?code=…&state=…`` or ``code=…&state=…``.

    Raises
    ------
    SignInError
        ``bad_address``: it holds neither a code nor an error.
    """
    text = address.strip()
    if "?" in text:
        text = urlsplit(text).query
    text = text.split("#", 1)[0]
    query = {name: values[0] for name, values in parse_qs(text).items() if name in _PARAMETERS}
    if not query.get("code") and not query.get("error"):
        raise SignInError("bad_address")
    return query


class SignIn:
    """The pending step of one connection's sign-in (see the module docstring).

    Attributes
    ----------
    id
        Random and url-safe: how a view that is not the flow names it.
    server
        The connection's name.
    url
        The server's URL.
    issuer
        The authorization server (``None`` if it was not discovered).
    resource
        The resource (RFC 8707) the tokens are for.
    authorization_url
        The page the person signs in on.
    receiver
        Where the redirect is expected (:data:`ReceiverKind`).
    """

    def __init__(
        self,
        *,
        server: str,
        url: str,
        issuer: str | None,
        resource: str,
        authorization_url: str,
        receiver: ReceiverKind,
    ) -> None:
        self.id = secrets.token_urlsafe(12)
        self.server = server
        self.url = url
        self.issuer = issuer
        self.resource = resource
        self.authorization_url = authorization_url
        self.receiver: ReceiverKind = receiver
        self._expected = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        self._lock = threading.Lock()
        self._state: SignInState = "waiting"
        self._error: SignInKind | None = None
        self._answer: concurrent.futures.Future[AuthorizationResponse] = concurrent.futures.Future()
        self._observers: Listeners[[SignIn]] = Listeners()

    def __repr__(self) -> str:
        return f"<SignIn {self.server!r} {self._state} via {self.receiver}>"

    @property
    def state(self) -> SignInState:
        return self._state

    @property
    def error(self) -> SignInKind | None:
        """Why it failed (a :data:`~.sign_in_errors.SignInKind`), or ``None``."""
        return self._error

    @property
    def expected_state(self) -> str:
        """The ``state`` of the authorization URL: only a redirect carrying it completes the sign-in."""
        return self._expected

    @property
    def answered(self) -> bool:
        """Whether the redirect arrived (the tokens may still be on their way)."""
        return self._answer.done()

    # -- any thread ----------------------------------------------------------------------------

    def complete(self, address: str) -> None:
        """Complete the sign-in with the address the authorization server redirected to.

        *address* is pasted by the person or relayed by a page: the whole URL or its query.
        A refused address changes nothing: the sign-in keeps waiting for the right one.

        Raises
        ------
        SignInError
            ``bad_address`` (no code in it), ``state_mismatch`` (it answers another
            sign-in), ``issuer_mismatch`` (another authorization server's), or
            ``not_waiting`` (this sign-in was answered or ended already).
        """
        query = parse_address(address)
        state = query.get("state", "")
        with self._lock:
            if self._state != "waiting" or self._answer.done():
                raise SignInError("not_waiting", self.url)
            if not secrets.compare_digest(state, self._expected):
                raise SignInError("state_mismatch", self.url)
            iss = query.get("iss")
            if iss is not None and self.issuer is not None and iss.rstrip("/") != self.issuer.rstrip("/"):
                raise SignInError("issuer_mismatch", self.url)
        if query.get("error"):  # the authorization server said no (the person declined ...)
            self.fail("cancelled" if query["error"] == "access_denied" else "failed")
            return
        self.accept(AuthorizationResponse(query["code"], state, query.get("iss")))

    def accept(self, answer: AuthorizationResponse) -> bool:
        """Take a redirect whose ``state`` was checked already (the loopback listener's); whether it
        counted (the first answer does)."""
        with self._lock:
            if self._state != "waiting" or self._answer.done():
                return False
            try:
                self._answer.set_result(answer)
            except concurrent.futures.InvalidStateError:  # cancelled by the waiting flow meanwhile
                return False
        self._notify()
        return True

    def cancel(self) -> None:
        """Stop waiting: the flow fails with ``cancelled``. Nothing once it ended."""
        self.fail("cancelled")

    def fail(self, kind: SignInKind) -> None:
        """End it as failed with *kind* (``cancelled``: as cancelled). Nothing once it ended."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "cancelled" if kind == "cancelled" else "failed"
            self._error = kind
            if not self._answer.done():
                self._answer.set_exception(SignInError(kind, self.url))
        self._notify()

    def finish(self) -> None:
        """The tokens arrived: completed. Nothing once it ended."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "completed"
        self._notify()

    def subscribe(self, observer: Callable[[SignIn], object]) -> Callable[[], None]:
        """Call *observer* with this sign-in on every change; returns the unsubscribe function."""
        return self._observers.add(observer)

    def _notify(self) -> None:
        self._observers.notify(self)

    # -- the flow (the event loop) -------------------------------------------------------------

    async def wait(self, timeout: float) -> AuthorizationResponse:
        """The redirect; ``SignInError`` if it failed, was cancelled or *timeout* seconds passed."""
        waiting = asyncio.wrap_future(self._answer)
        # Ended here (timed out, cancelled): the answer's failure, set later, is nobody's to read.
        waiting.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout)
        except TimeoutError:
            self.fail("timed_out")
            raise SignInError("timed_out", self.url) from None
        except asyncio.CancelledError:
            self.cancel()
            raise
