"""Connect a broker to an MCP server: :func:`connect`, and :func:`open_connection` for ``async with``.

The entry points of the client: they check what they are given, pick the
transport (:mod:`.transports`) and start a
:class:`~.server_connection.ServerConnection`, which owns everything from then on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TextIO, TypedDict, Unpack

from ..core.broker import Broker
from ..core.consent import Consenter
from ..core.serverlog import LogEntry
from ..sandbox import SandboxChoice
from .auth.oauth_settings import OAuth
from .auth.pending_sign_in import SignIn
from .handshake import DEFAULT_ERA, EraChoice
from .roots_gate import RootsGrace
from .sandboxing import SandboxValue, closing_launch, sandboxed_stdio
from .server_connection import ServerConnection
from .transports import display_url, http_transport, stdio_transport

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_KEEPALIVE",
    "DEFAULT_ROOTS_GRACE",
    "ConnectOptions",
    "connect",
    "open_connection",
]

#: Default seconds for the transport to come up and the handshake to complete.
DEFAULT_CONNECT_TIMEOUT = 30.0

#: Default seconds between keep-alive pings on HTTP connections.
DEFAULT_KEEPALIVE = 30.0

#: How long tool calls may wait, by default, for the server to fetch the roots.
DEFAULT_ROOTS_GRACE = RootsGrace()


class ConnectOptions(TypedDict, total=False):
    """The keyword arguments of :func:`connect` (and :func:`open_connection`)."""

    command: str | None
    args: Sequence[str]
    env: Mapping[str, str] | None
    cwd: str | None
    url: str | None
    headers: Mapping[str, str] | None
    auth: OAuth | None
    consenter: Consenter | None
    timeout: float | None
    keepalive: float | None
    errlog: TextIO | None
    roots_grace: RootsGrace | None
    on_log: Callable[[LogEntry], object] | None
    sandbox: SandboxValue
    advertise_roots: bool | None
    era: EraChoice


async def connect(
    broker: Broker,
    name: str | None,
    *,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | None = None,
    consenter: Consenter | None = None,
    timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    keepalive: float | None = DEFAULT_KEEPALIVE,
    errlog: TextIO | None = None,
    roots_grace: RootsGrace | None = DEFAULT_ROOTS_GRACE,
    on_log: Callable[[LogEntry], object] | None = None,
    sandbox: SandboxValue = None,
    advertise_roots: bool | None = None,
    era: EraChoice = DEFAULT_ERA,
) -> ServerConnection:
    """Connect *broker* to an MCP server and complete the handshake.

    Give either *command* (stdio: the server is started as a subprocess) or
    *url* (Streamable HTTP). The connection speaks the handshake era of MCP
    (it proposes protocol version 2025-11-25 and accepts 2024-11-05 …
    2025-11-25), advertising ``roots.filesystemBrokering`` and the
    ``io.github.jupyter-fsbroker/files`` extension, or, as *era* says, the
    2026-07-28 era with that extension (``files/*`` in batches, PROTOCOL.md
    "The 2026-07-28 era").

    Must be awaited on the asyncio event loop that will run the connection.

    Parameters
    ----------
    broker
        The broker whose roots and files the server may use.
    name
        The user's name for the connection: the broker-side connection,
        consent prompts and audit records carry it. ``None``: the server's
        own name (``serverInfo.name``), known from its answer to
        ``initialize`` (before it may send any request); until then, and if
        it gives none, the command's file name or the URL's host.
    command, args, env, cwd
        stdio: the executable, its arguments, extra environment variables
        (merged over a minimal safe environment: ``HOME``, ``PATH``, ...), and
        its working directory.
    url, headers
        Streamable HTTP: the endpoint and extra HTTP headers (``Authorization``
        ...). Server-sent events have no size cap, so 2 MiB chunks fit.
    auth
        Streamable HTTP: sign in when the server asks for MCP authorization
        (a ``401``), with these :class:`~jupyter_fsbroker.protocol.auth.OAuth`
        settings; the tokens are kept for the next connection. ``None``: a
        ``401`` fails the connection. While a person signs in, *timeout* is
        postponed by ``auth.sign_in_timeout`` seconds (the time they have).
    consenter
        Answers ``files/consent``; default: refuse everything not pre-approved.
    timeout
        Seconds for the transport to come up and the handshake to complete
        (``None``: no limit).
    keepalive
        HTTP only: seconds between pings that notice a server that went away
        (``None``: never ping). stdio notices an exited server at once.
    errlog
        stdio: a file to give the server as its stderr instead. By default
        each line it writes goes to :attr:`ServerConnection.log` (and Python
        logging), and the last lines are quoted when connecting fails.
    roots_grace
        How long a tool call may wait for the server to fetch the roots right
        after connecting or after they changed (see :mod:`.roots_gate`);
        ``None``: never wait.
    on_log
        Called with each :class:`~jupyter_fsbroker.core.serverlog.LogEntry` of
        the connection's log from the start (stderr lines, log messages), on
        the event loop; it must not block.
    sandbox
        stdio: confine the server (Linux, Landlock) so that it reaches the
        user's files only through ``files/*``: ``True`` (or ``"files"``),
        ``"roots"`` (the roots too, read-only ones read-only), a
        :class:`~jupyter_fsbroker.sandbox.Sandbox` (network level, extra paths),
        or a :class:`~jupyter_fsbroker.sandbox.SandboxChoice` from a default
        setting (where Landlock is unavailable, a warning instead of an error).
        ``None``/``False``: not confined. :attr:`ServerConnection.sandbox` says
        what is in force.
    advertise_roots
        Hand the server the ``file://`` locations of the read-write roots in
        ``roots/list`` (``True``), or not (``False``); ``None``: the broker's
        ``advertise_roots`` setting, and if that is ``None`` too, only to a
        server confined with ``sandbox="roots"``. The roots' names are sent
        either way (see :mod:`.roots_offer`).
    era
        ``"auto"`` (the default): over HTTP, the 2026-07-28 era when the server lists
        the files extension in ``server/discover``, else the handshake era; over stdio,
        where the first request fixes the era for the whole pipe, the handshake era,
        unless the server refuses it for the 2026-07-28 era (see
        :func:`.handshake.negotiate`). ``"legacy"``: the handshake era only;
        ``"modern"``: the 2026-07-28 era or fail. :attr:`ServerConnection.era` says which one the
        connection speaks.

    Returns
    -------
    ServerConnection
        Open, with its tool list fetched.

    Raises
    ------
    ProtocolVersionError
        The server cannot speak the era asked for.
    ConnectError
        The command cannot be started, the URL cannot be reached, the server
        refused the handshake, or *timeout* elapsed.
    SandboxUnavailable
        The sandbox was asked for and Landlock is unavailable here.
    SandboxError
        The sandbox cannot be set up as asked (a path that contains a root ...).
    ValueError
        Neither or both of *command* and *url*, a URL that is not http(s), or a
        sandbox for a URL (a remote server runs elsewhere).
    """
    if era not in ("auto", "modern", "legacy"):
        raise ValueError(f"era must be 'auto', 'modern' or 'legacy', not {era!r}")
    if (command is None) == (url is None):
        raise ValueError("give either command (stdio) or url (Streamable HTTP)")
    if auth is not None and url is None:
        raise ValueError("auth is for servers reached by URL (Streamable HTTP)")
    launch = None
    if command is not None:
        parameters, launch = await sandboxed_stdio(broker, command, args, env, cwd, sandbox)
        conn = ServerConnection(
            broker,
            name,
            transport="stdio",
            target=" ".join([command, *args]),
            opener=lambda on_line: closing_launch(stdio_transport(parameters, errlog, on_line), launch),
            consenter=consenter,
            keepalive=None,
            roots_grace=roots_grace,
            sandbox=launch.status,
            advertise_roots=advertise_roots,
            era=era,
        )
    else:
        if sandbox not in (None, False) and not isinstance(sandbox, SandboxChoice):  # a default: not for URLs
            raise ValueError(
                "the sandbox confines local servers (command=...); a URL's server runs elsewhere"
            )
        assert url is not None
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {url!r}")
        holder: list[ServerConnection] = []
        auth = _postponing(auth, holder)
        conn = ServerConnection(
            broker,
            name,
            transport="http",
            target=display_url(url),
            opener=lambda on_line: http_transport(url, dict(headers or {}), auth, conn.name),
            consenter=consenter,
            keepalive=keepalive,
            roots_grace=roots_grace,
            advertise_roots=advertise_roots,
            era=era,
        )
        holder.append(conn)
    if on_log is not None:
        conn.log.follow(on_log)
    try:
        await conn.start(timeout)
    except BaseException:
        if launch is not None:
            launch.close()  # the transport removes it too, if it was ever opened
        raise
    return conn


def _postponing(auth: OAuth | None, holder: list[ServerConnection]) -> OAuth | None:
    """*auth*, telling the connection in *holder* to wait for a person who signs in."""
    if auth is None:
        return None
    told = auth.on_sign_in
    seconds = auth.sign_in_timeout

    def on_sign_in(sign_in: SignIn) -> None:
        for conn in holder:
            conn.postpone_deadline(seconds)
        if told is not None:
            told(sign_in)

    return dataclasses.replace(auth, on_sign_in=on_sign_in)


@asynccontextmanager
async def open_connection(
    broker: Broker, name: str | None, **options: Unpack[ConnectOptions]
) -> AsyncIterator[ServerConnection]:
    """``async with open_connection(broker, name, ...) as conn``: :func:`connect`, closed at the end.

    Takes the same arguments as :func:`connect`; leaving the block closes the
    connection (see :meth:`ServerConnection.aclose`).
    """
    conn = await connect(broker, name, **options)
    try:
        yield conn
    finally:
        await conn.aclose()
