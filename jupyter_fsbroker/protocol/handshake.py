"""The MCP handshake of a :class:`~.server_connection.ServerConnection`: ``initialize`` and what follows.

:func:`initialize` asks for the handshake era's latest version and turns a refusal into a
:class:`~.client_errors.ProtocolVersionError` that names what the server offered;
:func:`initial_tools` fetches the tool list once (a server that refuses it still connects);
:func:`given_name` reads the name a server gives itself, which names a connection the user
did not name. What the server said about itself is one :class:`ServerInfo`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from .._version import __version__
from ..core.consent_facts import Asker
from .client_errors import ConnectError, ProtocolVersionError
from .files_batches import EXTENSION
from .middleware import BrokerMiddleware
from .tools import list_tools
from .voice import clean_name

__all__ = [
    "CLIENT_INFO",
    "DEFAULT_ERA",
    "EraChoice",
    "ServerInfo",
    "WireEra",
    "asker",
    "discover",
    "given_name",
    "initial_tools",
    "initialize",
    "negotiate",
]

log = logging.getLogger(__name__)

#: How this client introduces itself in ``initialize``.
CLIENT_INFO = types.Implementation(name="jupyter_fsbroker", version=__version__)

_VERSIONS = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)

#: Which era of MCP a connection asks for: ``auto`` (the 2026-07-28 era with the files extension
#: when the server offers it, else the handshake era), ``modern`` or ``legacy``.
EraChoice = Literal["auto", "modern", "legacy"]
#: What a connection asks for unless told otherwise: the 2026-07-28 era where the server offers
#: the files extension on it (what mcp's own client does, ``mode="auto"``), else the handshake era.
DEFAULT_ERA: EraChoice = "auto"
#: The era a connection speaks: ``modern`` (2026-07-28, batches) or ``legacy`` (the handshake era).
WireEra = Literal["modern", "legacy"]


@dataclass(frozen=True)
class ServerInfo:
    """What a server said about itself in its ``initialize`` result, in wire spelling.

    Attributes
    ----------
    protocol_version
        The negotiated MCP protocol version (one of the handshake era's); ``None`` before the
        handshake.
    server_info
        ``serverInfo`` (``name``, ``version``, ...).
    capabilities
        The server's capabilities.
    instructions
        The server's ``instructions``, if it gave any.
    """

    protocol_version: str | None = None
    server_info: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    instructions: str | None = None

    @property
    def era(self) -> WireEra | None:
        """``modern`` (2026-07-28: ``files/*`` in batches) or ``legacy``; ``None`` before the handshake."""
        if self.protocol_version is None:
            return None
        return "modern" if self.protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"

    @property
    def offers_files(self) -> bool:
        """Whether the server lists the files extension (``io.github.jupyter-fsbroker/files``)."""
        extensions = self.capabilities.get("extensions")
        return isinstance(extensions, Mapping) and EXTENSION in extensions

    @property
    def files_features(self) -> tuple[str, ...]:
        """The features of the files extension the server lists (empty when it lists none)."""
        extensions = self.capabilities.get("extensions")
        ours = extensions.get(EXTENSION) if isinstance(extensions, Mapping) else None
        features = ours.get("features") if isinstance(ours, Mapping) else None
        return tuple(f for f in features if isinstance(f, str)) if isinstance(features, list) else ()

    @property
    def name(self) -> str | None:
        """The name the server gives itself (``serverInfo.name``)."""
        name = self.server_info.get("name")
        return name if isinstance(name, str) else None

    @property
    def version(self) -> str | None:
        """The version the server gives itself (``serverInfo.version``)."""
        version = self.server_info.get("version")
        return version if isinstance(version, str) else None


async def initialize(session: ClientSession, middleware: BrokerMiddleware, name: str) -> ServerInfo:
    """Run ``initialize`` on *session*; *name* is the connection's, for the errors.

    Raises
    ------
    ProtocolVersionError
        The server refused the handshake era's versions, or answered with another one.
    ConnectError
        The server refused to initialize, or closed the connection meanwhile.
    """
    requested = LATEST_HANDSHAKE_VERSION
    try:
        result = await session.initialize()
    except MCPError as exc:
        if exc.code == CONNECTION_CLOSED:
            raise ConnectError(f"the server of {name!r} closed the connection during the handshake") from None
        offered = _supported_versions(exc.data)
        if exc.code == UNSUPPORTED_PROTOCOL_VERSION or offered:
            raise ProtocolVersionError(
                f"the server of {name!r} refused MCP protocol version {requested}"
                + (f" and supports only {', '.join(offered)}" if offered else "")
                + f": jupyter_fsbroker needs the handshake era ({_VERSIONS}), the only one"
                " with server-to-client requests",
                requested=requested,
                offered=offered,
            ) from None
        raise ConnectError(
            f"the server of {name!r} refused to initialize: {exc.message} (code {exc.code})"
        ) from None
    except RuntimeError:
        # ClientSession refuses an answer outside the handshake era's versions.
        version = middleware.answered_version
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            raise
        raise ProtocolVersionError(
            f"the server of {name!r} answered with MCP protocol version {version}: "
            f"jupyter_fsbroker needs the handshake era ({_VERSIONS}), the only one with "
            "server-to-client requests",
            requested=requested,
            offered=(version,),
        ) from None
    return ServerInfo(
        protocol_version=result.protocol_version,
        server_info=result.server_info.model_dump(by_alias=True, mode="json", exclude_none=True),
        capabilities=result.capabilities.model_dump(by_alias=True, mode="json", exclude_none=True),
        instructions=result.instructions,
    )


async def discover(
    session: ClientSession, name: str, era: EraChoice, *, per_request_era: bool
) -> ServerInfo | None:
    """Ask the server for the 2026-07-28 era (``server/discover``); adopt it if *era* allows.

    ``None`` when the server does not speak the era: the caller falls back to :func:`initialize`
    on the same transport. With ``auto``, a server that speaks it without listing the files
    extension is also answered ``None`` when each request says its own era
    (*per_request_era*: HTTP); over stdio a server keeps the era of its first request, so the
    connection stays on the 2026-07-28 era (where a tool that needs files says so at once).

    Raises
    ------
    ProtocolVersionError
        *era* is ``modern`` and the server does not speak the 2026-07-28 era.
    ConnectError
        The server closed the connection meanwhile.
    """
    try:
        raw = await session.send_discover(LATEST_MODERN_VERSION)
        result = types.DiscoverResult.model_validate(raw)
    except MCPError as exc:
        if exc.code == CONNECTION_CLOSED:
            raise ConnectError(f"the server of {name!r} closed the connection during discovery") from None
        if era == "modern":
            raise ProtocolVersionError(
                f"the server of {name!r} does not speak MCP protocol version {LATEST_MODERN_VERSION}"
                f" ({exc.message}); connect with era='legacy' or era='auto'",
                requested=LATEST_MODERN_VERSION,
                offered=_supported_versions(exc.data),
            ) from None
        return None
    except ValueError:
        if era == "modern":
            raise ProtocolVersionError(
                f"the server of {name!r} answered server/discover with something else than a discover result",
                requested=LATEST_MODERN_VERSION,
                offered=(),
            ) from None
        return None
    if not set(result.supported_versions) & set(MODERN_PROTOCOL_VERSIONS):
        # Servers that answer server/discover but list only handshake-era versions say so.
        if era == "modern":
            raise ProtocolVersionError(
                f"the server of {name!r} does not speak MCP protocol version {LATEST_MODERN_VERSION}"
                f" (it offers {', '.join(result.supported_versions) or 'no version'});"
                " connect with era='legacy' or era='auto'",
                requested=LATEST_MODERN_VERSION,
                offered=tuple(result.supported_versions),
            )
        return None
    capabilities = result.capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    info = ServerInfo(capabilities=capabilities)
    if era == "auto" and not info.offers_files and per_request_era:
        return None
    session.adopt(result)
    server = session.server_info
    return ServerInfo(
        protocol_version=session.protocol_version,
        server_info=server.model_dump(by_alias=True, mode="json", exclude_none=True) if server else {},
        capabilities=capabilities,
        instructions=result.instructions,
    )


async def negotiate(
    session: ClientSession, middleware: BrokerMiddleware, name: str, era: EraChoice, *, per_request_era: bool
) -> tuple[ServerInfo, bool]:
    """Settle the connection's era with the server: its info, and whether it is the 2026-07-28 era.

    ``legacy`` runs :func:`initialize`; ``modern`` :func:`discover` (or fails). ``auto`` over
    HTTP (*per_request_era*) asks ``server/discover`` first and takes the 2026-07-28 era where
    the server lists the files extension, else the handshake era. Over one stream (stdio) the
    first request fixes the era for the whole connection, and asking ``server/discover`` of a
    server that brokers files only in the handshake era would lose them; so ``auto`` there asks
    for the handshake era first, and takes the 2026-07-28 era only from a server that refuses
    it naming 2026-07-28 versions. A server that lists no files extension but speaks only the
    2026-07-28 era is connected on it either way (its tools that need no files work).

    Raises
    ------
    ProtocolVersionError
        The server speaks no era that *era* allows.
    ConnectError
        The server refused to initialize, or closed the connection meanwhile.
    """
    if era == "modern" or (era == "auto" and per_request_era):
        modern = await discover(session, name, era, per_request_era=per_request_era)
        if modern is not None:
            return modern, True
    try:
        return await initialize(session, middleware, name), False
    except ProtocolVersionError as exc:
        if era == "legacy" or not set(exc.offered) & set(MODERN_PROTOCOL_VERSIONS):
            raise
    modern = await discover(session, name, "modern", per_request_era=per_request_era)
    assert modern is not None  # era "modern" raises instead
    return modern, True


async def initial_tools(session: ClientSession, info: ServerInfo, name: str) -> tuple[dict[str, Any], ...]:
    """The server's tools right after the handshake (none if it has no ``tools`` capability).

    A server that refuses ``tools/list`` still connects (with a warning, and no tools).

    Raises
    ------
    ConnectError
        The server closed the connection meanwhile.
    """
    if "tools" not in info.capabilities:
        return ()
    try:
        return await list_tools(session)
    except MCPError as exc:
        if exc.code == CONNECTION_CLOSED:
            raise ConnectError(f"the server of {name!r} closed the connection after the handshake") from None
        log.warning("connection %r: the server refused tools/list: %s", name, exc.message)
        return ()


def given_name(result: Mapping[str, Any]) -> str:
    """The usable name in an ``initialize`` result's ``serverInfo`` (``""``: none)."""
    info = result.get("serverInfo")
    raw = info.get("name") if isinstance(info, Mapping) else None
    return clean_name(raw) if isinstance(raw, str) else ""


def asker(result: Mapping[str, Any], transport: str, target: str, sandboxed: bool | None) -> Asker:
    """Who asks for consent on this connection: the ``initialize`` result's own name, and where it runs.

    *target* is the command line (stdio) or the URL as displayed (HTTP);
    *sandboxed* says whether a local server runs confined (``None`` for a URL).
    """
    info = result.get("serverInfo")
    title = ""
    if isinstance(info, Mapping):
        for key in ("title", "name"):
            raw = info.get(key)
            if isinstance(raw, str) and clean_name(raw):
                title = clean_name(raw)
                break
    if transport == "stdio":
        return Asker(title, "local", "", bool(sandboxed))
    try:
        host = urlsplit(target).hostname or ""
    except ValueError:
        host = ""
    return Asker(title, "remote", clean_name(host), None)


def _supported_versions(data: Any) -> tuple[str, ...]:
    if isinstance(data, Mapping):
        supported = data.get("supported")
        if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
            return tuple(supported)
    return ()
