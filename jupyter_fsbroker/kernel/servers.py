"""How the notebook reaches an MCP server: the target of a connect call, checked.

:class:`ServerTarget` is what ``broker.connect(name, url=… | command=…)`` asks
for, checked before anything starts; :meth:`ServerTarget.open` connects to it on
the broker's background loop (:func:`jupyter_fsbroker.protocol.connector.connect`).
What a server says (a stdio server's stderr, its MCP log messages) stays in the
connection's own log (``conn.server_log()``), away from the notebook's output:
ipykernel would otherwise show it in whichever cell happens to run.

Nothing here decides what a server may do.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from ..core.broker import Broker
from ..core.consent import Consenter
from ..core.errors import ConfigError
from ..protocol.client import ServerConnection
from ..protocol.connector import DEFAULT_CONNECT_TIMEOUT, connect

__all__ = ["ConnectOptions", "ServerTarget"]


class ConnectOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`NotebookBroker.connect <.broker.NotebookBroker.connect>`."""

    url: str | None
    headers: Mapping[str, str] | None
    command: str | Sequence[str] | None
    env: Mapping[str, str] | None
    cwd: str | os.PathLike[str] | None
    timeout: float | None


@dataclass(frozen=True)
class ServerTarget:
    """A server to connect to, checked: a Streamable HTTP URL, or a command line for stdio.

    Attributes
    ----------
    name
        The connection's name.
    url, headers
        The server's endpoint and extra HTTP headers; ``url`` is ``None`` for stdio.
    argv, env, cwd
        The server's command line (empty for a URL), extra environment and folder.
    timeout
        Seconds for the server to start and complete the handshake.
    """

    name: str
    url: str | None
    headers: Mapping[str, str] | None
    argv: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None
    timeout: float | None

    @classmethod
    def check(cls, name: str, **options: Unpack[ConnectOptions]) -> ServerTarget:
        """The target that ``connect(name, **options)`` names.

        Raises
        ------
        ConfigError
            An empty name, neither or both of ``url`` and ``command``, a URL
            that is not http(s), or an empty command.
        """
        url, command, cwd = options.get("url"), options.get("command"), options.get("cwd")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("give the connection a name")
        if (url is None) == (command is None):
            raise ConfigError("give either url= (Streamable HTTP) or command= (stdio)")
        if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ConfigError(f"not an http(s) URL: {url!r}")
        argv: tuple[str, ...] = ()
        if command is not None:
            argv = tuple(shlex.split(command) if isinstance(command, str) else map(str, command))
            if not argv:
                raise ConfigError("the server command is empty")
        return cls(
            name=name,
            url=url,
            headers=options.get("headers"),
            argv=argv,
            env=options.get("env"),
            cwd=os.fspath(cwd) if cwd is not None else None,
            timeout=options.get("timeout", DEFAULT_CONNECT_TIMEOUT),
        )

    async def open(self, core: Broker, consenter: Consenter) -> ServerConnection:
        """Connect (on the background loop); return the open connection.

        Raises
        ------
        ConnectError
            The server could not be started or reached, or refused the handshake.
        """
        return await connect(
            core,
            self.name,
            command=self.argv[0] if self.argv else None,
            args=self.argv[1:],
            env=self.env,
            cwd=self.cwd,
            url=self.url,
            headers=self.headers,
            consenter=consenter,
            timeout=self.timeout,
        )
