"""The protocol layer: the only part of jupyter_fsbroker that imports ``mcp``.

Client side (:mod:`.client`, :mod:`.middleware`): connect a
:class:`~jupyter_fsbroker.core.broker.Broker` to an MCP server over stdio or
Streamable HTTP and answer the server's ``files/*`` requests through it::

    from jupyter_fsbroker.protocol import connect

    conn = await connect(broker, "analysis", url="https://example.org/mcp")
    result = await conn.call_tool("profile_csv", {"path": "data/sales.csv"})
    await conn.aclose()

The names below are imported lazily, so that importing a sibling module (the
server-side helper) does not load the client and the core.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import (
        ConnectError,
        ConnectionClosedError,
        ConnectionState,
        ProtocolVersionError,
        ServerConnection,
        ServerError,
        TransportKind,
        connect,
        open_connection,
    )
    from .middleware import ROOTS_CAPABILITY, BrokerMiddleware

__all__ = [
    "ROOTS_CAPABILITY",
    "BrokerMiddleware",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionState",
    "ProtocolVersionError",
    "ServerConnection",
    "ServerError",
    "TransportKind",
    "connect",
    "open_connection",
]

_LAZY = {
    "ROOTS_CAPABILITY": "middleware",
    "BrokerMiddleware": "middleware",
    "ConnectError": "client",
    "ConnectionClosedError": "client",
    "ConnectionState": "client",
    "ProtocolVersionError": "client",
    "ServerConnection": "client",
    "ServerError": "client",
    "TransportKind": "client",
    "connect": "client",
    "open_connection": "client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
