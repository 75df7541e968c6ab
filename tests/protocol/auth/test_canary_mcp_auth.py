"""CANARY: the private parts of mcp 2.3's ``OAuthClientProvider`` that ``protocol/auth/provider.py`` uses.

``BrokerOAuth`` overrides or calls these (as mcp's own extensions do). When one fails after
upgrading mcp, adapt ``jupyter_fsbroker/protocol/auth/provider.py`` to the new mcp, then this
canary and the pin in ``pyproject.toml`` together.
"""

from __future__ import annotations

import dataclasses
import inspect

from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext

#: The methods used, and their parameters (``self`` left out).
METHODS = {
    "_auth_flow": ["request"],
    "_initialize": [],
    "_handle_token_response": ["response"],
    "_refresh_token": [],
    "_handle_refresh_response": ["response"],
    "_perform_authorization": [],
    "_add_auth_header": ["request"],
}
#: What the provider reads or replaces on the context.
CONTEXT_FIELDS = {
    "server_url",
    "storage",
    "lock",
    "oauth_metadata",
    "protected_resource_metadata",
    "auth_server_url",
    "protocol_version",
    "client_info",
    "current_tokens",
    "token_expiry_time",
}
CONTEXT_METHODS = {
    "update_token_expiry",
    "prepare_token_auth",
    "is_token_valid",
    "can_refresh_token",
    "clear_tokens",
}


def test_canary_the_provider_methods_the_subclass_overrides_or_calls() -> None:
    for name, parameters in METHODS.items():
        method = getattr(OAuthClientProvider, name, None)
        assert method is not None, f"CANARY: OAuthClientProvider.{name} is gone"
        got = [p for p in inspect.signature(method).parameters if p != "self"]
        assert got == parameters, f"CANARY: OAuthClientProvider.{name} now takes {got}, not {parameters}"
    assert inspect.isasyncgenfunction(OAuthClientProvider._auth_flow), (
        "CANARY: _auth_flow is no async generator"
    )


def test_canary_the_context_the_subclass_reads() -> None:
    fields = {field.name for field in dataclasses.fields(OAuthContext)}
    assert fields >= CONTEXT_FIELDS, f"CANARY: OAuthContext lost {CONTEXT_FIELDS - fields}"
    assert all(callable(getattr(OAuthContext, name, None)) for name in CONTEXT_METHODS)
    assert list(inspect.signature(OAuthContext.prepare_token_auth).parameters) == ["self", "data", "headers"]
    assert list(inspect.signature(OAuthContext.update_token_expiry).parameters) == ["self", "token"]
