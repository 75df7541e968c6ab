"""The errors a server author's tool sees when a ``files/*`` request fails.

::

    ToolError (mcp)
    └── FilesError                   any error answer, or no answer
        ├── FileLocked               FILE_LOCKED          -32100
        ├── PermissionDenied         PERMISSION_DENIED    -32101
        ├── NotFound                 NOT_FOUND            -32102
        ├── AlreadyExists            ALREADY_EXISTS       -32103
        ├── PreconditionFailed       PRECONDITION_FAILED  -32104
        ├── WrongType                WRONG_TYPE           -32105
        ├── TooLarge                 TOO_LARGE            -32106
        ├── RateLimited              RATE_LIMITED         -32107
        ├── EncodingError            ENCODING_ERROR       -32108
        ├── InvalidParams            JSON-RPC             -32602
        ├── MethodNotFound           JSON-RPC             -32601
        ├── InternalError            JSON-RPC             -32603
        │   └── IntegrityError       the answer contradicts itself or the request
        ├── RequestTimeout           mcp                  -32001
        └── ConnectionClosed         mcp                  -32000
    MCPError (mcp)
    └── FilesUnavailable             the client does not broker files (-32603)

The names and codes are copies of PROTOCOL.md's (the core's error tree is the
other side; a test keeps the two equal). :func:`error_from_jsonrpc` is the one
place that turns a JSON-RPC error answer into one of these classes.

:class:`IntegrityError` is raised here, not answered: a client whose answer
cannot be true (a ``bytesRead`` that is not the content's length, a chunk from
another offset, invalid base64) has broken the contract, and a tool must fail
rather than compute from data that is not the file's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

from .contract import MISSING_CAPABILITY_MESSAGE

__all__ = [
    "AlreadyExists",
    "ConnectionClosed",
    "EncodingError",
    "FileLocked",
    "FilesError",
    "FilesUnavailable",
    "IntegrityError",
    "InternalError",
    "InvalidParams",
    "MethodNotFound",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "RequestTimeout",
    "TooLarge",
    "WrongType",
    "error_from_jsonrpc",
]


class FilesError(ToolError):
    """An error answer to a ``files/*`` request (or a failure to get one).

    It is a :class:`~mcp.server.mcpserver.exceptions.ToolError`: one that
    escapes a tool becomes that tool's ``isError`` result carrying
    ``"NAME: message"``, logged without a traceback.

    Parameters
    ----------
    message
        The message of the JSON-RPC error.
    code
        The JSON-RPC error code; the class's code if omitted.
    data
        The error's ``data`` object (``error``, ``reason``, ``path``, ...).
    method
        The ``files/*`` method that failed.

    Attributes
    ----------
    code : int
        The JSON-RPC error code.
    name : str or None
        The PROTOCOL.md name (``FILE_LOCKED`` ...), ``None`` for plain JSON-RPC errors.
    reason : str or None
        ``data.reason``, a snake_case detail (``not_granted``, ``outside_roots`` ...).
    path : str or None
        ``data.path``, the path as the request wrote it.
    data : dict
        The whole ``data`` object.
    method : str or None
        The method that failed.
    """

    default_code: ClassVar[int] = INTERNAL_ERROR
    default_name: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Mapping[str, Any] | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code
        self.data: dict[str, Any] = dict(data or {})
        name = self.data.get("error")
        self.name: str | None = name if isinstance(name, str) else self.default_name
        reason = self.data.get("reason")
        self.reason: str | None = reason if isinstance(reason, str) else None
        path = self.data.get("path")
        self.path: str | None = path if isinstance(path, str) else None
        self.method = method

    @property
    def retry_after(self) -> float | None:
        """``data.retryAfterMs`` in seconds, when the client suggested a delay."""
        value = self.data.get("retryAfterMs")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value) / 1000.0
        return None

    def __str__(self) -> str:
        return f"{self.name or self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code}, reason={self.reason!r})"


class FileLocked(FilesError):
    """FILE_LOCKED (-32100): another connection or process holds the lock."""

    default_code = -32100
    default_name = "FILE_LOCKED"


class PermissionDenied(FilesError):
    """PERMISSION_DENIED (-32101): outside the roots, not granted, read-only, sensitive ..."""

    default_code = -32101
    default_name = "PERMISSION_DENIED"


class NotFound(FilesError):
    """NOT_FOUND (-32102): no such file inside a granted path, or an unknown lockId/watchId."""

    default_code = -32102
    default_name = "NOT_FOUND"


class AlreadyExists(FilesError):
    """ALREADY_EXISTS (-32103): exclusive create or write, rename without overwrite."""

    default_code = -32103
    default_name = "ALREADY_EXISTS"


class PreconditionFailed(FilesError):
    """PRECONDITION_FAILED (-32104): ``ifMatch`` does not match (or the file changed while read)."""

    default_code = -32104
    default_name = "PRECONDITION_FAILED"


class WrongType(FilesError):
    """WRONG_TYPE (-32105): a directory where a file is needed, or the reverse."""

    default_code = -32105
    default_name = "WRONG_TYPE"


class TooLarge(FilesError):
    """TOO_LARGE (-32106): one request over the client's limits (``data.maxBytes``)."""

    default_code = -32106
    default_name = "TOO_LARGE"


class RateLimited(FilesError):
    """RATE_LIMITED (-32107): over the connection's rate (``data.retryAfterMs``)."""

    default_code = -32107
    default_name = "RATE_LIMITED"


class EncodingError(FilesError):
    """ENCODING_ERROR (-32108): content not valid in the asked encoding."""

    default_code = -32108
    default_name = "ENCODING_ERROR"


class InvalidParams(FilesError):
    """JSON-RPC -32602: malformed params (``data.expectedOffset`` for a bad chunk offset)."""

    default_code = -32602


class MethodNotFound(FilesError):
    """JSON-RPC -32601: the client does not know the method."""

    default_code = -32601


class InternalError(FilesError):
    """JSON-RPC -32603: the client failed unexpectedly."""

    default_code = INTERNAL_ERROR


class IntegrityError(InternalError):
    """The client's answer contradicts itself or the request; its data cannot be trusted.

    Raised by the helper (never sent by a client): for instance a ``files/read``
    answer whose ``bytesRead`` is not the byte length of its ``content``, or
    whose ``offset`` is not the one asked for.
    """

    def __str__(self) -> str:
        return f"the client's answer cannot be trusted: {self.message}"


class RequestTimeout(FilesError):
    """No answer within the request's timeout (mcp's -32001); a cancellation was sent."""

    default_code = REQUEST_TIMEOUT


class ConnectionClosed(FilesError):
    """The connection closed before the answer arrived (mcp's -32000)."""

    default_code = CONNECTION_CLOSED


class FilesUnavailable(MCPError):
    """The client does not broker files: -32603 with the message SEP-1708 prescribes.

    An :class:`~mcp.shared.exceptions.MCPError`, so raised from a tool (or from
    the ``initialize`` middleware) it reaches the client as that JSON-RPC error,
    not as a tool result.
    """

    def __init__(self, message: str = MISSING_CAPABILITY_MESSAGE) -> None:
        super().__init__(code=INTERNAL_ERROR, message=message)


_NAMED: tuple[type[FilesError], ...] = (
    FileLocked,
    PermissionDenied,
    NotFound,
    AlreadyExists,
    PreconditionFailed,
    WrongType,
    TooLarge,
    RateLimited,
    EncodingError,
)
_BY_NAME: dict[str, type[FilesError]] = {cls.default_name: cls for cls in _NAMED if cls.default_name}
_UNNAMED: tuple[type[FilesError], ...] = (
    InvalidParams,
    MethodNotFound,
    InternalError,
    RequestTimeout,
    ConnectionClosed,
)
_BY_CODE: dict[int, type[FilesError]] = {cls.default_code: cls for cls in (*_NAMED, *_UNNAMED)}


def error_from_jsonrpc(code: int, message: str, data: Any = None, *, method: str | None = None) -> FilesError:
    """Return the typed exception for a JSON-RPC error answer.

    ``data.error`` (the PROTOCOL.md name) decides the class; without it, a
    message that is exactly such a name does (SEP-1708's reference client
    answers ``{"code": -32602, "message": "PERMISSION_DENIED"}``); otherwise
    the code decides. Unknown codes give a plain :class:`FilesError`.

    Parameters
    ----------
    code, message, data
        The members of the JSON-RPC ``error`` object.
    method
        The ``files/*`` method that was answered.
    """
    mapping = cast("Mapping[str, Any]", data) if isinstance(data, Mapping) else {}
    name = mapping.get("error")
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None and not isinstance(name, str):
        cls = _BY_NAME.get(message.strip()) if isinstance(message, str) else None
    if cls is None:
        cls = _BY_CODE.get(code, FilesError)
    return cls(message, code=code, data=mapping, method=method)
