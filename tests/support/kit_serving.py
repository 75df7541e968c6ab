"""The command line of the kit's test servers: stdio, or ``--http HOST:PORT`` as the example server."""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.mcpserver import MCPServer

from jupyter_fsbroker.examples.http_serving import serve_http
from jupyter_fsbroker.serverkit import run_stdio

__all__ = ["serve_from_argv"]


def serve_from_argv(server: MCPServer[Any]) -> None:
    """Serve *server* over stdio, or over Streamable HTTP where ``--http HOST:PORT`` says (port 0: any)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    args = parser.parse_args()
    if args.http is None:
        run_stdio(server)
        return
    host, _, port = args.http.rpartition(":")
    serve_http(server, host, int(port))
