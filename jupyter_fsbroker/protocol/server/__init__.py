"""Deprecated: the server kit is :mod:`jupyter_fsbroker.serverkit` (this name goes in the next release).

Importing ``jupyter_fsbroker.protocol.server`` (or one of its modules, by their old names) warns
once and gives the kit's own objects, not copies: ``except
jupyter_fsbroker.protocol.server.NotFound`` catches what the kit raises. The old module names are
aliases in :data:`sys.modules` rather than a second search path, because a module loaded twice
under two names would make two ``FilesRequestError`` classes.

The kit's exceptions were renamed (``NotFound`` is :class:`~jupyter_fsbroker.serverkit.NotFoundError`,
``FilesError`` is :class:`~jupyter_fsbroker.serverkit.FilesRequestError` …); their old names live
here only, as aliases of the new classes, on this package and on its ``errors`` module.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings

from ... import serverkit
from ...serverkit import *  # noqa: F403 - the same objects, under the old path
from ...serverkit import __all__ as _kit_all

warnings.warn(
    "jupyter_fsbroker.protocol.server is now jupyter_fsbroker.serverkit; "
    "the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

#: The old module names, and the kit's modules they now are.
_MOVED = {
    "capability": "capability",
    "chunks": "chunks",
    "client": "files_client",
    "connection": "peers",
    "direct": "direct",
    "errors": "exceptions",
    "inbound": "inbound",
    "locks": "locking",
    "mcp_internals": "mcp_internals",
    "policy": "retry",
    "requester": "requester",
    "results": "answers",
    "stdio": "stdio_server",
    "uploads": "writing",
    "watch": "subscription",
    "wire": "lenient",
}

#: The kit's exceptions by their names before the rename, and the names they have now.
_RENAMED = {
    "FilesError": "FilesRequestError",
    "FileLocked": "FileLockedError",
    "PermissionDenied": "PermissionDeniedError",
    "NotFound": "NotFoundError",
    "AlreadyExists": "AlreadyExistsError",
    "PreconditionFailed": "PreconditionFailedError",
    "WrongType": "WrongTypeError",
    "TooLarge": "TooLargeError",
    "RateLimited": "RateLimitedError",
    "EncodingError": "ContentEncodingError",
    "InvalidParams": "InvalidParamsError",
    "MethodNotFound": "MethodNotFoundError",
    "InternalError": "ClientInternalError",
    "RequestTimeout": "RequestTimeoutError",
    "ConnectionClosed": "ClientDisconnectedError",
    "FilesUnavailable": "FilesUnavailableError",
}

__all__ = [*_kit_all, *_RENAMED]

for _old_name, _new_name in _RENAMED.items():
    globals()[_old_name] = getattr(serverkit, _new_name)


class _OldErrors(types.ModuleType):
    """``jupyter_fsbroker.protocol.server.errors``: the kit's exceptions module, old names included."""

    def __getattr__(self, name: str) -> object:
        return getattr(serverkit.exceptions, _RENAMED.get(name, name))


for _old, _new in _MOVED.items():
    _module = importlib.import_module(f"{serverkit.__name__}.{_new}")
    if _old == "errors":
        _module = _OldErrors(f"{__name__}.errors", _module.__doc__)
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = _module


def __getattr__(name: str) -> object:
    """The kit's names outside ``__all__`` (a renamed one warns on its own)."""
    return getattr(serverkit, name)
