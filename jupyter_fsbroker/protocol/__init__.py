"""The MCP client: beside the server kit, the only part of jupyter_fsbroker that imports ``mcp``.

:mod:`.connector`, :mod:`.server_connection`, :mod:`.middleware` and their helpers
:mod:`.transports`, :mod:`.roots_offer`, :mod:`.roots_gate`, :mod:`.desk`,
:mod:`.voice`, :mod:`.stderr`, :mod:`.client_errors`, and :mod:`.sandboxing` (which starts a
local server confined) connect a :class:`~jupyter_fsbroker.core.broker.Broker` to an MCP
server over stdio or Streamable HTTP and answer the server's ``files/*`` requests through it::

    from jupyter_fsbroker.protocol import connect

    conn = await connect(broker, "analysis", url="https://example.org/mcp")
    result = await conn.call_tool("profile_csv", {"path": "data/sales.csv"})
    await conn.aclose()

The names below are imported lazily, so that importing one module of the package does not
load the client and the core. (``protocol.server`` is the server kit's old name, kept one
release: it loads the kit, not the client.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .client_errors import ConnectError, ConnectionClosedError, ProtocolVersionError, ServerError
    from .connector import connect, open_connection
    from .middleware import ROOTS_CAPABILITY, BrokerMiddleware
    from .roots_gate import RootsGrace
    from .server_connection import ConnectionState, ServerConnection, TransportKind

__all__ = [
    "ROOTS_CAPABILITY",
    "BrokerMiddleware",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionState",
    "ProtocolVersionError",
    "RootsGrace",
    "ServerConnection",
    "ServerError",
    "TransportKind",
    "connect",
    "open_connection",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "ROOTS_CAPABILITY": ".middleware",
        "BrokerMiddleware": ".middleware",
        "ConnectError": ".client_errors",
        "ConnectionClosedError": ".client_errors",
        "ConnectionState": ".server_connection",
        "ProtocolVersionError": ".client_errors",
        "RootsGrace": ".roots_gate",
        "ServerConnection": ".server_connection",
        "ServerError": ".client_errors",
        "TransportKind": ".server_connection",
        "connect": ".connector",
        "open_connection": ".connector",
    },
)
