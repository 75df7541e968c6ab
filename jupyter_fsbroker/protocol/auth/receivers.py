"""Where the authorization server's redirect comes back: :class:`LoopbackReceiver`.

RFC 8252's loopback redirect for native apps: a listener on ``127.0.0.1`` (never all
interfaces) at a port chosen by the system; the redirect URI is
``http://127.0.0.1:<port>/callback``. Any local process can reach that port, so a request is
taken only if its ``state`` is the one of the sign-in in progress; anything else is answered
``404``/``400`` and ignored (never fatal: a stray request must not end a sign-in). Each
sign-in takes one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

__all__ = ["AuthorizationResponse", "LoopbackReceiver"]

_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Signed in</title>"
    b"<p>Signed in. You can close this tab and go back to jupyter-fsbroker.</p>"
)
# A request line and headers larger than this are not a browser's redirect.
_MAX_REQUEST = 16384


@dataclass(frozen=True)
class AuthorizationResponse:
    """The redirect's parameters (RFC 6749 §4.1.2, RFC 9207 ``iss``). ``repr`` hides the code."""

    code: str = field(repr=False)
    state: str
    iss: str | None = None


class LoopbackReceiver:
    """A loopback listener for authorization redirects, open from :meth:`start` to :meth:`aclose`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._server: asyncio.Server | None = None
        self._expected: str | None = None
        self._answer: asyncio.Future[AuthorizationResponse] | None = None

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}/callback"

    async def start(self, port: int = 0) -> None:
        """Listen on *port* (``0``: any free one; a taken one falls back to any)."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, port)
        except OSError:
            if port == 0:
                raise
            self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def expect(self, state: str) -> None:
        """Wait for the redirect of the sign-in whose ``state`` is *state* (replacing any earlier one)."""
        self._expected = state
        self._answer = asyncio.get_running_loop().create_future()

    async def wait(self, timeout: float) -> AuthorizationResponse:
        """The redirect :meth:`expect` waits for; ``TimeoutError`` after *timeout* seconds."""
        if self._answer is None:
            raise RuntimeError("expect() the sign-in's state first")
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(self._answer)
        finally:
            self._expected = None

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body = self._take(head[:_MAX_REQUEST])
            writer.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, b"OK" if status == 200 else b"Not Found", len(body), body)
            )
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _take(self, head: bytes) -> tuple[int, bytes]:
        """The status and page for one request; completes the sign-in if it is its redirect."""
        method, _, rest = head.partition(b" ")
        target = rest.partition(b" ")[0].decode("latin-1")
        parts = urlsplit(target)
        if method != b"GET" or parts.path != "/callback":
            return 404, b"not found"
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        state = query.get("state", "")
        expected, answer = self._expected, self._answer
        if expected is None or answer is None or answer.done() or not secrets.compare_digest(state, expected):
            return 404, b"no sign-in is waiting for this answer"
        answer.set_result(AuthorizationResponse(query.get("code", ""), state, query.get("iss")))
        return 200, _PAGE
