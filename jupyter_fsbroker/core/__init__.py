"""The protocol-independent core: roots, paths, grants, operations, locks, watches, audit.

Nothing here imports Jupyter or ``mcp``; the protocol and kernel layers build on it.
The entry point is :class:`Broker`: ``broker.connect(server)`` gives a
:class:`Connection` whose :meth:`~Connection.handle` answers one ``files/*`` request.

The names below are imported on first use, so that importing one module of the core (its
errors, its limits) does not load the others, watchdog and portalocker among them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .audit import AuditLog, AuditRecord
    from .broker import Broker
    from .config import BrokerConfig
    from .connection import Connection
    from .consent import (
        CallbackConsenter,
        ConsentDecision,
        Consenter,
        ConsentItem,
        ConsentRequest,
        DenyingConsenter,
    )
    from .errors import (
        AlreadyExists,
        BrokerError,
        ClosedError,
        ConfigError,
        EncodingError,
        FileLocked,
        FilesError,
        InternalError,
        InvalidParams,
        MethodNotFound,
        NotFound,
        PermissionDenied,
        PreconditionFailed,
        RateLimited,
        TooLarge,
        WrongType,
        to_jsonrpc_error,
    )
    from .grants import OPERATIONS, Grant
    from .holds import LockInfo
    from .limits import Limits
    from .rootpath import RootPath
    from .roots import Root
    from .sensitive import DEFAULT_SENSITIVE_PATTERNS, SensitiveNames
    from .transfers import Transfer
    from .trashcan import TrashCan
    from .trashentry import TrashEntry
    from .watch import ChangeEvent, WatchInfo

__all__ = [
    "DEFAULT_SENSITIVE_PATTERNS",
    "OPERATIONS",
    "AlreadyExists",
    "AuditLog",
    "AuditRecord",
    "Broker",
    "BrokerConfig",
    "BrokerError",
    "CallbackConsenter",
    "ChangeEvent",
    "ClosedError",
    "ConfigError",
    "Connection",
    "ConsentDecision",
    "ConsentItem",
    "ConsentRequest",
    "Consenter",
    "DenyingConsenter",
    "EncodingError",
    "FileLocked",
    "FilesError",
    "Grant",
    "InternalError",
    "InvalidParams",
    "Limits",
    "LockInfo",
    "MethodNotFound",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "Root",
    "RootPath",
    "SensitiveNames",
    "TooLarge",
    "Transfer",
    "TrashCan",
    "TrashEntry",
    "WatchInfo",
    "WrongType",
    "to_jsonrpc_error",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "DEFAULT_SENSITIVE_PATTERNS": ".sensitive",
        "OPERATIONS": ".grants",
        "AlreadyExists": ".errors",
        "AuditLog": ".audit",
        "AuditRecord": ".audit",
        "Broker": ".broker",
        "BrokerConfig": ".config",
        "BrokerError": ".errors",
        "CallbackConsenter": ".consent",
        "ChangeEvent": ".watch",
        "ClosedError": ".errors",
        "ConfigError": ".errors",
        "Connection": ".connection",
        "ConsentDecision": ".consent",
        "ConsentItem": ".consent",
        "ConsentRequest": ".consent",
        "Consenter": ".consent",
        "DenyingConsenter": ".consent",
        "EncodingError": ".errors",
        "FileLocked": ".errors",
        "FilesError": ".errors",
        "Grant": ".grants",
        "InternalError": ".errors",
        "InvalidParams": ".errors",
        "Limits": ".limits",
        "LockInfo": ".holds",
        "MethodNotFound": ".errors",
        "NotFound": ".errors",
        "PermissionDenied": ".errors",
        "PreconditionFailed": ".errors",
        "RateLimited": ".errors",
        "Root": ".roots",
        "RootPath": ".rootpath",
        "SensitiveNames": ".sensitive",
        "TooLarge": ".errors",
        "Transfer": ".transfers",
        "TrashCan": ".trashcan",
        "TrashEntry": ".trashentry",
        "WatchInfo": ".watch",
        "WrongType": ".errors",
        "to_jsonrpc_error": ".errors",
    },
)
