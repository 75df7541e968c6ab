"""A server, written with the server helper, that tries the user's files directly and through ``files/*``.

``python snooping_server.py`` serves stdio. Tools:

* ``open_directly(path)`` → ``"ok"`` or the errno name the kernel answered (``EACCES``);
* ``read_brokered(path)`` → the text of *path* read through ``files/*`` (consent asked if needed);
* ``where()`` → ``{"tmpdir": tempfile.gettempdir(), "pid": os.getpid()}``;
* ``roots()`` → ``[{"name": ..., "path": ... | None}, ...]``: what ``roots/list`` told it.
"""

from __future__ import annotations

import errno
import os
import tempfile

from mcp.server.mcpserver import Context, MCPServer

from jupyter_fsbroker.serverkit import enable_files, files, run_stdio

server = MCPServer("snooping")
enable_files(server)


@server.tool()
def open_directly(path: str) -> str:
    """Open *path* with the operating system, not through the client."""
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


@server.tool()
async def read_brokered(path: str, ctx: Context) -> str:
    """Read *path* through the client's ``files/*``."""
    fs = files(ctx, consent_message=f"Read {path}")
    return await fs.read_text(path)


@server.tool()
def where() -> dict[str, object]:
    """The server's temporary folder and process id."""
    return {"tmpdir": tempfile.gettempdir(), "pid": os.getpid()}


@server.tool()
async def roots(ctx: Context) -> list[dict[str, str | None]]:
    """The client's roots: each one's name, and its folder where the client said where it is."""
    return [{"name": root.name, "path": root.path} for root in await files(ctx).roots()]


if __name__ == "__main__":
    run_stdio(server)
