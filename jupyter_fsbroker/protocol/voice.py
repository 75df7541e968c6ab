"""What a server says and how it names itself: its log messages and stderr lines, its name.

:class:`ServerVoice` takes a stdio server's stderr lines and its MCP
``notifications/message`` into the connection's
:class:`~jupyter_fsbroker.core.serverlog.ServerLog` and into Python logging,
under ``jupyter_fsbroker.server.<connection name>`` (MCP's levels mapped to
logging's). :func:`clean_name` makes a name the server chose fit for consent
prompts and logs. A server's words are recorded and shown, never obeyed.
"""

from __future__ import annotations

import json
import logging
import os
import unicodedata
from typing import Literal

import httpx2
import mcp_types as types

from ..core.serverlog import ServerLog

__all__ = ["SERVER_LOGGER", "ServerVoice", "clean_name", "fallback_name"]

#: The parent of each connection's logger (``jupyter_fsbroker.server.<name>``): the
#: servers' own words. It has a NullHandler, so that nothing a server says is
#: printed by Python's last-resort handler (in a kernel that is whatever cell
#: runs); the notebook and the command line show it their own way.
SERVER_LOGGER = "jupyter_fsbroker.server"
logging.getLogger(SERVER_LOGGER).addHandler(logging.NullHandler())

#: Python logging levels of MCP's log levels (RFC 5424's).
_PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}

#: Characters of a server-given name kept for the connection's name.
_MAX_NAME = 64


class ServerVoice:
    """Records what one server says: into its log, and into Python logging under its name.

    Parameters
    ----------
    log
        The connection's log.
    name
        The connection's name (the Python logger's last part); see :meth:`rename`.
    """

    def __init__(self, log: ServerLog, name: str) -> None:
        self.log = log
        self._logger = _server_logger(name)

    def rename(self, name: str) -> None:
        """Log under *name* from now on (the server named itself)."""
        self._logger = _server_logger(name)

    def stderr(self, line: str) -> None:
        """One line of a stdio server's stderr."""
        entry = self.log.add_stderr(line)
        self._logger.info("stderr: %s", entry.text)

    async def message(self, params: types.LoggingMessageNotificationParams) -> None:
        """One MCP ``notifications/message`` (mcp's ``logging_callback``)."""
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        entry = self.log.add_message(str(params.level), text, params.logger)
        origin = f"{entry.logger}: " if entry.logger else ""
        self._logger.log(_PY_LEVELS.get(entry.level or "", logging.INFO), "%s%s", origin, entry.text)


def clean_name(raw: str) -> str:
    """A server-given name fit for prompts and logs: no control or format characters, one line, short."""
    kept = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in raw)
    return " ".join(kept.split())[:_MAX_NAME].strip()


def fallback_name(transport: Literal["stdio", "http"], target: str) -> str:
    """The name of a connection until (or unless) the server names itself."""
    if transport == "http":
        return httpx2.URL(target).netloc.decode("ascii", "replace") or target
    return os.path.basename(target.split(" ", 1)[0]) or target


def _server_logger(name: str) -> logging.Logger:
    """The Python logger of the connection *name*."""
    # Dots would make a hierarchy of the name's parts.
    return logging.getLogger(f"{SERVER_LOGGER}.{name.replace('.', '_')}")
