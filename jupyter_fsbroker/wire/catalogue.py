"""The error catalogue of the ``files/*`` contract: every kind of error answer, its code and reasons.

::

    ErrorKind (a frozen value: key, name, code, default_reason, reasons, summary)
    ├── FILE_LOCKED          -32100  locked, locked_below
    ├── PERMISSION_DENIED    -32101  not_granted, connection_closed, outside_roots, traversal, sensitive, …
    ├── NOT_FOUND            -32102  not_found, no_parent, unknown_lock, unknown_watch, undecodable_name, …
    ├── ALREADY_EXISTS       -32103  exists, not_empty, temp_exists
    ├── PRECONDITION_FAILED  -32104  etag_mismatch
    ├── WRONG_TYPE           -32105  wrong_type, is_directory, not_a_directory
    ├── TOO_LARGE            -32106  too_large, request_too_large (data.maxBytes), no_space, …
    ├── RATE_LIMITED         -32107  rate_limited, memory_budget (data.retryAfterMs), ops_rate, …
    ├── ENCODING_ERROR       -32108  invalid_content
    ├── INVALID_PARAMS       -32602  (JSON-RPC) invalid_params, bad_offset, bad_base64, lone_surrogate, …
    ├── METHOD_NOT_FOUND     -32601  (JSON-RPC) unknown_method
    └── INTERNAL_ERROR       -32603  (JSON-RPC) internal_error, unencodable_reply, cross_device, lock_error

Built from it, one class per kind in each of two trees:
``jupyter_fsbroker.core.errors`` (``BrokerError`` → ``FilesError`` → ``NotFound`` …), what the
broker raises; and ``jupyter_fsbroker.serverkit.exceptions`` (mcp's ``ToolError`` →
``FilesRequestError`` → ``NotFoundError`` …), what a server author's tool catches. A class binds
its kind (``class NotFound(FilesError, kind=catalogue.NOT_FOUND)``) and reads its code, name and
default reason from it, so none of them is written twice.

:func:`error_object` is the one place a JSON-RPC ``error`` object of the contract is built, and
:func:`kind_of` the one place one is read. The first nine kinds have a PROTOCOL.md name, sent
as ``data.error``; the last three are plain JSON-RPC errors, without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "ALREADY_EXISTS",
    "CALL_KINDS",
    "CONNECTION_CLOSED",
    "CONTINUATION_REFUSED",
    "ENCODING_ERROR",
    "FILES_UNAVAILABLE",
    "FILE_LOCKED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "KINDS",
    "MEMORY_BUDGET",
    "METHOD_NOT_FOUND",
    "NOT_FOUND",
    "NOT_GRANTED",
    "PERMISSION_DENIED",
    "PRECONDITION_FAILED",
    "RATE_LIMITED",
    "REPLAY_DIVERGED",
    "REQUEST_TOO_LARGE",
    "TOO_LARGE",
    "WRONG_TYPE",
    "ErrorKind",
    "error_object",
    "kind_of",
    "to_modern",
]

#: ``data.reason`` of the PERMISSION_DENIED that consent can cure.
NOT_GRANTED = "not_granted"
#: ``data.reason`` of the PERMISSION_DENIED answered to a request whose connection closed.
CONNECTION_CLOSED = "connection_closed"
#: ``data.reason`` of the TOO_LARGE that announces the client's per-request cap (``data.maxBytes``).
REQUEST_TOO_LARGE = "request_too_large"
#: ``data.reason`` of the RATE_LIMITED a connection out of answer memory gets (``data.retryAfterMs``).
MEMORY_BUDGET = "memory_budget"


@dataclass(frozen=True)
class ErrorKind:
    """One kind of error answer.

    Attributes
    ----------
    key
        The catalogue's name of the kind (``NOT_FOUND``, ``INVALID_PARAMS`` …).
    name
        The PROTOCOL.md name sent as ``data.error``; ``None`` for the plain JSON-RPC errors.
    code
        The JSON-RPC error code.
    default_reason
        ``data.reason`` when the error gives none.
    reasons
        Every ``data.reason`` this package sends with this kind, the default first.
    summary
        What the kind means, in a few words.
    """

    key: str
    name: str | None
    code: int
    default_reason: str
    reasons: tuple[str, ...]
    summary: str

    @property
    def modern_code(self) -> int:
        """The code on the 2026-07-28 wire: outside JSON-RPC's reserved range for the named
        kinds (each legacy code plus 1000); the plain JSON-RPC errors keep theirs."""
        return (
            self.code + _MODERN_SHIFT if _NAMED_CODES.start >= self.code >= _NAMED_CODES.stop else self.code
        )


# The legacy named codes (-32100 ... -32199), shifted out of the reserved range on the modern wire.
_NAMED_CODES = range(-32100, -32200, -1)
_MODERN_SHIFT = 1000


def _named(code: int, key: str, reasons: tuple[str, ...], summary: str) -> ErrorKind:
    return ErrorKind(key, key, code, reasons[0], reasons, summary)


FILE_LOCKED = _named(
    -32100, "FILE_LOCKED", ("locked", "locked_below"), "another connection or process holds the lock"
)
PERMISSION_DENIED = _named(
    -32101,
    "PERMISSION_DENIED",
    (
        NOT_GRANTED,
        CONNECTION_CLOSED,
        "audit_unavailable",
        "escaping_symlink",
        "foreign_host",
        "invalid_uri",
        "no_roots",
        "nul_byte",
        "os_permission",
        "outside_roots",
        "read_only",
        "root_itself",
        "root_removed",
        "sensitive",
        "special_file",
        "symlink",
        "symlink_loop",
        "symlink_race",
        "temporary_file",
        "traversal",
        "unsupported_scheme",
        "upload_discarded",
    ),
    "outside the roots, not granted, read-only, sensitive, special or escaping",
)
NOT_FOUND = _named(
    -32102,
    "NOT_FOUND",
    ("not_found", "no_parent", "undecodable_name", "unknown_grant", "unknown_lock", "unknown_watch"),
    "no such file inside a granted path, or an unknown lockId or watchId",
)
ALREADY_EXISTS = _named(
    -32103,
    "ALREADY_EXISTS",
    ("exists", "not_empty", "temp_exists"),
    "exclusive create or write, or a rename onto an existing path without overwrite",
)
PRECONDITION_FAILED = _named(
    -32104, "PRECONDITION_FAILED", ("etag_mismatch",), "ifMatch does not match the current etag"
)
WRONG_TYPE = _named(
    -32105,
    "WRONG_TYPE",
    ("wrong_type", "is_directory", "not_a_directory"),
    "a directory where a file is needed, or the reverse",
)
TOO_LARGE = _named(
    -32106,
    "TOO_LARGE",
    (
        "too_large",
        REQUEST_TOO_LARGE,
        "exceeds_trash",
        "file_too_large",
        "journal_too_large",
        "no_space",
        "too_deep",
    ),
    "a single request over the limits (data.maxBytes)",
)
RATE_LIMITED = _named(
    -32107,
    "RATE_LIMITED",
    (
        "rate_limited",
        MEMORY_BUDGET,
        "bytes_rate",
        "ops_rate",
        "too_many_uploads",
        "too_many_watches",
        "watch_limit",
    ),
    "over the connection's operation or byte rate (data.retryAfterMs)",
)
ENCODING_ERROR = _named(
    -32108, "ENCODING_ERROR", ("invalid_content",), "content that is not valid in the asked encoding"
)
INVALID_PARAMS = ErrorKind(
    "INVALID_PARAMS",
    None,
    -32602,
    "invalid_params",
    (
        "invalid_params",
        "bad_base64",
        "bad_cursor",
        "bad_offset",
        "bad_value",
        "empty_path",
        "invalid_operation",
        "lone_surrogate",
        "missing_param",
        "name_too_long",
        "stateful_encoding",
        "unknown_encoding",
        "unknown_event",
        "wrong_param_type",
    ),
    "malformed params: a missing or mistyped member, a bad offset",
)
METHOD_NOT_FOUND = ErrorKind(
    "METHOD_NOT_FOUND", None, -32601, "unknown_method", ("unknown_method",), "an unknown files/* method"
)
INTERNAL_ERROR = ErrorKind(
    "INTERNAL_ERROR",
    None,
    -32603,
    "internal_error",
    ("internal_error", "cross_device", "lock_error", "unencodable_reply"),
    "anything unexpected; the details stay in the client's log",
)

#: Every kind, the named ones first, in code order.
KINDS: tuple[ErrorKind, ...] = (
    FILE_LOCKED,
    PERMISSION_DENIED,
    NOT_FOUND,
    ALREADY_EXISTS,
    PRECONDITION_FAILED,
    WRONG_TYPE,
    TOO_LARGE,
    RATE_LIMITED,
    ENCODING_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    INTERNAL_ERROR,
)

# The errors of a modern ``tools/call`` itself, not of a ``files/*`` answer: only the
# 2026-07-28 wire has them (on the legacy wire a missing return path keeps SEP-1708's -32603).
CONTINUATION_REFUSED = _named(
    -31110,
    "CONTINUATION_REFUSED",
    ("invalid", "expired", "live_elsewhere"),
    "a continuation that cannot be opened, or is not for this call",
)
REPLAY_DIVERGED = _named(
    -31111,
    "REPLAY_DIVERGED",
    ("diverged",),
    "a tool re-run over its answers asked something else than before",
)
FILES_UNAVAILABLE = _named(
    -31112,
    "FILES_UNAVAILABLE",
    ("no_extension", "no_return_path", "not_brokering", "no_changes"),
    "a tool needs files on a request that cannot carry them",
)

#: The errors of a modern ``tools/call`` (PROTOCOL.md, "Errors on the modern wire").
CALL_KINDS: tuple[ErrorKind, ...] = (CONTINUATION_REFUSED, REPLAY_DIVERGED, FILES_UNAVAILABLE)

_BY_NAME: dict[str, ErrorKind] = {kind.name: kind for kind in KINDS if kind.name is not None}
_BY_CODE: dict[int, ErrorKind] = {kind.code: kind for kind in KINDS} | {
    kind.modern_code: kind for kind in KINDS
}


def error_object(
    kind: ErrorKind, message: str, *, reason: str | None = None, path: str | None = None, **data: Any
) -> dict[str, Any]:
    """The JSON-RPC ``error`` object of an error answer of *kind*.

    Parameters
    ----------
    kind
        The kind of the error.
    message
        A sentence for people (never file content, never a path outside the roots).
    reason
        ``data.reason``; the kind's default reason if omitted.
    path
        ``data.path``, the path as the request wrote it; left out when ``None``.
    **data
        Further ``data`` members in their wire spelling (``maxBytes``, ``retryAfterMs`` …).

    Returns
    -------
    dict
        ``{"code", "message", "data"}``; ``data`` holds ``error`` (named kinds only),
        ``reason``, ``path`` (when known) and *data*.
    """
    members: dict[str, Any] = {}
    if kind.name is not None:
        members["error"] = kind.name
    members["reason"] = reason or kind.default_reason
    if path is not None:
        members["path"] = path
    members.update(data)
    return {"code": kind.code, "message": message, "data": members}


def kind_of(code: int, message: str, data: object = None) -> ErrorKind | None:
    """The kind of a JSON-RPC error answer; ``None`` for a code the contract does not define.

    ``data.error`` decides when it is a name; without one, a message that is exactly a
    name does (SEP-1708's reference client answers ``{"code": -32602, "message":
    "PERMISSION_DENIED"}``); otherwise the code decides. An unknown name in
    ``data.error`` leaves the decision to the code.
    """
    members = cast("Mapping[str, Any]", data) if isinstance(data, Mapping) else {}
    name = members.get("error")
    if isinstance(name, str):
        kind = _BY_NAME.get(name)
    else:
        kind = _BY_NAME.get(message.strip()) if isinstance(message, str) else None
    return kind if kind is not None else _BY_CODE.get(code)


def to_modern(error: Mapping[str, Any]) -> dict[str, Any]:
    """An error object of the contract with the 2026-07-28 wire's code (``data`` unchanged).

    The named kinds' codes move out of the reserved range; any other code stays.
    """
    code = error.get("code")
    kind = _BY_CODE.get(code) if isinstance(code, int) else None
    return {**error, "code": kind.modern_code} if kind is not None and kind.code == code else dict(error)
