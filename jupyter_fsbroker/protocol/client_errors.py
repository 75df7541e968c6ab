"""The errors of the MCP client: connecting failed, the connection closed, the server answered an error.

Raised by :mod:`.server_connection` and :mod:`.connect`; each is a
:class:`~jupyter_fsbroker.core.errors.BrokerError`, so one ``except`` catches
everything the broker raises on purpose. The functions at the end find and name
what failed inside the exception groups a transport raises. Nothing here talks
to a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import BrokerError, ClosedError

__all__ = [
    "ConnectError",
    "ConnectionClosedError",
    "ProtocolVersionError",
    "ServerError",
    "describe_failure",
    "find_connect_error",
    "innermost",
]


class ConnectError(BrokerError, RuntimeError):
    """The connection could not be established (spawn failure, unreachable URL, handshake refused)."""


class ProtocolVersionError(ConnectError):
    """The server cannot speak the handshake era of MCP (protocol versions 2024-11-05 … 2025-11-25).

    Attributes
    ----------
    requested
        The protocol version this client proposed.
    offered
        The version(s) the server answered with or said it supports.
    """

    def __init__(self, message: str, *, requested: str, offered: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.requested = requested
        self.offered = tuple(offered)


class ConnectionClosedError(ClosedError):
    """The connection is closed, or closed while a call was waiting for its answer."""


class ServerError(BrokerError, RuntimeError):
    """The server answered a request with a JSON-RPC error.

    Attributes
    ----------
    code, message, data
        The JSON-RPC error's members.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


def innermost(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def find_connect_error(exc: BaseException) -> ConnectError | None:
    """The first :class:`ConnectError` in *exc* or the exception groups it nests."""
    if isinstance(exc, ConnectError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_connect_error(inner)
            if found is not None:
                return found
    return None


def describe_failure(exc: BaseException) -> str:
    """``OSError: [Errno 32] Broken pipe``: the innermost exception's type and message."""
    leaf = innermost(exc)
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
