"""How the notebook reaches an MCP server: the target of a connect call, checked, and each stdio server's log.

:class:`ServerTarget` is what ``broker.connect(name, url=… | command=…)`` asks
for, checked before anything starts; :meth:`ServerTarget.open` connects to it on
the broker's background loop (:func:`jupyter_fsbroker.protocol.client.connect`).
:class:`ServerLogs` keeps what each stdio server writes on its stderr in an
anonymous file, away from the notebook's own output (ipykernel would otherwise
show it in whichever cell happens to run), until the connection ends.

Nothing here decides what a server may do, and nothing stays on disk.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO, TypedDict, Unpack

from ..core.broker import Broker
from ..core.consent import Consenter
from ..core.errors import ConfigError

if TYPE_CHECKING:  # the MCP client is imported when the first connection is made, not at %load_ext
    from ..protocol.client import ServerConnection

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "ConnectOptions", "ServerLogs", "ServerTarget", "warm_up"]

#: Seconds for a server to start and complete the handshake (the protocol layer's default too).
DEFAULT_CONNECT_TIMEOUT = 30.0

#: What a first connection and a first tool call need, imported ahead by :func:`warm_up`: the MCP
#: client (~0.6 s), the widgets the first connection shows, and jsonschema, which mcp imports on the
#: first call of a tool with an output schema (~1-3 s, on the loop that a consent answer must cross).
_WARM_MODULES = (
    "jupyter_fsbroker.protocol.client",
    "ipywidgets",
    "jupyter_fsbroker.widgets.consent",
    "jupyter_fsbroker.widgets.places",
    "jupyter_fsbroker.widgets.dashboard",
    "jupyter_fsbroker.widgets.progress",
    "jsonschema",
)


def warm_up() -> None:
    """Import what the first connection and tool call need (call it on a thread of its own).

    Python's import lock makes a cell that connects meanwhile wait for the
    import in progress instead of repeating it.
    """
    import importlib

    for name in _WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # pragma: no cover - a dependency of mcp that is missing shows at connect
            return


class ConnectOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`NotebookBroker.connect <.broker.NotebookBroker.connect>`."""

    url: str | None
    headers: Mapping[str, str] | None
    command: str | Sequence[str] | None
    env: Mapping[str, str] | None
    cwd: str | os.PathLike[str] | None
    timeout: float | None


class ServerLogs:
    """Each stdio server's stderr: one anonymous file per connection name, until its connection ends.

    Thread-safe. A new log under a name closes the previous one (its connection
    was replaced).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, TextIO] = {}

    def new(self, name: str) -> TextIO:
        """A fresh log for the server of connection *name*."""
        # Anonymous, so nothing stays on disk.
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        with self._lock:
            previous = self._logs.get(name)
            self._logs[name] = stderr
        if previous is not None:
            previous.close()
        return stderr

    def release(self, name: str, stderr: TextIO) -> None:
        """Close *stderr*, the log of connection *name* (it ended, or never opened)."""
        with self._lock:
            if self._logs.get(name) is stderr:
                del self._logs[name]
        stderr.close()

    def close(self) -> None:
        """Close every log."""
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
        for stderr in logs:
            stderr.close()


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

    async def open(
        self, core: Broker, consenter: Consenter, logs: ServerLogs
    ) -> tuple[ServerConnection, TextIO | None]:
        """Connect (on the background loop); return the open connection and its server's log, if any.

        Raises
        ------
        ConnectError
            The server could not be started or reached, or refused the handshake.
        """
        from ..protocol.client import connect

        errlog = logs.new(self.name) if self.argv else None
        try:
            server = await connect(
                core,
                self.name,
                errlog=errlog,
                command=self.argv[0] if self.argv else None,
                args=self.argv[1:],
                env=self.env,
                cwd=self.cwd,
                url=self.url,
                headers=self.headers,
                consenter=consenter,
                timeout=self.timeout,
            )
        except BaseException:
            if errlog is not None:
                logs.release(self.name, errlog)
            raise
        return server, errlog
