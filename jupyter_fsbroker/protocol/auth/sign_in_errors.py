"""Why signing in failed: :class:`SignInError`, and the one mapping from mcp's OAuth errors to it.

mcp's errors quote what they compared (a ``state`` value, an authorization server's body):
texts a person should not be shown and a log should not keep. :func:`sign_in_error` gives
each a kind and a fixed text instead; the original stays the ``__cause__`` only where it holds
nothing secret.
"""

from __future__ import annotations

from typing import Literal

from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from ..client_errors import ConnectError

__all__ = ["SignInError", "SignInKind", "sign_in_error"]

SignInKind = Literal[
    "state_mismatch",
    "issuer_mismatch",
    "resource_mismatch",
    "registration_refused",
    "token_refused",
    "timed_out",
    "cancelled",
    "step_up_limit",
    "bad_address",
    "not_waiting",
    "failed",
]

_TEXTS: dict[str, str] = {
    "state_mismatch": "the sign-in answer did not belong to this sign-in (state mismatch); "
    "nothing was stored",
    "issuer_mismatch": "the sign-in answer came from another authorization server than the one asked "
    "(iss mismatch); refused",
    "resource_mismatch": "the server's protected-resource metadata names another resource "
    "than its URL; refused",
    "registration_refused": "the authorization server refused to register this client",
    "token_refused": "the authorization server refused to issue a token",
    "timed_out": "nobody completed the sign-in in time",
    "cancelled": "the sign-in was cancelled",
    "step_up_limit": "the server keeps asking for more scope; stopped asking",
    "bad_address": "that is not the address the sign-in ended on (it holds no code)",
    "not_waiting": "this sign-in no longer waits for an answer",
    "failed": "signing in failed",
}


class SignInError(ConnectError):
    """Signing in to a server failed.

    Attributes
    ----------
    kind
        What failed (:data:`SignInKind`); the message is a fixed text for it.
    reason
        That fixed text alone (no server): what a person may be shown.
    server
        The server's URL, as shown to the user.
    """

    def __init__(self, kind: SignInKind, server: str = "") -> None:
        where = f" ({server})" if server else ""
        super().__init__(f"signing in{where}: {_TEXTS[kind]}")
        self.kind: SignInKind = kind
        self.reason = _TEXTS[kind]
        self.server = server


def sign_in_error(exc: BaseException, server: str = "") -> SignInError:
    """The :class:`SignInError` that stands for one of mcp's OAuth errors (or passes one through)."""
    if isinstance(exc, SignInError):
        return exc
    text = str(exc)
    kind: SignInKind = "failed"
    if isinstance(exc, OAuthRegistrationError):
        kind = "registration_refused"
    elif isinstance(exc, OAuthTokenError):
        kind = "token_refused"
    elif isinstance(exc, OAuthFlowError):
        if text.startswith("State parameter mismatch"):
            kind = "state_mismatch"
        elif text.startswith("Authorization response") and "iss" in text:
            kind = "issuer_mismatch"
        elif text.startswith("Protected resource") and "does not match" in text:
            kind = "resource_mismatch"
    elif isinstance(exc, TimeoutError):
        kind = "timed_out"
    return SignInError(kind, server)
