"""Sign-in failures are told in fixed words (never a state value or a server's body); settings are checked."""

from __future__ import annotations

import pytest
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from jupyter_fsbroker.protocol.auth import OAuth, SignInError
from jupyter_fsbroker.protocol.auth.sign_in_errors import sign_in_error
from jupyter_fsbroker.protocol.client_errors import ConnectError


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (OAuthFlowError("State parameter mismatch: tampered != Q1vFsecretstate"), "state_mismatch"),
        (OAuthFlowError("Authorization response iss mismatch: http://evil != http://as"), "issuer_mismatch"),
        (
            OAuthFlowError("Protected resource https://evil/mcp does not match expected http://a/mcp"),
            "resource_mismatch",
        ),
        (
            OAuthRegistrationError("Registration failed: {'secret': 'Q1vFsecretstate'}"),
            "registration_refused",
        ),
        (OAuthTokenError("Token exchange failed (400): Q1vFsecretstate"), "token_refused"),
        (TimeoutError(), "timed_out"),
    ],
)
def test_each_mcp_error_has_a_kind_and_a_fixed_text(error: Exception, kind: str) -> None:
    mapped = sign_in_error(error, "https://mcp.example.com/mcp")
    assert isinstance(mapped, SignInError) and isinstance(mapped, ConnectError)
    assert mapped.kind == kind
    assert "Q1vFsecretstate" not in str(mapped) and "tampered" not in str(mapped)
    assert "https://mcp.example.com/mcp" in str(mapped)


def test_settings_hide_the_secret_and_refuse_what_cannot_work() -> None:
    settings = OAuth(client_id="id", client_secret="s3cret")
    assert "s3cret" not in repr(settings)
    with pytest.raises(ValueError, match="client id"):
        OAuth(client_secret="s3cret")
    with pytest.raises(ValueError, match="https"):
        OAuth(client_metadata_url="http://example.com/client.json")
    with pytest.raises(ValueError, match="https"):
        OAuth(client_metadata_url="https://example.com/")
    with pytest.raises(ValueError, match="store"):
        OAuth(store="keychain")


def test_mcps_log_of_a_failed_flow_keeps_no_state_value(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import jupyter_fsbroker.protocol.auth.provider  # noqa: F401 - installs the filter

    logger = logging.getLogger("mcp.client.auth.oauth2")
    try:
        raise OAuthFlowError("State parameter mismatch: tampered != Q1vFsecretstate")
    except OAuthFlowError:
        with caplog.at_level(logging.ERROR, logger="mcp.client.auth.oauth2"):
            logger.exception("OAuth flow error")
    [record] = caplog.records
    assert record.getMessage() == "OAuth flow error"
    assert "Q1vFsecretstate" not in caplog.text
