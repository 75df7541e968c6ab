"""Whether the browser of a page on a loopback origin reaches this kernel's ``127.0.0.1``.

A JupyterLab page at ``http://127.0.0.1:8888`` is not proof that the kernel runs on the
browser's machine: through an SSH tunnel (``ssh -L 8888:localhost:8888 host``) the page is
local and the kernel remote, and a loopback redirect would never reach it. :func:`reaches_loopback`
opens a throwaway listener on ``127.0.0.1``, asks the panel (``ask``) to fetch
``http://127.0.0.1:<port>/probe/<nonce>``, and says whether that request arrived within
:data:`PROBE_TIMEOUT` seconds. Only a request carrying the nonce counts: any local process can
connect to the port. The panel fetches only from a loopback page (a page elsewhere would make
the browser ask the person about local network access).
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from collections.abc import Callable

__all__ = ["PROBE_TIMEOUT", "reaches_loopback"]

#: Seconds the panel's fetch has to arrive (a loaded machine is slow; a miss only means the
#: callback page is used, which works on the browser's machine too).
PROBE_TIMEOUT = 2.0
# A browser's request line and headers fit in this.
_MAX_REQUEST = 8192
_NO_CONTENT = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def reaches_loopback(ask: Callable[[str], object], timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a fetch of the URL handed to *ask* reached this machine's ``127.0.0.1`` in time."""
    nonce = secrets.token_urlsafe(16)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        expected = f"GET /probe/{nonce} ".encode()
        ask(f"http://127.0.0.1:{listener.getsockname()[1]}/probe/{nonce}")
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            listener.settimeout(left)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return False
            with conn:
                if _request_line(conn, deadline).startswith(expected):
                    with contextlib.suppress(OSError):
                        conn.sendall(_NO_CONTENT)
                    return True
    return False


def _request_line(conn: socket.socket, deadline: float) -> bytes:
    """The first line of what *conn* sends before *deadline* (empty if nothing came)."""
    data = b""
    while b"\r\n" not in data and len(data) < _MAX_REQUEST:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(_MAX_REQUEST)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0] if b"\r\n" in data else b""
