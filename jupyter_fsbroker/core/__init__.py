"""The protocol-independent core: roots, paths, grants, operations, locks, watches, audit.

Nothing here imports Jupyter or ``mcp``; the protocol and kernel layers build on it.
The entry point is :class:`Broker`: ``broker.connect(server)`` gives a
:class:`Connection` whose :meth:`~Connection.handle` answers one ``files/*`` request.
"""

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
