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
from typing import TYPE_CHECKING, TypedDict, Unpack

from ..core.broker import Broker
from ..core.consent import Consenter
from ..core.errors import ConfigError
from ..sandbox import Sandbox, SandboxChoice, choose

if TYPE_CHECKING:  # the MCP client is imported when the first connection is made, not at %load_ext
    from ..protocol.auth import OAuth
    from ..protocol.handshake import EraChoice
    from ..protocol.server_connection import ServerConnection

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "ERAS", "ServerTarget", "TargetOptions", "warm_up"]

#: Seconds for a server to start and complete the handshake (the protocol layer's default too).
DEFAULT_CONNECT_TIMEOUT = 30.0

#: The eras of MCP a connection may ask for (the protocol layer's ``EraChoice``), the default first.
ERAS: tuple[EraChoice, ...] = ("auto", "legacy", "modern")

#: What a first connection and a first tool call need, imported ahead by :func:`warm_up`: the MCP
#: client, the widgets the first connection shows, and jsonschema, which mcp imports on the first
#: call of a tool with an output schema (seconds, on the loop that a consent answer must cross; see
#: benchmarks/README.md, "Why the code is shaped this way").
_WARM_MODULES = (
    "jupyter_fsbroker.protocol.connector",
    "ipywidgets",
    "jupyter_fsbroker.widgets.consent_prompt",
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


#: A target that was not checked by :meth:`ServerTarget.check` is not confined.
_NO_SANDBOX = SandboxChoice(None, explicit=False)


class TargetOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`NotebookBroker.connect <.broker.NotebookBroker.connect>`."""

    url: str | None
    headers: Mapping[str, str] | None
    command: str | Sequence[str] | None
    env: Mapping[str, str] | None
    cwd: str | os.PathLike[str] | None
    timeout: float | None
    sandbox: bool | str | Sandbox | None
    advertise_roots: bool | None
    auth: OAuth | bool | None  # see NotebookBroker.connect
    era: EraChoice


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
    sandbox
        How a local server is confined, and whether that was asked for or is the default.
    advertise_roots
        Whether the server is handed the roots' locations (``None``: the setting decides).
    auth
        The sign-in settings (an :class:`~jupyter_fsbroker.protocol.auth.OAuth`), decided by
        the notebook's sign-ins (:mod:`.sign_ins`); ``None``: a ``401`` fails the connection.
    era
        The era of MCP asked for: ``auto`` (the default), ``legacy`` or ``modern`` (see
        :func:`~jupyter_fsbroker.protocol.connector.connect`).
    """

    name: str
    url: str | None
    headers: Mapping[str, str] | None
    argv: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None
    timeout: float | None
    sandbox: SandboxChoice = _NO_SANDBOX
    advertise_roots: bool | None = None
    auth: OAuth | None = None
    era: EraChoice = ERAS[0]

    @classmethod
    def check(
        cls, name: str, *, default_sandbox: Sandbox | None = None, **options: Unpack[TargetOptions]
    ) -> ServerTarget:
        """The target that ``connect(name, **options)`` names.

        *default_sandbox* is the setting's sandbox for local servers, taken when
        ``sandbox`` is not given.

        Raises
        ------
        ConfigError
            An empty name, neither or both of ``url`` and ``command``, a URL
            that is not http(s), an empty command, a sandbox asked for a URL,
            a sandbox value that means nothing, an ``advertise_roots``
            other than ``True``, ``False`` or ``None``, or an unknown ``era``.
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
        try:
            sandbox = choose(options.get("sandbox"), default=default_sandbox if argv else None)
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        if url is not None and sandbox.explicit and sandbox.sandbox is not None:
            raise ConfigError(
                "the sandbox confines local servers (command=...); a URL's server runs elsewhere"
            )
        advertise = options.get("advertise_roots")
        if advertise is not None and not isinstance(advertise, bool):
            raise ConfigError(f"advertise_roots must be True, False or None, not {advertise!r}")
        era = options.get("era", ERAS[0])
        if era not in ERAS:
            raise ConfigError(f"era must be one of {', '.join(map(repr, ERAS))}, not {era!r}")
        return cls(
            name=name,
            url=url,
            headers=options.get("headers"),
            argv=argv,
            env=options.get("env"),
            cwd=os.fspath(cwd) if cwd is not None else None,
            timeout=options.get("timeout", DEFAULT_CONNECT_TIMEOUT),
            sandbox=sandbox,
            advertise_roots=advertise,
            era=era,
        )

    async def open(self, core: Broker, consenter: Consenter) -> ServerConnection:
        """Connect (on the background loop); return the open connection.

        Raises
        ------
        ConnectError
            The server could not be started or reached, or refused the handshake.
        """
        from ..protocol.connector import connect

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
            sandbox=self.sandbox if self.argv else None,
            advertise_roots=self.advertise_roots,
            auth=self.auth,
            era=self.era,
        )
