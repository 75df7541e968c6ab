"""``jupyter-fsbroker``: the broker without a notebook, for scripts, CI and terminals.

::

    jupyter-fsbroker connect [OPTIONS] (--url URL | -- COMMAND [ARG...])
    jupyter-fsbroker trash [list [--json] | restore ID [--to PATH] [--overwrite] | empty [--older-than DAYS]]
    jupyter-fsbroker signout URL

connects to an MCP server, shares the given roots, and answers its ``files/*``
requests. With ``--call TOOL`` it calls one tool, prints the result as JSON on
stdout and exits (0: the tool succeeded, 1: it reported an error, 2: anything
else); without, it serves until the server ends the connection or the process
receives SIGINT or SIGTERM. Consent for paths not pre-approved with ``--allow``
is asked on the terminal when stdin is one, and refused otherwise.

A server learns the names of the shared roots, and their locations (``file://``
paths) only with ``--advertise-roots`` or under ``--sandbox-roots``: one that asks
for them and sends no ``files/*`` request probably opens files itself, and a
notice on stderr says what it was not given and why.

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

A ``--url`` server that asks for MCP authorization (a ``401``) is signed in to:
the authorization page is printed on stderr and opened with :mod:`webbrowser`
(``BROWSER`` is honoured; ``--no-browser`` only prints it), and the redirect
comes back to a listener on 127.0.0.1. The tokens are kept for the user (a file
only they can read), so the next run needs no browser; ``signout URL`` forgets
them. ``--oauth-client-id``/``--oauth-client-secret`` name a client registered
beforehand (the secret is better given as ``JUPYTER_FSBROKER_OAUTH_CLIENT_SECRET``:
a command line is visible to other users), ``--oauth-client-metadata-url`` the
client's metadata document, ``--oauth-scope`` the scopes to ask for.

``trash`` handles the per-user trash that deletes go to, the one every kernel
of the user shares: it lists the entries (newest first; ``--json`` for
scripts), restores one where it was deleted from (or ``--to`` elsewhere), or
deletes entries for good; ``--audit FILE`` records those actions.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .console.format import printable
from .console.prompt import TerminalConsenter
from .console.status import era_text, trash_text
from .core.audit import AuditLog
from .core.broker import Broker
from .core.config import BrokerConfig, default_trash_dir
from .core.consent import Consenter, DenyingConsenter
from .core.errors import BrokerError
from .core.serverlog import LEVELS, LogEntry
from .core.specs import apply_specs, split_header
from .core.trashcan import TrashCan
from .sandbox import Sandbox, SandboxChoice, SandboxError, SandboxUnavailable, choose
from .sandbox.request import ENV_DEFAULT, parse_ports, sandbox_from_env

if TYPE_CHECKING:
    # mcp is imported where a connection or sign-out needs it: ``trash`` and usage errors skip it.
    from .protocol.auth import OAuth, SignIn
    from .protocol.roots_offer import RootsNotice
    from .protocol.server_connection import ServerConnection

__all__ = ["main"]

EXIT_OK, EXIT_TOOL_ERROR, EXIT_FAILURE = 0, 1, 2
#: Where the client secret may come from instead of the command line (which others can see).
ENV_CLIENT_SECRET = "JUPYTER_FSBROKER_OAUTH_CLIENT_SECRET"  # noqa: S105 - a variable's name


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
    _add_connect_parser(commands)
    _add_trash_parser(commands)
    _add_signout_parser(commands)
    return parser


def _add_connect_parser(commands: Any) -> None:
    """``connect``: its options in the order ``--help`` shows them."""
    c = commands.add_parser(
        "connect",
        help="connect to an MCP server and serve its files/* requests",
        description="Connect to an MCP server (--url URL, or -- COMMAND [ARG...] over stdio) "
        "and answer its files/* requests for the shared roots.",
    )
    _add_root_options(c)
    _add_connection_options(c)
    _add_sandbox_options(c)
    _add_auth_options(c)
    _add_call_options(c)
    _add_audit_options(c)
    # --call's limit, listed last (where --help has always shown it).
    c.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="limit for --call (default 300)"
    )
    c.add_argument("command", nargs=argparse.REMAINDER, help="after --: the server command and its arguments")


def _add_root_options(c: argparse.ArgumentParser) -> None:
    """The shared roots and the grants given beforehand."""
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


def _add_connection_options(c: argparse.ArgumentParser) -> None:
    """Which server, how it is named, what it learns of the roots, what of it is shown."""
    c.add_argument("--url", help="the server's Streamable HTTP endpoint")
    c.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header (repeatable)"
    )
    c.add_argument(
        "--name",
        help="the connection's name in prompts and the audit log (default: the name the server gives itself)",
    )
    c.add_argument(
        "--era",
        choices=("auto", "legacy", "modern"),
        default="auto",
        help="the era of MCP: auto (the 2026-07-28 era with the io.github.jupyter-fsbroker/files "
        "extension when the server offers it, files/* in batches; else the handshake era; the "
        "default), legacy (the handshake era, files/* requests) or modern (the 2026-07-28 era or fail)",
    )
    c.add_argument(
        "--advertise-roots",
        action="store_true",
        help="hand the server the locations (file:// paths) of the read-write roots in roots/list; by "
        "default it learns their names only (all that files/* needs), unless it runs under "
        "--sandbox-roots: a server that opens files itself would bypass consent, grants and the "
        "audit, and a remote one would learn your folder layout",
    )
    c.add_argument(
        "--advertise-read-only-roots",
        action="store_true",
        help="with --advertise-roots or --sandbox-roots, hand over the read-only roots' locations "
        "too (marked readOnly); by default they are only reachable through files/*, because a "
        "server that reads the disk itself would get write access to them",
    )
    c.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="do not show the server's stderr, nor its log messages below warning",
    )


def _add_sandbox_options(c: argparse.ArgumentParser) -> None:
    """The confinement of a local server."""
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


def _add_auth_options(c: argparse.ArgumentParser) -> None:
    """Signing in to a server that asks for MCP authorization."""
    c.add_argument("--oauth-client-id", metavar="ID", help="sign in as this pre-registered OAuth client")
    c.add_argument(
        "--oauth-client-secret",
        metavar="SECRET",
        help=f"that client's secret (safer: the {ENV_CLIENT_SECRET} environment variable, "
        "since a command line is visible to other users)",
    )
    c.add_argument(
        "--oauth-client-metadata-url",
        metavar="URL",
        help="this client's metadata document (an https URL), used as its id where the server supports it",
    )
    c.add_argument("--oauth-scope", metavar="SCOPE", help="the OAuth scopes to ask for (space-separated)")
    c.add_argument(
        "--no-browser", action="store_true", help="print the sign-in page's address, do not open a browser"
    )


def _add_call_options(c: argparse.ArgumentParser) -> None:
    """Calling one tool (or listing the tools) instead of serving."""
    c.add_argument("--call", metavar="TOOL", help="call TOOL, print its result as JSON and exit")
    c.add_argument(
        "--list-tools", action="store_true", help="print the server's tools as JSON (one list) and exit"
    )
    c.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments (default {})")


def _add_audit_options(c: argparse.ArgumentParser) -> None:
    """The audit log and the trash that deletes go to."""
    c.add_argument("--audit", metavar="FILE", help="append audit records to FILE as JSON Lines")
    c.add_argument(
        "--audit-required",
        action="store_true",
        help="refuse any request whose audit record cannot be written to the --audit file first",
    )
    c.add_argument(
        "--trash-max-age",
        type=float,
        metavar="SECONDS",
        help="how long deleted files stay in the trash (default 30 days)",
    )
    c.add_argument(
        "--trash-max-bytes",
        type=int,
        metavar="BYTES",
        help="how much the trash holds in all; a larger delete is refused (default 1 GiB, or a tenth "
        "of the trash's disk if that is smaller)",
    )


def _add_signout_parser(commands: Any) -> None:
    """``signout URL``."""
    out = commands.add_parser(
        "signout",
        help="forget the sign-in to a server",
        description="Forget the tokens kept for the server at URL: the next connection signs in again.",
    )
    out.add_argument("url", metavar="URL", help="the server's Streamable HTTP endpoint")


def _oauth(args: argparse.Namespace) -> OAuth:
    """The sign-in settings of the options (and of the environment, for the secret)."""
    from .protocol.auth import OAuth

    if args.oauth_client_secret and not args.oauth_client_id:
        raise UsageError("--oauth-client-secret needs --oauth-client-id")
    secret = args.oauth_client_secret or os.environ.get(ENV_CLIENT_SECRET) or None

    def tell(sign_in: SignIn) -> None:
        print(
            f"jupyter-fsbroker: sign in to {sign_in.url} in your browser: {sign_in.authorization_url}",
            file=sys.stderr,
        )

    try:
        return OAuth(
            client_id=args.oauth_client_id,
            client_secret=secret if args.oauth_client_id else None,
            client_metadata_url=args.oauth_client_metadata_url,
            scope=args.oauth_scope,
            open_browser=not args.no_browser,
            on_sign_in=tell,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _add_trash_parser(commands: Any) -> None:
    audit = _Parser(add_help=False)
    audit.add_argument("--audit", metavar="FILE", help="append the audit records of these actions to FILE")
    audit.add_argument(
        "--audit-required", action="store_true", help="do nothing that cannot be recorded in FILE first"
    )
    t = commands.add_parser(
        "trash",
        help="list, restore or empty the trash that deletes go to",
        description="The per-user trash: what servers deleted through the broker, kept "
        "(by default) for 30 days and up to 1 GiB.",
    )
    actions = t.add_subparsers(dest="trash_action", metavar="ACTION", parser_class=_Parser)
    listing = actions.add_parser("list", parents=[audit], help="the entries, newest first (the default)")
    listing.add_argument("--json", action="store_true", help="one JSON object per entry, one per line")
    restore = actions.add_parser("restore", parents=[audit], help="put an entry back where it was")
    restore.add_argument("id", metavar="ID", help="the entry's id, or its last 8 characters")
    restore.add_argument("--to", metavar="PATH", help="restore it there instead (a folder: into it)")
    restore.add_argument("--overwrite", action="store_true", help="replace what is there now (for good)")
    empty = actions.add_parser("empty", parents=[audit], help="delete entries for good")
    empty.add_argument(
        "--older-than", type=float, metavar="DAYS", help="only those deleted more than DAYS ago"
    )


def _run_trash(args: argparse.Namespace) -> int:
    config = BrokerConfig(
        audit_path=getattr(args, "audit", None), audit_required=getattr(args, "audit_required", False)
    )
    with AuditLog(path=config.audit_path) as audit:
        trash = TrashCan(default_trash_dir(), audit=audit, config=lambda: config)
        if args.trash_action == "restore":
            entry = trash.find(args.id)
            where = trash.restore(entry, to=args.to, overwrite=args.overwrite)
            print(
                f"jupyter-fsbroker: restored {printable(entry.path)} to {printable(where)}", file=sys.stderr
            )
        elif args.trash_action == "empty":
            if args.older_than is not None and not args.older_than >= 0:
                raise UsageError("--older-than must be a number of days, 0 or more")
            older = None if args.older_than is None else args.older_than * 86400.0
            count = len(trash.empty(older_than=older))
            print(
                f"jupyter-fsbroker: deleted {count} trash entr{'y' if count == 1 else 'ies'} for good",
                file=sys.stderr,
            )
        elif getattr(args, "json", False):
            for entry in trash.list():
                print(json.dumps(dataclasses.asdict(entry), ensure_ascii=False))
        else:
            # No retention line: each broker applies its own settings, which this process does not know.
            print(trash_text(trash.list(), time.time()))
    return EXIT_OK


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
    if args.list_tools and args.call:
        raise UsageError("give --call TOOL or --list-tools, not both")
    oauth = _oauth(args)
    if command and (args.oauth_client_id or args.oauth_client_metadata_url or args.oauth_scope):
        raise UsageError("the --oauth options are for a --url server")
    sandbox = _sandbox_choice(args)
    echo = _ServerEcho(quiet=args.quiet)
    config = BrokerConfig(
        audit_path=args.audit,
        audit_required=args.audit_required,
        advertise_roots=True if args.advertise_roots else None,
        advertise_read_only_roots=args.advertise_read_only_roots,
        trash_max_bytes=args.trash_max_bytes,
        **({} if args.trash_max_age is None else {"trash_max_age": args.trash_max_age}),
    )
    broker = Broker(config)
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
        from .protocol.connector import connect

        conn = await connect(
            broker,
            args.name,
            command=command[0] if command else None,
            args=command[1:],
            url=args.url,
            headers=headers,
            auth=oauth if args.url else None,
            consenter=consenter,
            on_log=echo,
            sandbox=sandbox if command else None,
            era=args.era,
        )
        echo.start(conn.name)
        if args.list_tools:
            print(json.dumps(conn.tools, ensure_ascii=False))
            return EXIT_OK
        if args.call:
            status = await _call(conn, args.call, tool_args, args.timeout)
            # Said once the call is over: a server that asks for the roots and then uses files/*
            # (it brokers its files) has no notice by then.
            _print_notice(conn.roots_offer.notice)
            return status
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


def _print_notice(notice: RootsNotice | None) -> None:
    if notice is not None:
        print(f"jupyter-fsbroker: {printable(notice.text)}", file=sys.stderr, flush=True)


async def _serve(conn: ServerConnection) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    shown: set[RootsNotice] = set()

    def notice_changed(notice: RootsNotice | None) -> None:  # any thread: print each notice once
        if notice is not None and notice not in shown:
            shown.add(notice)
            _print_notice(notice)

    # The handlers first: whoever reads a notice may stop the serving at once.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    unfollow = conn.roots_offer.follow(notice_changed)
    notice_changed(conn.roots_offer.notice)  # it may have come while connecting
    try:
        confinement = f"; {conn.sandbox.describe()}" if conn.sandbox is not None else ""
        print(
            f"jupyter-fsbroker: serving {conn.name} ({conn.server_name or 'unnamed server'}, "
            f"protocol {conn.protocol_version}, {era_text(conn)}{confinement}); Ctrl-C to stop",
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
        unfollow()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _run_sign_out(url: str) -> int:
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"not an http(s) URL: {url!r}")
    from .protocol.auth import sign_out

    known = sign_out(url, notice=lambda why: print(f"jupyter-fsbroker: {why}", file=sys.stderr))
    print(
        f"jupyter-fsbroker: {'signed out of' if known else 'was not signed in to'} {printable(url)}",
        file=sys.stderr,
    )
    return EXIT_OK


def _skip_the_iri_grammar() -> None:
    """Keep jsonschema from compiling at import an IRI grammar (``rfc3987_syntax``) unused here.

    Seconds of every ``connect`` whose tools have output schemas: ``ClientSession`` checks
    results without a format checker, and this process runs nothing else that checks formats."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # import fails


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``jupyter-fsbroker`` with *argv* (default: the process's arguments); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.subcommand == "trash":
            return _run_trash(args)
        if args.subcommand == "signout":
            return _run_sign_out(args.url)
        if args.subcommand != "connect":
            parser.print_help(sys.stderr)
            return EXIT_FAILURE
        _skip_the_iri_grammar()
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
