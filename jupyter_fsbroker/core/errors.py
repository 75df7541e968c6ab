"""The error tree of jupyter_fsbroker, and its mapping to JSON-RPC.

Two families share one base class, :class:`BrokerError`:

* :class:`FilesError` and its subclasses are answers to a ``files/*`` request.
  Each carries the name, the JSON-RPC code and the ``data`` that PROTOCOL.md
  specifies; :func:`to_jsonrpc_error` is the one place that turns them into a
  JSON-RPC error object.
* :class:`ConfigError` and :class:`ClosedError` are for the notebook user
  (a root that cannot be added, an object used after ``close()``); they never
  go on the wire.

Messages are for people. They never contain file content, nor any absolute
path outside the roots: ``data.path`` is always the path as the request wrote it.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "BrokerError",
    "ClosedError",
    "ConfigError",
    "EncodingError",
    "FileLocked",
    "FilesError",
    "InternalError",
    "InvalidParams",
    "MethodNotFound",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "TooLarge",
    "WrongType",
    "from_os_error",
    "to_jsonrpc_error",
]


class BrokerError(Exception):
    """Base class of every error jupyter_fsbroker raises on purpose."""


class ConfigError(BrokerError, ValueError):
    """A setting or argument the user gave cannot be used (a bad root, a bad limit)."""


class ClosedError(BrokerError, RuntimeError):
    """The broker, connection or resource was used after it was closed."""


class FilesError(BrokerError):
    """An error answer to a ``files/*`` request.

    Parameters
    ----------
    message
        A sentence for people. Never file content, never an outside path.
    reason
        A snake_case detail (``outside_roots``, ``not_granted``, ...), sent as
        ``data.reason``.
    path
        The path as the request wrote it, sent as ``data.path``.
    **data
        Further ``data`` members (``lockedBy``, ``retryAfterMs``, ``maxBytes``,
        ``expectedOffset`` ...), already in their wire spelling.
    """

    #: The PROTOCOL.md name, sent as ``data.error``; ``None`` for plain JSON-RPC errors.
    name: ClassVar[str | None] = None
    #: The JSON-RPC error code.
    code: ClassVar[int] = -32603
    #: The reason used when none is given.
    default_reason: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        path: str | None = None,
        **data: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.path = path
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, reason={self.reason!r}, path={self.path!r})"


class FileLocked(FilesError):
    """Another connection or process holds a conflicting lock."""

    name = "FILE_LOCKED"
    code = -32100
    default_reason = "locked"


class PermissionDenied(FilesError):
    """Outside the roots, not granted, read-only, sensitive, special, escaping."""

    name = "PERMISSION_DENIED"
    code = -32101
    default_reason = "not_granted"


class NotFound(FilesError):
    """No such file inside a granted path, or an unknown lockId or watchId."""

    name = "NOT_FOUND"
    code = -32102
    default_reason = "not_found"


class AlreadyExists(FilesError):
    """Exclusive create or write, or rename onto an existing path without ``overwrite``."""

    name = "ALREADY_EXISTS"
    code = -32103
    default_reason = "exists"


class PreconditionFailed(FilesError):
    """``ifMatch`` does not match the current etag."""

    name = "PRECONDITION_FAILED"
    code = -32104
    default_reason = "etag_mismatch"


class WrongType(FilesError):
    """A directory where a file is needed, or the reverse."""

    name = "WRONG_TYPE"
    code = -32105
    default_reason = "wrong_type"


class TooLarge(FilesError):
    """A single request over the limits (``data.maxBytes``)."""

    name = "TOO_LARGE"
    code = -32106
    default_reason = "too_large"


class RateLimited(FilesError):
    """Over the connection's operation or byte rate (``data.retryAfterMs``)."""

    name = "RATE_LIMITED"
    code = -32107
    default_reason = "rate_limited"


class EncodingError(FilesError):
    """Content that is not valid in the asked encoding."""

    name = "ENCODING_ERROR"
    code = -32108
    default_reason = "invalid_content"


class InvalidParams(FilesError):
    """Malformed params: a missing or mistyped field, a bad offset (JSON-RPC -32602)."""

    code = -32602
    default_reason = "invalid_params"


class MethodNotFound(FilesError):
    """An unknown ``files/*`` method (JSON-RPC -32601)."""

    code = -32601
    default_reason = "unknown_method"


class InternalError(FilesError):
    """Anything unexpected (JSON-RPC -32603); the details stay in the local log."""

    code = -32603
    default_reason = "internal_error"


def to_jsonrpc_error(error: FilesError) -> dict[str, Any]:
    """Return the JSON-RPC ``error`` object for *error*.

    The result is ``{"code": ..., "message": ..., "data": {...}}`` with
    ``data.error`` (the PROTOCOL.md name, for named errors), ``data.reason``,
    ``data.path`` (when known) and the error's further data members.
    """
    data: dict[str, Any] = {}
    if error.name is not None:
        data["error"] = error.name
    data["reason"] = error.reason
    if error.path is not None:
        data["path"] = error.path
    data.update(error.data)
    return {"code": error.code, "message": error.message, "data": data}


def from_os_error(exc: OSError, path: str | None = None) -> FilesError:
    """Translate an :class:`OSError` met while serving *path* into a :class:`FilesError`.

    The message names the request's own path only: the OS message may carry an
    absolute path, so it is not used.
    """
    import errno

    shown = path if path is not None else "the path"
    match exc.errno:
        case errno.ENOENT:
            return NotFound(f"{shown} does not exist", path=path)
        case errno.EEXIST | errno.ENOTEMPTY:
            if exc.errno == errno.ENOTEMPTY:
                return AlreadyExists(
                    f"{shown} is a directory that is not empty", reason="not_empty", path=path
                )
            return AlreadyExists(f"{shown} exists already", path=path)
        case errno.EISDIR:
            return WrongType(f"{shown} is a directory", reason="is_directory", path=path)
        case errno.ENOTDIR:
            return WrongType(f"{shown} is not a directory", reason="not_a_directory", path=path)
        case errno.EACCES | errno.EPERM | errno.EROFS:
            return PermissionDenied(
                f"the operating system refused access to {shown}", reason="os_permission", path=path
            )
        case errno.ELOOP:
            return PermissionDenied(f"{shown} is a symbolic link here", reason="symlink", path=path)
        case errno.ENAMETOOLONG:
            return InvalidParams(f"{shown} has a name that is too long", reason="name_too_long", path=path)
        case errno.ENOSPC | errno.EDQUOT:
            # The request does not fit: TOO_LARGE, which a server does not repeat blindly (writes
            # are atomic, so nothing was changed); not -32603, which is for the unexpected.
            return TooLarge(
                f"the file system is full (no space or quota left) for {shown}", reason="no_space", path=path
            )
        case errno.EFBIG:
            return TooLarge(
                f"{shown} would grow past the largest file size allowed here",
                reason="file_too_large",
                path=path,
                **_file_size_limit(),
            )
        case errno.EINVAL:
            return InvalidParams(
                f"{shown}: the operation is not possible here", reason="invalid_operation", path=path
            )
        case errno.EXDEV:
            return InternalError(
                f"{shown} cannot be moved across filesystems", reason="cross_device", path=path
            )
        case _:
            return InternalError(
                f"the operation on {shown} failed ({errno.errorcode.get(exc.errno or 0, 'error')})", path=path
            )


def _file_size_limit() -> dict[str, int]:
    """``{"maxBytes": n}`` when this process has a file size limit (``RLIMIT_FSIZE``), else nothing."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a POSIX platform
        return {}
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return {} if soft == resource.RLIM_INFINITY else {"maxBytes": soft}


def to_files_error(exc: BaseException, path: str | None = None) -> FilesError:
    """The answer to send for *exc*, raised while serving *path*: the one mapping of the envelope.

    A :class:`FilesError` is its own answer; a :class:`ClosedError` (the connection or the
    broker closed under the request) is PERMISSION_DENIED ``connection_closed``; an
    :class:`OSError` is translated by :func:`from_os_error`; anything else is an
    :class:`InternalError`, which says nothing of what went wrong (the caller logs it).
    """
    if isinstance(exc, FilesError):
        return exc
    if isinstance(exc, ClosedError):
        return PermissionDenied("the connection is closed", reason="connection_closed", path=path)
    if isinstance(exc, OSError):
        return from_os_error(exc, path)
    return InternalError("the request failed unexpectedly", path=path)
