"""Serving an MCP server over Streamable HTTP from the command line: ``HOST:PORT``, a socket bound first.

The socket is bound before the server is built, so that port 0 gives a free port that no
other process can take meanwhile, and a URL that names it (an OAuth resource names its URL).
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["endpoint", "host_port", "listen", "serve", "serve_http"]


def host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets) as a host and a port, for argparse."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on *host*:*port* (port 0: a free one, kept from now on)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def serve_http(server: MCPServer[Any], host: str, port: int, *, stateless: bool = False) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted.

    The server binds the socket itself and says where it listens on stderr
    (``analysis server: listening on http://127.0.0.1:PORT/mcp``), so that
    port 0 gives a free port that no other process can take meanwhile.
    """
    serve(server, listen(host, port), host, stateless=stateless)


def endpoint(sock: socket.socket) -> str:
    """The ``http://HOST:PORT/mcp`` URL of a bound socket."""
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if sock.family == socket.AF_INET6 else bound[0]
    return f"http://{shown}:{bound[1]}/mcp"


def serve(server: MCPServer[Any], sock: socket.socket, host: str, *, stateless: bool = False) -> None:
    """Serve *server* on the bound *sock* until interrupted, saying where on stderr."""
    import uvicorn

    print(f"analysis server: listening on {endpoint(sock)}", file=sys.stderr, flush=True)
    app = server.streamable_http_app(host=host, stateless_http=stateless)
    config = uvicorn.Config(app, log_level=server.settings.log_level.lower(), lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
