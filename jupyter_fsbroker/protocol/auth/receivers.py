"""Where the authorization server's redirect comes back: :class:`LoopbackReceiver`.

RFC 8252's loopback redirect for native apps: a listener on ``127.0.0.1`` (never all
interfaces) at a port chosen by the system; the redirect URI is
``http://127.0.0.1:<port>/callback``. Any local process can reach that port, so a request is
taken only if its ``state`` is the one of the sign-in in progress; anything else is answered
``404``/``400`` and ignored (never fatal: a stray request must not end a sign-in). Each
sign-in takes one answer.

The browser that brought the answer is told how the sign-in ended, not merely that the
answer arrived: the flow still checks ``iss`` and exchanges the code after it. Its page
waits for the flow's verdict (:meth:`LoopbackReceiver.conclude`): "Signed in" once the
tokens are in hand, "Sign-in failed: <why>" otherwise, and after
:data:`VERDICT_TIMEOUT` seconds without one a neutral "Sign-in received".
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

__all__ = ["VERDICT_TIMEOUT", "AuthorizationResponse", "LoopbackReceiver"]

#: How long the browser's page waits for the flow's verdict before a neutral answer.
VERDICT_TIMEOUT = 30.0
_APP = "jupyter-fsbroker"
_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}
# The verdict when the flow gave none (it moved on, or the receiver closed): the neutral page.
_NO_VERDICT = ""
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

    def __init__(self, host: str = "127.0.0.1", *, verdict_timeout: float = VERDICT_TIMEOUT) -> None:
        self.host = host
        self.port = 0
        self.verdict_timeout = verdict_timeout
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expected: str | None = None
        self._answer: asyncio.Future[AuthorizationResponse] | None = None
        # The failure's words (``None``: signed in; ``_NO_VERDICT``: unknown) for the page of the
        # answer taken.
        self._verdict: asyncio.Future[str | None] | None = None
        self._serving: set[asyncio.Task[object]] = set()

    async def __aenter__(self) -> LoopbackReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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
        self._loop = asyncio.get_running_loop()
        self._no_verdict()  # an earlier sign-in's page, if one waits still: the flow moved on
        self._expected = state
        self._answer = self._loop.create_future()
        self._verdict = self._loop.create_future()

    def conclude(self, failure: str | None) -> None:
        """The flow's verdict for the page of the answer taken (any thread).

        *failure* is ``None`` once the tokens were obtained, else the words of why the sign-in
        failed (a :class:`~.sign_in_errors.SignInError`'s fixed text: never a state, code or
        token). Nothing once a verdict was given.
        """
        verdict, loop = self._verdict, self._loop
        if verdict is None or loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._give(verdict, failure)
        else:
            loop.call_soon_threadsafe(self._give, verdict, failure)

    @staticmethod
    def _give(verdict: asyncio.Future[str | None], failure: str | None) -> None:
        if not verdict.done():
            verdict.set_result(failure)

    def _no_verdict(self) -> None:
        """The page waiting for the current verdict gets the neutral answer now."""
        if self._verdict is not None:
            self._give(self._verdict, _NO_VERDICT)

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
            self._no_verdict()
            # A page still being answered is finished, not cut off when the loop ends.
            if self._serving:
                await asyncio.wait(set(self._serving), timeout=5)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            taken = self._take(head[:_MAX_REQUEST])
            status, body = taken if isinstance(taken, tuple) else await self._page(taken)
            writer.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, _REASONS[status], len(body), body)
            )
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            if task is not None:
                self._serving.discard(task)

    async def _page(self, verdict: asyncio.Future[str | None]) -> tuple[int, bytes]:
        """The taken answer's page, once the flow said how the sign-in ended (or time ran out)."""
        try:
            async with asyncio.timeout(self.verdict_timeout):
                failure = await asyncio.shield(verdict)
        except TimeoutError:
            failure = _NO_VERDICT
        if failure == _NO_VERDICT:
            return 200, _page("Sign-in received", f"Sign-in received; return to {_APP}.")
        if failure is None:
            return 200, _page("Signed in", f"Signed in. You can close this tab and go back to {_APP}.")
        return 400, _page("Sign-in failed", f"Sign-in failed: {failure}")

    def _take(self, head: bytes) -> tuple[int, bytes] | asyncio.Future[str | None]:
        """The status and page for one request; if it is the redirect, completes the sign-in's
        wait and gives the verdict its page waits for."""
        method, _, rest = head.partition(b" ")
        target = rest.partition(b" ")[0].decode("latin-1")
        parts = urlsplit(target)
        if method != b"GET" or parts.path != "/callback":
            return 404, b"not found"
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        state = query.get("state", "")
        expected, answer, verdict = self._expected, self._answer, self._verdict
        if (
            expected is None
            or answer is None
            or verdict is None
            or answer.done()
            or not secrets.compare_digest(state, expected)
        ):
            return 404, b"no sign-in is waiting for this answer"
        answer.set_result(AuthorizationResponse(query.get("code", ""), state, query.get("iss")))
        return verdict


def _page(title: str, text: str) -> bytes:
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><p>{html.escape(text)}</p>"
    ).encode()
