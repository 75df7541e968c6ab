"""jupyter_fsbroker: a Jupyter kernel as a safe MCP client for brokered filesystem access.

The names below are the public API. The engine is :class:`Broker`: it holds
the shared folders (roots), the grants, locks, watches and audit log, and
answers the ``files/*`` requests of each server connection.
"""

from .core import (
    Broker,
    BrokerConfig,
    BrokerError,
    CallbackConsenter,
    ChangeEvent,
    ConfigError,
    ConsentDecision,
    Consenter,
    ConsentRequest,
    FilesError,
    Grant,
    Limits,
    Root,
    SensitiveNames,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "Broker",
    "BrokerConfig",
    "BrokerError",
    "CallbackConsenter",
    "ChangeEvent",
    "ConfigError",
    "ConsentDecision",
    "ConsentRequest",
    "Consenter",
    "FilesError",
    "Grant",
    "Limits",
    "Root",
    "SensitiveNames",
    "__version__",
]
