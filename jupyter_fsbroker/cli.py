"""``jupyter-fsbroker``: the broker without a notebook, for scripts, CI and terminals.

::

    jupyter-fsbroker connect [OPTIONS] (--url URL | -- COMMAND [ARG...])

connects to an MCP server, shares the given roots, and answers its ``files/*``
requests. With ``--call TOOL`` it calls one tool, prints the result as JSON on
stdout and exits (0: the tool succeeded, 1: it reported an error, 2: anything
else); without, it serves until the server ends the connection or the process
receives SIGINT or SIGTERM. Consent for paths not pre-approved with ``--allow``
is asked on the terminal when stdin is one, and refused otherwise.

``--sandbox`` starts a local server confined (Linux, Landlock): it reaches the
user's files only through ``files/*`` (``--sandbox-roots``: it also reads and
writes the read-write roots directly — creates, changes, renames and deletes
files there with no grant, consent or audit record — and reads the read-only
ones; ``--sandbox-net PORTS``: no TCP but to these ports).
``JUPYTER_FSBROKER_SANDBOX=1`` (or ``roots``) makes it the default, and
``--no-sandbox`` turns the default off; where Landlock is unavailable an asked-for
sandbox is an error and a default one a warning.

What the server says (its stderr, over stdio, and its MCP log messages) is
shown on stderr, one line each, prefixed with the connection's name and made
safe for a terminal; ``--quiet`` keeps only log messages of level warning and
above.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .core.broker import Broker
from .core.config import BrokerConfig
from .core.consent import Consenter, DenyingConsenter
from .core.errors import BrokerError
from .core.serverlog import LEVELS, LogEntry
from .core.specs import apply_specs, split_header
from .protocol.client import ServerConnection
from .protocol.connector import connect
from .sandbox import Sandbox, SandboxChoice, SandboxError, SandboxUnavailable, choose
from .sandbox.request import ENV_DEFAULT, parse_ports, sandbox_from_env
from .widgets.terminal import TerminalConsenter
from .widgets.text import printable

__all__ = ["main"]

EXIT_OK, EXIT_TOOL_ERROR, EXIT_FAILURE = 0, 1, 2


class UsageError(Exception):
    """A command line that cannot be carried out; printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``jupyter-fsbroker``."""
    parser = _Parser(
        prog="jupyter-fsbroker",
        description="Broker an MCP server's access to local folders (SEP-1708 files/*).",
    )
    commands = parser.add_subparsers(dest="subcommand", metavar="COMMAND", parser_class=_Parser)
    c = commands.add_parser(
        "connect",
        help="connect to an MCP server and serve its files/* requests",
        description="Connect to an MCP server (--url URL, or -- COMMAND [ARG...] over stdio) "
        "and answer its files/* requests for the shared roots.",
    )
    c.add_argument(
        "--root", action="append", default=[], metavar="[NAME=]DIR", help="a read-write root (repeatable)"
    )
    c.add_argument(
        "--root-ro", action="append", default=[], metavar="[NAME=]DIR", help="a read-only root (repeatable)"
    )
    c.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PATH[:OPS]",
        help="pre-approve a root-relative PATH for OPS, a comma list of read,write,delete,watch "
        "(default read)",
    )
    c.add_argument("--url", help="the server's Streamable HTTP endpoint")
    c.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header (repeatable)"
    )
    c.add_argument(
        "--name",
        help="the connection's name in prompts and the audit log (default: the name the server gives itself)",
    )
    c.add_argument(
        "--advertise-read-only-roots",
        action="store_true",
        help="list read-only roots in roots/list too (marked readOnly); by default they are only "
        "reachable through files/*, because a server that reads the disk itself would get write "
        "access to them",
    )
    c.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="do not show the server's stderr, nor its log messages below warning",
    )
    c.add_argument(
        "--sandbox",
        action="store_true",
        help="confine a local server so that it reaches your files only through files/* (Linux, Landlock)",
    )
    c.add_argument(
        "--sandbox-roots",
        action="store_true",
        help="confine it, but let it read and write the read-write roots directly (create, change, "
        "rename and delete files there, with no grant, consent or audit record) and read the "
        "read-only roots",
    )
    c.add_argument(
        "--sandbox-net",
        metavar="PORTS",
        help="confine its network too: no TCP but connections to these ports (e.g. 443; '' for none)",
    )
    c.add_argument(
        "--sandbox-path",
        action="append",
        default=[],
        metavar="PATH",
        help="a path the confined server may read besides its own files (repeatable)",
    )
    c.add_argument(
        "--no-sandbox", action="store_true", help=f"do not confine it, whatever {ENV_DEFAULT} says"
    )
    c.add_argument("--call", metavar="TOOL", help="call TOOL, print its result as JSON and exit")
    c.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments (default {})")
    c.add_argument("--audit", metavar="FILE", help="append audit records to FILE as JSON Lines")
    c.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="limit for --call (default 300)"
    )
    c.add_argument("command", nargs=argparse.REMAINDER, help="after --: the server command and its arguments")
    return parser


def _make_consenter() -> tuple[Consenter, TerminalConsenter | None]:
    if sys.stdin is not None and sys.stdin.isatty():
        terminal = TerminalConsenter()
        return terminal, terminal
    return DenyingConsenter(), None


async def _run_connect(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(args.url) == bool(command):
        raise UsageError("give either --url URL or -- COMMAND [ARG...]")
    try:
        tool_args = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not JSON: {exc.msg}") from None
    if not isinstance(tool_args, dict):
        raise UsageError("--args must be a JSON object")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    sandbox = _sandbox_choice(args)
    echo = _ServerEcho(quiet=args.quiet)
    broker = Broker(
        BrokerConfig(audit_path=args.audit, advertise_read_only_roots=args.advertise_read_only_roots)
    )
    consenter, terminal = _make_consenter()
    conn: ServerConnection | None = None
    try:
        try:
            headers = dict(split_header(h) for h in args.header)
        except BrokerError as exc:
            raise UsageError(str(exc)) from None
        problems = apply_specs(broker, roots=args.root, read_only_roots=args.root_ro, allow=args.allow)
        if problems:
            raise UsageError("; ".join(str(problem) for problem in problems))
        conn = await connect(
            broker,
            args.name,
            command=command[0] if command else None,
            args=command[1:],
            url=args.url,
            headers=headers,
            consenter=consenter,
            on_log=echo,
            sandbox=sandbox if command else None,
        )
        echo.start(conn.name)
        if args.call:
            return await _call(conn, args.call, tool_args, args.timeout)
        return await _serve(conn)
    finally:
        echo.start(args.name or "server")  # connecting failed: show what the server said
        if conn is not None:
            await conn.aclose()
        broker.close()
        if terminal is not None:
            terminal.close()


def _sandbox_choice(args: argparse.Namespace) -> SandboxChoice:
    """What the sandbox options (and the default of the environment) ask for."""
    explicit = args.sandbox or args.sandbox_roots or args.sandbox_net is not None or bool(args.sandbox_path)
    if args.no_sandbox:
        if explicit:
            raise UsageError("--no-sandbox contradicts the other sandbox options")
        return choose(False)
    try:
        if not explicit:
            return choose(None, default=sandbox_from_env())
        if args.url:
            raise UsageError("the sandbox confines a local command; a --url server runs elsewhere")
        ports = parse_ports(args.sandbox_net) if args.sandbox_net is not None else None
        level = "roots" if args.sandbox_roots else "files"
        return choose(Sandbox(level=level, connect_ports=ports, paths=tuple(args.sandbox_path)))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class _ServerEcho:
    """Shows the server's log on stderr: one safe line per entry, prefixed with the connection's name.

    Entries that come before the name is known (the server names itself in the
    handshake) wait for :meth:`start`.
    """

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self._name: str | None = None
        self._early: list[LogEntry] = []

    def start(self, name: str) -> None:
        """Show the entries held so far, and every later one at once, under *name*."""
        if self._name is None:
            self._name = name
            for entry in self._early:
                self(entry)
            self._early.clear()

    def __call__(self, entry: LogEntry) -> None:
        if self._name is None:
            self._early.append(entry)
            return
        if self.quiet and (entry.source == "stderr" or entry.severity < LEVELS.index("warning")):
            return
        if entry.source == "stderr":
            text = entry.text
        else:
            text = f"{entry.level}: " + (f"{entry.logger}: " if entry.logger else "") + entry.text
        print(f"[{printable(self._name)}] {printable(text)}", file=sys.stderr, flush=True)


async def _call(conn: ServerConnection, tool: str, arguments: dict[str, Any], timeout: float) -> int:
    names = [t["name"] for t in conn.tools]
    if tool not in names:
        offered = ", ".join(names) or "none"
        raise UsageError(f"{conn.name} has no tool {tool!r} (its tools: {offered})")
    result = await conn.call_tool(tool, arguments, timeout=timeout)
    print(json.dumps(result, ensure_ascii=False))
    return EXIT_TOOL_ERROR if result.get("isError") else EXIT_OK


async def _serve(conn: ServerConnection) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        confinement = f"; {conn.sandbox.describe()}" if conn.sandbox is not None else ""
        print(
            f"jupyter-fsbroker: serving {conn.name} ({conn.server_name or 'unnamed server'}, "
            f"protocol {conn.protocol_version}{confinement}); Ctrl-C to stop",
            file=sys.stderr,
        )
        closed = asyncio.ensure_future(conn.wait_closed())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (closed, stopped):
            task.cancel()
        if conn.closed and conn.close_reason:
            print(f"jupyter-fsbroker: connection ended: {conn.close_reason}", file=sys.stderr)
        return EXIT_OK
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``jupyter-fsbroker`` with *argv* (default: the process's arguments); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.subcommand != "connect":
            parser.print_help(sys.stderr)
            return EXIT_FAILURE
        return asyncio.run(_run_connect(args))
    except UsageError as exc:
        print(f"jupyter-fsbroker: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except (BrokerError, TimeoutError, OSError, SandboxUnavailable, SandboxError) as exc:
        message = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            message = "timed out"
        print(f"jupyter-fsbroker: {message}", file=sys.stderr)
        return EXIT_FAILURE
