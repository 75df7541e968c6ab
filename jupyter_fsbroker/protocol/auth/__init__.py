"""Signing in to servers that ask for MCP authorization (OAuth 2.1, the 2025-11-25 spec).

``connect(..., url=URL, auth=OAuth(...))`` signs in when the server answers ``401``: the
authorization page opens in the browser, the redirect comes back to a loopback listener, and
the tokens are kept per user (:mod:`.store`; the secrets in the system keyring where one
works, :mod:`.keyring_store`) so the next connection needs no browser.

The names below are imported lazily: the settings (:class:`OAuth`) load without ``mcp``, so
a command line that only checks its options does not pay for the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import _lazy

if TYPE_CHECKING:
    from .keyring_store import KeyringTokenStore, choose_store
    from .oauth_settings import OAuth, Redirect, SignInPrompt
    from .pending_sign_in import ReceiverKind, SignIn, SignInState, parse_address
    from .provider import BrokerOAuth
    from .receivers import AuthorizationResponse, LoopbackReceiver
    from .sign_in_errors import SignInError, SignInKind
    from .signing_in import resource_of, sign_out, signing_in, store_for
    from .store import FileTokenStore, MemoryTokenStore, ResourceStorage, StoredSignIn, TokenStore

__all__ = [
    "AuthorizationResponse",
    "BrokerOAuth",
    "FileTokenStore",
    "KeyringTokenStore",
    "LoopbackReceiver",
    "MemoryTokenStore",
    "OAuth",
    "ReceiverKind",
    "Redirect",
    "ResourceStorage",
    "SignIn",
    "SignInError",
    "SignInKind",
    "SignInPrompt",
    "SignInState",
    "StoredSignIn",
    "TokenStore",
    "choose_store",
    "parse_address",
    "resource_of",
    "sign_out",
    "signing_in",
    "store_for",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "AuthorizationResponse": ".receivers",
        "BrokerOAuth": ".provider",
        "FileTokenStore": ".store",
        "KeyringTokenStore": ".keyring_store",
        "LoopbackReceiver": ".receivers",
        "MemoryTokenStore": ".store",
        "OAuth": ".oauth_settings",
        "ReceiverKind": ".pending_sign_in",
        "Redirect": ".oauth_settings",
        "ResourceStorage": ".store",
        "SignIn": ".pending_sign_in",
        "SignInError": ".sign_in_errors",
        "SignInKind": ".sign_in_errors",
        "SignInPrompt": ".oauth_settings",
        "SignInState": ".pending_sign_in",
        "StoredSignIn": ".store",
        "TokenStore": ".store",
        "choose_store": ".keyring_store",
        "parse_address": ".pending_sign_in",
        "resource_of": ".signing_in",
        "sign_out": ".signing_in",
        "signing_in": ".signing_in",
        "store_for": ".signing_in",
    },
)
