"""The error tree of jupyter_fsbroker, and its mapping to JSON-RPC.

Two families share one base class, :class:`BrokerError`:

* :class:`FilesError` and its subclasses are answers to a ``files/*`` request.
  Each is a shell of one kind of the wire's error catalogue
  (:mod:`jupyter_fsbroker.wire.catalogue`), which holds its name, JSON-RPC code and
  reasons; :func:`to_jsonrpc_error` turns one into a JSON-RPC error object with the
  catalogue's one encoder, and :func:`to_files_error` turns any exception met while
  serving a request into the answer it gets.
* :class:`ConfigError` and :class:`ClosedError` are for the notebook user
  (a root that cannot be added, an object used after ``close()``); they never
  go on the wire.

Messages are for people. They never contain file content, nor any absolute
path outside the roots: ``data.path`` is always the path as the request wrote it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..wire import catalogue
from ..wire.catalogue import ErrorKind, error_object

__all__ = [
    "DETAILS_HINT",
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
    "to_files_error",
    "to_jsonrpc_error",
]


#: The line under an error's short form in IPython, saying where its traceback went.
DETAILS_HINT = "(the full traceback: %fsbroker why)"


class BrokerError(Exception):
    """Base class of every error jupyter_fsbroker raises on purpose.

    IPython shows one as a short message (:meth:`_render_traceback_`), not a
    traceback through the package: it is an expected failure, said in the user's
    words. ``%fsbroker why`` prints the full traceback of the last one.
    """

    def _render_traceback_(self) -> list[str]:
        """The lines IPython shows instead of the traceback (in a notebook and a terminal).

        ANSI-styled as IPython's own tracebacks are: the error's name in red,
        its message, and a dim line saying where the details are.
        """
        message = str(self) or type(self).__name__
        first, _, rest = message.partition("\n")
        lines = [f"\x1b[1;31m{type(self).__name__}\x1b[0m: {first}"]
        lines.extend(rest.splitlines())
        lines.append(f"\x1b[2m{DETAILS_HINT}\x1b[0m")
        return lines


class ConfigError(BrokerError, ValueError):
    """A setting or argument the user gave cannot be used (a bad root, a bad limit)."""


class ClosedError(BrokerError, RuntimeError):
    """The broker, connection or resource was used after it was closed."""


class FilesError(BrokerError):
    """An error answer to a ``files/*`` request.

    Each subclass binds one kind of :mod:`jupyter_fsbroker.wire.catalogue`
    (``class NotFound(FilesError, kind=catalogue.NOT_FOUND)``), whose name, code and
    default reason it reads; this base class answers as the ``INTERNAL_ERROR`` kind.

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

    #: The kind of answer, from the wire's catalogue.
    kind: ClassVar[ErrorKind] = catalogue.INTERNAL_ERROR
    #: The PROTOCOL.md name, sent as ``data.error``; ``None`` for plain JSON-RPC errors.
    name: ClassVar[str | None] = kind.name
    #: The JSON-RPC error code.
    code: ClassVar[int] = kind.code
    #: The reason used when none is given.
    default_reason: ClassVar[str] = kind.default_reason

    def __init_subclass__(cls, *, kind: ErrorKind | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind, cls.name, cls.code, cls.default_reason = kind, kind.name, kind.code, kind.default_reason

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


class FileLocked(FilesError, kind=catalogue.FILE_LOCKED):
    """Another connection or process holds a conflicting lock."""


class PermissionDenied(FilesError, kind=catalogue.PERMISSION_DENIED):
    """Outside the roots, not granted, read-only, sensitive, special, escaping."""


class NotFound(FilesError, kind=catalogue.NOT_FOUND):
    """No such file inside a granted path, or an unknown lockId or watchId."""


class AlreadyExists(FilesError, kind=catalogue.ALREADY_EXISTS):
    """Exclusive create or write, or rename onto an existing path without ``overwrite``."""


class PreconditionFailed(FilesError, kind=catalogue.PRECONDITION_FAILED):
    """``ifMatch`` does not match the current etag."""


class WrongType(FilesError, kind=catalogue.WRONG_TYPE):
    """A directory where a file is needed, or the reverse."""


class TooLarge(FilesError, kind=catalogue.TOO_LARGE):
    """A single request over the limits (``data.maxBytes``)."""


class RateLimited(FilesError, kind=catalogue.RATE_LIMITED):
    """Over the connection's operation or byte rate (``data.retryAfterMs``)."""


class EncodingError(FilesError, kind=catalogue.ENCODING_ERROR):
    """Content that is not valid in the asked encoding."""


class InvalidParams(FilesError, kind=catalogue.INVALID_PARAMS):
    """Malformed params: a missing or mistyped field, a bad offset (JSON-RPC -32602)."""


class MethodNotFound(FilesError, kind=catalogue.METHOD_NOT_FOUND):
    """An unknown ``files/*`` method (JSON-RPC -32601)."""


class InternalError(FilesError, kind=catalogue.INTERNAL_ERROR):
    """Anything unexpected (JSON-RPC -32603); the details stay in the local log."""


def to_jsonrpc_error(error: FilesError) -> dict[str, Any]:
    """Return the JSON-RPC ``error`` object for *error* (:func:`~jupyter_fsbroker.wire.error_object`).

    The result is ``{"code": ..., "message": ..., "data": {...}}`` with
    ``data.error`` (the PROTOCOL.md name, for named errors), ``data.reason``,
    ``data.path`` (when known) and the error's further data members.
    """
    return error_object(error.kind, error.message, reason=error.reason, path=error.path, **error.data)


def to_files_error(exc: BaseException, path: str | None = None) -> FilesError:
    """The error answer for *exc*, raised while serving a request for *path*: the one mapping.

    A :class:`FilesError` is answered as it is; a :class:`ClosedError` (the broker or
    the connection closed under the request) is PERMISSION_DENIED with reason
    ``connection_closed``; an :class:`OSError` is translated by :func:`from_os_error`;
    anything else is an :class:`InternalError` whose message names no detail (the
    details belong in the local log).
    """
    if isinstance(exc, FilesError):
        return exc
    if isinstance(exc, ClosedError):
        return PermissionDenied("the connection is closed", reason=catalogue.CONNECTION_CLOSED, path=path)
    if isinstance(exc, OSError):
        return from_os_error(exc, path)
    return InternalError("the request failed unexpectedly", path=path)


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
