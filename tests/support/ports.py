"""TCP ports that nobody else can take: bound before they are handed out.

Asking the OS for a free port, closing the socket and handing out the number
leaves a window in which another process can take it. Instead:

* a server we start in-process gets a socket that is already **listening**
  (:func:`listening_socket`; uvicorn: ``Server.serve(sockets=[sock])``);
* a server in a subprocess either inherits that socket (``pass_fds``) or binds
  port 0 itself and reports the port it got;
* a port that must refuse connections stays **bound but not listening** for as
  long as it is used (:func:`refusing_port`).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

LOOPBACK = "127.0.0.1"


def listening_socket(host: str = LOOPBACK, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to a port the OS chose, already listening (and inheritable).

    Connections made before the server starts accepting wait in the backlog.
    The caller owns the socket and closes it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def port_of(sock: socket.socket) -> int:
    """The port *sock* is bound to."""
    port: int = sock.getsockname()[1]
    return port


@contextmanager
def refusing_port(host: str = LOOPBACK) -> Iterator[int]:
    """A port on which every connection is refused, and that no one else can bind meanwhile."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))  # bound, never listening: connections get RST
        yield port_of(sock)
    finally:
        sock.close()
