"""The only two places where the helper reaches past mcp 2.3's public API.

mcp 2.3 offers no public way to reach either, and the helper cannot work
without them. Each is one small function here, nowhere else; the canary test
``test_mcp_internals_the_helper_relies_on_are_there`` calls both, so an mcp
release that moves them fails loudly instead of silently disabling ``files(ctx)``
or :func:`~.stdio_server.run_stdio`. Never add a third without a canary.
"""

from __future__ import annotations

from typing import Any, cast

from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

__all__ = ["connection_state", "lowlevel_server"]


def connection_state(session: object) -> dict[str, Any] | None:
    """The per-connection scratch ``state`` dict of mcp's ``Connection``, or ``None``.

    ``ServerSession`` is built anew for every request; only its private
    ``_connection`` lives as long as the client's connection, and neither the
    session nor an ``MCPServer`` tool's ``Context`` exposes it (the low-level
    ``Context.connection`` exists, but is not what tools and middleware
    receive). A public ``connection`` attribute is preferred should a later mcp
    add one.
    """
    connection = getattr(session, "connection", None)
    if connection is None:
        connection = getattr(session, "_connection", None)
    state = getattr(connection, "state", None)
    return cast("dict[str, Any]", state) if isinstance(state, dict) else None


def lowlevel_server(server: MCPServer[Any] | Server[Any]) -> Server[Any]:
    """The low-level ``Server`` that serves *server*, to run it on streams of our own.

    ``MCPServer`` runs its low-level server only on mcp's own transports; mcp's
    in-memory client reaches ``_lowlevel_server`` the same way.
    """
    if isinstance(server, Server):
        return server
    return server._lowlevel_server
