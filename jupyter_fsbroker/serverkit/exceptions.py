"""The errors a server author's tool sees when a ``files/*`` request fails.

::

    ToolError (mcp)
    └── FilesRequestError                any error answer, or no answer
        ├── FileLockedError              FILE_LOCKED          -32100
        ├── PermissionDeniedError        PERMISSION_DENIED    -32101  also a PermissionError
        ├── NotFoundError                NOT_FOUND            -32102  also a FileNotFoundError
        ├── AlreadyExistsError           ALREADY_EXISTS       -32103  also a FileExistsError
        ├── PreconditionFailedError      PRECONDITION_FAILED  -32104
        ├── WrongTypeError               WRONG_TYPE           -32105
        ├── TooLargeError                TOO_LARGE            -32106
        ├── RateLimitedError             RATE_LIMITED         -32107
        ├── ContentEncodingError         ENCODING_ERROR       -32108  also a ValueError
        ├── InvalidParamsError           JSON-RPC             -32602  also a ValueError
        ├── MethodNotFoundError          JSON-RPC             -32601  also a NotImplementedError
        ├── ClientInternalError          JSON-RPC             -32603
        │   └── IntegrityError           the answer contradicts itself or the request
        ├── RequestTimeoutError          mcp                  -32001  also a TimeoutError
        └── ClientDisconnectedError      mcp                  -32000  also a ConnectionError
    MCPError (mcp)
    └── FilesUnavailableError            the client does not broker files (-32603)

The kinds, their names and codes are the wire's catalogue
(:mod:`jupyter_fsbroker.wire.catalogue`): each class here binds one kind, as the
core's error classes do on the client's side. Every class is an mcp ``ToolError``,
because mcp shows the model the text of a ``ToolError`` that escapes a tool and
withholds that of any other exception; where Python has a builtin for the same
failure, the class is that builtin too, so ``except FileNotFoundError`` catches a
file missing on the client as it catches one missing here. :func:`error_from_jsonrpc`
is the one place that turns a JSON-RPC error answer into one of these classes.

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

from ..wire import catalogue
from ..wire.brokering import MISSING_CAPABILITY_MESSAGE
from ..wire.catalogue import ErrorKind

__all__ = [
    "AlreadyExistsError",
    "ClientDisconnectedError",
    "ClientInternalError",
    "ContentEncodingError",
    "ContinuationRefusedError",
    "FileLockedError",
    "FilesRequestError",
    "FilesUnavailableError",
    "IntegrityError",
    "InvalidParamsError",
    "MethodNotFoundError",
    "NotFoundError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "RateLimitedError",
    "ReplayDivergedError",
    "RequestTimeoutError",
    "TooLargeError",
    "WrongTypeError",
    "error_from_jsonrpc",
]


class FilesRequestError(ToolError):
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

    #: The catalogue's kind of the class; ``None`` for a failure the contract does not name.
    kind: ClassVar[ErrorKind | None] = None
    default_code: ClassVar[int] = INTERNAL_ERROR
    default_name: ClassVar[str | None] = None

    def __init_subclass__(cls, *, kind: ErrorKind | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind, cls.default_code, cls.default_name = kind, kind.code, kind.name

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


class FileLockedError(FilesRequestError, kind=catalogue.FILE_LOCKED):
    """FILE_LOCKED: another connection or process holds the lock."""


class PermissionDeniedError(FilesRequestError, PermissionError, kind=catalogue.PERMISSION_DENIED):
    """PERMISSION_DENIED: outside the roots, not granted, read-only, sensitive ..."""


class NotFoundError(FilesRequestError, FileNotFoundError, kind=catalogue.NOT_FOUND):
    """NOT_FOUND: no such file inside a granted path, or an unknown lockId/watchId."""


class AlreadyExistsError(FilesRequestError, FileExistsError, kind=catalogue.ALREADY_EXISTS):
    """ALREADY_EXISTS: exclusive create or write, rename without overwrite."""


class PreconditionFailedError(FilesRequestError, kind=catalogue.PRECONDITION_FAILED):
    """PRECONDITION_FAILED: ``ifMatch`` does not match (or the file changed while read)."""


class WrongTypeError(FilesRequestError, kind=catalogue.WRONG_TYPE):
    """WRONG_TYPE: a directory where a file is needed, or the reverse."""


class TooLargeError(FilesRequestError, kind=catalogue.TOO_LARGE):
    """TOO_LARGE: one request over the client's limits (``data.maxBytes``)."""


class RateLimitedError(FilesRequestError, kind=catalogue.RATE_LIMITED):
    """RATE_LIMITED: over the connection's rate (``data.retryAfterMs``)."""


class ContentEncodingError(FilesRequestError, ValueError, kind=catalogue.ENCODING_ERROR):
    """ENCODING_ERROR: content not valid in the asked encoding."""


class InvalidParamsError(FilesRequestError, ValueError, kind=catalogue.INVALID_PARAMS):
    """JSON-RPC invalid params: malformed params (``data.expectedOffset`` for a bad chunk offset)."""


class MethodNotFoundError(FilesRequestError, NotImplementedError, kind=catalogue.METHOD_NOT_FOUND):
    """JSON-RPC method not found: the client does not know the method."""


class ClientInternalError(FilesRequestError, kind=catalogue.INTERNAL_ERROR):
    """JSON-RPC internal error: the client failed unexpectedly."""


class IntegrityError(ClientInternalError):
    """The client's answer contradicts itself or the request; its data cannot be trusted.

    Raised by the helper (never sent by a client): for instance a ``files/read``
    answer whose ``bytesRead`` is not the byte length of its ``content``, or
    whose ``offset`` is not the one asked for.
    """

    def __str__(self) -> str:
        return f"the client's answer cannot be trusted: {self.message}"


class RequestTimeoutError(FilesRequestError, TimeoutError):
    """No answer within the request's timeout (mcp's -32001); a cancellation was sent."""

    default_code = REQUEST_TIMEOUT


class ClientDisconnectedError(FilesRequestError, ConnectionError):
    """The connection closed before the answer arrived (mcp's -32000)."""

    default_code = CONNECTION_CLOSED


class FilesUnavailableError(MCPError):
    """The client does not broker files: -32603 with the message SEP-1708 prescribes.

    An :class:`~mcp.shared.exceptions.MCPError`, not a ``ToolError``: raised from a
    tool (or from the ``initialize`` middleware) it reaches the client as that
    JSON-RPC error, not as a tool result.
    """

    def __init__(
        self, message: str = MISSING_CAPABILITY_MESSAGE, *, modern_reason: str | None = None
    ) -> None:
        if modern_reason is None:
            super().__init__(code=INTERNAL_ERROR, message=message)
        else:  # the 2026-07-28 wire: FILES_UNAVAILABLE, outside the reserved range
            kind = catalogue.FILES_UNAVAILABLE
            super().__init__(
                code=kind.code, message=message, data={"error": kind.name, "reason": modern_reason}
            )


class ContinuationRefusedError(MCPError):
    """CONTINUATION_REFUSED: a modern call's continuation that cannot be opened for this call.

    Parameters
    ----------
    reason
        ``expired``, ``invalid`` or ``live_elsewhere`` (the call is held live by one instance,
        not this one, and its state is too large to carry); what exactly was wrong goes to the
        log only.
    """

    def __init__(self, reason: str) -> None:
        kind = catalogue.CONTINUATION_REFUSED
        message = {
            "expired": "the continuation has expired: call the tool again",
            "live_elsewhere": "this call is held by another instance of the server, and its state is "
            "too large to carry: route its continuations to the instance the continuation names "
            "(the Fsbroker-Instance header), or call the tool again",
        }.get(reason, "the continuation is not valid for this call")
        super().__init__(code=kind.code, message=message, data={"error": kind.name, "reason": reason})


class ReplayDivergedError(MCPError):
    """REPLAY_DIVERGED: a tool re-run over its recorded answers asked something it had not asked.

    A tool must make the same ``files/*`` calls, in the same order, given the same answers.
    """

    def __init__(self, tool: str) -> None:
        kind = catalogue.REPLAY_DIVERGED
        super().__init__(
            code=kind.code,
            message=(
                f"tool {tool!r}, run again over the answers it had, asked for other files operations "
                "than before; a tool must not let clocks, randomness or outside state decide its files calls"
            ),
            data={"error": kind.name, "reason": "diverged"},
        )


def _classes() -> dict[ErrorKind, type[FilesRequestError]]:
    """The class of each kind (the one that binds it; subclasses such as IntegrityError inherit)."""
    found: dict[ErrorKind, type[FilesRequestError]] = {}
    pending: list[type[FilesRequestError]] = [FilesRequestError]
    while pending:
        cls = pending.pop()
        if cls.kind is not None and "kind" in vars(cls):
            found[cls.kind] = cls
        pending.extend(cls.__subclasses__())
    return found


_BY_KIND = _classes()
_BY_CODE: dict[int, type[FilesRequestError]] = {
    cls.default_code: cls for cls in (RequestTimeoutError, ClientDisconnectedError)
}


def error_from_jsonrpc(
    code: int, message: str, data: Any = None, *, method: str | None = None
) -> FilesRequestError:
    """Return the typed exception for a JSON-RPC error answer.

    The catalogue reads the kind (:func:`~jupyter_fsbroker.wire.kind_of`: ``data.error``,
    else a message that is exactly a PROTOCOL.md name, else the code); mcp's own codes
    for a timeout and a closed connection give :class:`RequestTimeoutError` and
    :class:`ClientDisconnectedError`; other codes give a plain :class:`FilesRequestError`.

    Parameters
    ----------
    code, message, data
        The members of the JSON-RPC ``error`` object.
    method
        The ``files/*`` method that was answered.
    """
    mapping = cast("Mapping[str, Any]", data) if isinstance(data, Mapping) else {}
    kind = catalogue.kind_of(code, message, mapping)
    cls = _BY_KIND[kind] if kind is not None else _BY_CODE.get(code, FilesRequestError)
    return cls(message, code=code, data=mapping, method=method)
