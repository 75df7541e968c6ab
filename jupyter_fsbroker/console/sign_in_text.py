"""A sign-in in words: what the notebook's card and the terminal say (never a token or a code).

:func:`sign_in_words` reads a pending :class:`~jupyter_fsbroker.protocol.auth.SignIn` (its
server, issuer, state and error) and says where it is; the card
(:mod:`jupyter_fsbroker.widgets.sign_in_card`) shows the same words, and a terminal prints
them with the authorization URL (:func:`sign_in_text`). Views only: nothing here changes a
sign-in.
"""

from __future__ import annotations

from typing import Any

from .format import printable

__all__ = ["failure_words", "sign_in_text", "sign_in_title", "sign_in_words"]

#: A failure's kind in words for a person (the protocol layer's kinds).
_FAILURES = {
    "state_mismatch": "the answer belonged to another sign-in",
    "issuer_mismatch": "the answer came from another authorization server",
    "resource_mismatch": "the server names another resource than its address",
    "registration_refused": "the authorization server refused to register this client",
    "token_refused": "the authorization server refused to issue a token",
    "timed_out": "nobody completed it in time",
    "cancelled": "it was cancelled",
    "step_up_limit": "the server keeps asking for more access",
    "bad_address": "that was not the address the sign-in ended on",
    "not_waiting": "it no longer waits for an answer",
}


def failure_words(kind: str | None) -> str:
    """A failure's kind in words."""
    return _FAILURES.get(kind or "", "it failed")


def sign_in_title(sign_in: Any) -> str:
    """``Sign in to <server> (<issuer>)``."""
    where = f" ({printable(sign_in.issuer)})" if sign_in.issuer else ""
    return f"Sign in to {printable(sign_in.server)}{where}"


def sign_in_words(sign_in: Any) -> str:
    """Where *sign_in* is, in one line."""
    state = sign_in.state
    if state == "completed":
        return f"Signed in to {printable(sign_in.issuer or sign_in.server)}."
    if state == "failed":
        return f"Signing in to {printable(sign_in.server)} failed: {failure_words(sign_in.error)}."
    if state == "cancelled":
        return f"Signing in to {printable(sign_in.server)} was cancelled."
    if sign_in.answered:
        return "Signing in…"
    if sign_in.receiver == "page":
        return "Waiting for the sign-in: this page goes on once you are signed in."
    return (
        "Waiting for the sign-in. If the page you land on afterwards cannot load (the kernel runs "
        "elsewhere), paste its address here."
    )


def sign_in_text(sign_in: Any) -> str:
    """What a terminal prints: the title and the address to open, or the outcome."""
    if sign_in.state != "waiting":
        return f"jupyter_fsbroker: {sign_in_words(sign_in)}"
    return f"jupyter_fsbroker: {sign_in_title(sign_in)}: open {sign_in.authorization_url}"
