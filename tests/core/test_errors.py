"""The one mapping of an exception met while serving a request to its answer."""

from __future__ import annotations

import errno

from jupyter_fsbroker.core import errors


def test_a_files_error_is_answered_as_it_is() -> None:
    error = errors.TooLarge("too big", reason="request_too_large", path="data/x", maxBytes=5)
    assert errors.to_files_error(error, "data/other") is error


def test_a_closed_error_is_permission_denied_connection_closed() -> None:
    answer = errors.to_files_error(errors.ClosedError("the broker is closed"), "data/x")
    assert type(answer) is errors.PermissionDenied
    assert (answer.reason, answer.path) == ("connection_closed", "data/x")
    assert errors.to_jsonrpc_error(answer)["code"] == -32101


def test_an_os_error_is_translated_naming_the_requests_path_only() -> None:
    answer = errors.to_files_error(
        FileNotFoundError(errno.ENOENT, "No such file", "/home/me/secret"), "data/x"
    )
    assert type(answer) is errors.NotFound
    assert answer.path == "data/x"
    assert "/home/me" not in answer.message


def test_anything_else_is_an_internal_error_that_tells_nothing() -> None:
    answer = errors.to_files_error(KeyError("the secret key"), None)
    assert type(answer) is errors.InternalError
    assert (answer.reason, answer.path) == ("internal_error", None)
    assert "secret" not in answer.message
