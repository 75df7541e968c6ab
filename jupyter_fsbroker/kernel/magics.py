"""``%fsbroker``: thin line magics over the Python API (:mod:`.notebook`, :mod:`.notebook_connection`).

Arguments are parsed with IPython's ``magic_arguments`` parser; the broker's own
errors (:class:`~jupyter_fsbroker.core.errors.BrokerError`) become
:class:`~IPython.core.error.UsageError` here, and only here.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shlex
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import MagicArgumentParser
from IPython.utils.process import arg_split  # type: ignore[attr-defined,unused-ignore]

from ..core.errors import BrokerError
from ..core.specs import add_root_spec, split_header
from ..sandbox import Sandbox
from ..sandbox.request import parse_ports
from .notebook import NotebookBroker

__all__ = ["FSBrokerMagics", "build_parser"]

_CALL = re.compile(r"\s*call\s+(?P<name>\S+)\s+(?P<tool>\S+)(?:\s+(?P<json>.*))?\s*\Z", re.DOTALL)


def build_parser() -> MagicArgumentParser:
    """The argument parser of ``%fsbroker`` (one sub-command per action)."""
    parser = MagicArgumentParser(  # type: ignore[no-untyped-call,unused-ignore]
        prog="%fsbroker", description="Share folders with MCP servers and control their access."
    )
    commands = parser.add_subparsers(dest="action", metavar="COMMAND", parser_class=MagicArgumentParser)
    p = commands.add_parser("root", help="share a folder")
    p.add_argument("spec", metavar="[NAME=]DIR", help="the folder, optionally named (default: its own name)")
    p.add_argument("--read-only", action="store_true", help="refuse every change below it")
    p = commands.add_parser("unroot", help="stop sharing a folder")
    p.add_argument("name", metavar="NAME")
    p = commands.add_parser("allow", help="pre-approve a path for every connection")
    p.add_argument("path", metavar="PATH", help="root-relative (data/raw), absolute, or file://")
    p.add_argument(
        "ops", metavar="OPS", nargs="?", default="read", help="comma list of read,write,delete,watch"
    )
    p = commands.add_parser("connect", help="connect to an MCP server")
    p.add_argument("name", metavar="NAME")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="the server's Streamable HTTP endpoint")
    target.add_argument("--command", metavar="'CMD ARGS'", help="start the server over stdio")
    p.add_argument(
        "--header", action="append", default=[], metavar="'K: V'", help="an HTTP header (repeatable)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to connect (default 30)")
    p.add_argument("--sandbox", action="store_true", help="confine the local server: files only via files/*")
    p.add_argument(
        "--sandbox-roots",
        action="store_true",
        help="confine it, but let it read and write the read-write roots directly (create, change, rename "
        "and delete files there, with no grant, consent or audit record) and read the read-only ones",
    )
    p.add_argument(
        "--sandbox-net", metavar="PORTS", help="no TCP but connections to these ports ('' for none)"
    )
    p.add_argument(
        "--no-sandbox", action="store_true", help="do not confine it, whatever FSBroker.sandbox says"
    )
    p.add_argument(
        "--advertise-roots",
        action="store_const",
        const=True,
        help="hand the server the shared folders' locations (file:// paths), not only their names",
    )
    p.add_argument("--oauth-client-id", metavar="ID", help="sign in as this pre-registered OAuth client")
    p.add_argument("--oauth-scope", metavar="SCOPE", help="the OAuth scopes to ask for (space-separated)")
    p.add_argument("--no-auth", action="store_true", help="never sign in: a server's 401 fails the connect")
    p = commands.add_parser("signout", help="forget the sign-in to a connection's server (and close it)")
    p.add_argument("name", metavar="NAME")
    p = commands.add_parser("call", help="call a tool and show its result")
    p.add_argument("name", metavar="NAME")
    p.add_argument("tool", metavar="TOOL")
    p.add_argument("json", metavar="JSON", nargs="?", help="the arguments, a JSON object (rest of the line)")
    p = commands.add_parser("disconnect", help="close a connection (the kill switch)")
    p.add_argument("name", metavar="NAME")
    p = commands.add_parser("revoke", help="revoke a connection's grants")
    p.add_argument("name", metavar="NAME")
    p.add_argument("path", metavar="PATH", nargs="?", help="only grants on this path (default: all)")
    commands.add_parser("status", help="show the dashboard (text in a terminal)")
    commands.add_parser("why", help="the full traceback of the last error (shown short in the cell)")
    p = commands.add_parser("trash", help="list what servers deleted; restore it, or empty the trash")
    actions = p.add_subparsers(dest="trash_action", metavar="ACTION", parser_class=MagicArgumentParser)
    actions.add_parser("list", help="the entries, newest first (the default)")
    p = actions.add_parser("restore", help="put an entry back where it was deleted from")
    p.add_argument("id", metavar="ID", help="the entry's id, or its last 8 characters")
    p.add_argument("--to", metavar="PATH", help="restore it there instead (a folder: into it)")
    p.add_argument("--overwrite", action="store_true", help="replace what is there now (for good)")
    p = actions.add_parser("empty", help="delete entries for good")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="only those deleted more than DAYS ago")
    return parser


def _commands(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The sub-commands of *parser* and their one-line help, in the order they were added."""
    for action in parser._actions:  # argparse keeps sub-parsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def _command_list(commands: dict[str, str]) -> str:
    width = max(map(len, commands), default=0)
    return "\n".join(f"  %fsbroker {name:<{width}}  {text}" for name, text in commands.items())


def _arguments(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the tool's arguments are not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise UsageError('the tool\'s arguments must be a JSON object, like {"path": "data/x.csv"}')
    return value


def _sandbox(args: argparse.Namespace) -> bool | str | Sandbox | None:
    """What ``connect``'s sandbox options ask for (``None``: the ``FSBroker.sandbox`` setting)."""
    asked = args.sandbox or args.sandbox_roots or args.sandbox_net is not None
    if args.no_sandbox:
        if asked:
            raise UsageError("--no-sandbox contradicts the other sandbox options")
        return False
    if not asked:
        return None
    try:
        ports = parse_ports(args.sandbox_net) if args.sandbox_net is not None else None
    except ValueError as exc:
        raise UsageError(f"--sandbox-net: {exc}") from None
    return Sandbox(level="roots" if args.sandbox_roots else "files", connect_ports=ports)


def _auth(broker: NotebookBroker, args: argparse.Namespace) -> Any:
    """What ``connect``'s sign-in options ask for (``None``: the ``FSBroker.oauth_*`` settings)."""
    if args.no_auth:
        if args.oauth_client_id or args.oauth_scope:
            raise UsageError("--no-auth contradicts the other sign-in options")
        return False
    if not (args.oauth_client_id or args.oauth_scope):
        return None
    import dataclasses

    base = broker.sign_ins.traitlet_settings()
    changes = {"client_id": args.oauth_client_id, "scope": args.oauth_scope}
    if args.oauth_client_id and args.oauth_client_id != base.client_id:
        changes["client_secret"] = None  # the setting's secret belongs to the setting's client
    return dataclasses.replace(
        base, **{k: v for k, v in changes.items() if v is not None or k == "client_secret"}
    )


@magics_class
class FSBrokerMagics(Magics):
    """The ``%fsbroker`` line magic.

    Parameters
    ----------
    shell
        The IPython shell.
    broker
        Returns the notebook broker to act on.
    """

    def __init__(self, shell: Any, broker: Callable[[], NotebookBroker]) -> None:
        super().__init__(shell)  # type: ignore[no-untyped-call,unused-ignore]
        self._broker = broker
        self._parser = build_parser()

    @line_cell_magic  # type: ignore[untyped-decorator,unused-ignore]
    @no_var_expand  # type: ignore[untyped-decorator,unused-ignore]
    def fsbroker(self, line: str, cell: str | None = None) -> Any:
        """Share folders with MCP servers, connect them, and control their access.

          %fsbroker root [NAME=]DIR [--read-only]   share a folder (NAME defaults to its own name)
          %fsbroker unroot NAME                     stop sharing it (its grants end)
          %fsbroker allow PATH [OPS]                pre-approve PATH for every server;
                                                    OPS: comma list of read,write,delete,watch
                                                    (default read)
          %fsbroker connect NAME --url URL [--header 'K: V']...
          %fsbroker connect NAME --command "CMD ARGS" [--sandbox | --sandbox-roots]
                                                    connect to an MCP server over Streamable
                                                    HTTP or stdio [--timeout SECONDS]; a
                                                    sandboxed local server reaches your files
                                                    only through the broker (--sandbox-roots:
                                                    it also reads AND WRITES the read-write
                                                    roots directly, with no grant, consent or
                                                    audit, and reads the read-only ones)
                                                    [--sandbox-net PORTS: and TCP only to these
                                                    ports; --no-sandbox: not FSBroker.sandbox's
                                                    default]
          %fsbroker connect ... --advertise-roots   tell the server where the shared folders are
                                                    too (by default: their names only)
          %fsbroker connect NAME --url URL [--oauth-client-id ID] [--oauth-scope SCOPE]
                                                    a server that asks you to sign in shows a
                                                    "Sign in" card in the cell (FSBroker.oauth_*
                                                    settings; --no-auth: never sign in)
          %fsbroker signout NAME                    forget the sign-in's tokens, close NAME
          %fsbroker call NAME TOOL [JSON]           call a tool and show its result; JSON (the
                                                    arguments) is the rest of the line
          %fsbroker disconnect NAME                 close a connection: its grants, locks and
                                                    watches end at once
          %fsbroker revoke NAME [PATH]              revoke a connection's grants (on PATH)
          %fsbroker status                          show the dashboard (text in a terminal)
          %fsbroker why                             the full traceback of the last error (a
                                                    cell shows the broker's errors short)
          %fsbroker trash                           what servers deleted, newest first, with ids
          %fsbroker trash restore ID [--to PATH] [--overwrite]
                                                    put it back where it was (ID: its last 8
                                                    characters do); --to: elsewhere;
                                                    --overwrite: replace what is there
          %fsbroker trash empty [--older-than DAYS] delete the trash's entries for good

        PATH is root-relative (data/raw), absolute, or a file:// URI inside a
        shared folder. Consent prompts appear in the cell that calls a tool;
        otherwise in the dashboard. Settings: %config FSBroker.

        Examples
        --------
          %fsbroker root data=./data
          %fsbroker allow data/raw read,watch
          %fsbroker connect analysis --command "python -m jupyter_fsbroker.examples.analysis_server"
          %fsbroker call analysis profile_csv {"path": "data/raw/sales.csv"}
          %fsbroker status

        The same from Python: broker = jupyter_fsbroker.get_broker(), then
        broker.add_root, broker.allow, broker.connect, conn.call_tool,
        conn.revoke, conn.close, broker.dashboard(), broker.trash().
        """
        # The text above is what `%fsbroker?` prints as it is: plain text, no markup.
        if cell is not None:
            raise UsageError(
                "%fsbroker is a line magic: write each command on its own line, as %fsbroker COMMAND."
                "\nThe commands:\n" + _command_list(_commands(self._parser))
            )
        try:
            return self._run(line)
        except BrokerError as exc:
            raise UsageError(str(exc)) from None

    def _run(self, line: str) -> Any:
        call = _CALL.match(line)
        if call is not None:
            return self._call(self._broker(), call["name"], call["tool"], call["json"])
        try:
            argv: list[str] = arg_split(line, posix=True)  # type: ignore[no-untyped-call,unused-ignore]
        except ValueError as exc:  # an unclosed quote
            raise UsageError(f"%fsbroker: {exc}") from None
        commands = _commands(self._parser)
        if not argv:
            listed = _command_list(commands)
            raise UsageError(f"%fsbroker needs a command:\n{listed}\nSee %fsbroker? for more.")
        if argv[0] not in commands:
            near = difflib.get_close_matches(argv[0], list(commands), n=1)
            hint = f" Did you mean `{near[0]}`?" if near else ""
            raise UsageError(
                f"%fsbroker has no command {argv[0]!r}.{hint}\nThe commands:\n" + _command_list(commands)
            )
        args = self._parser.parse_args(argv)
        handler = getattr(self, f"_do_{args.action}")
        return handler(self._broker(), args)

    # -- sub-commands --------------------------------------------------------------------------

    def _do_why(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        # The cell showed the short form (BrokerError._render_traceback_); IPython's %tb
        # would show that again, so the traceback is formatted here, bypassing it.
        value = getattr(sys, "last_value", None)
        if value is None:
            print("No error yet.")
            return
        shell = self.shell
        assert shell is not None  # a magic runs in a shell
        stb = shell.InteractiveTB.structured_traceback(type(value), value, value.__traceback__)
        print(shell.InteractiveTB.stb2text(stb))

    def _do_root(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        root = add_root_spec(broker, args.spec, read_only=args.read_only)
        access = "read-only" if root.read_only else "read-write"
        print(f"Sharing {root.path} as {root.name} ({access}).")

    def _do_unroot(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        root = broker.remove_root(args.name)
        print(f"No longer sharing {root.name} ({root.path}).")

    def _do_allow(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        grant = broker.allow(args.path, args.ops)
        print(f"Pre-approved {', '.join(grant.operations)} on {grant.path} for every connection.")

    def _do_connect(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        if args.command is not None:
            try:
                command = shlex.split(args.command)
            except ValueError as exc:
                raise UsageError(f"--command: {exc}") from None
            if not command:
                raise UsageError("--command is empty")
            if args.oauth_client_id or args.oauth_scope or args.no_auth:
                raise UsageError("the sign-in options are for --url servers")
            conn = broker.connect(
                args.name,
                command=command,
                timeout=args.timeout,
                sandbox=_sandbox(args),
                advertise_roots=args.advertise_roots,
            )
            if conn.sandbox is not None and (conn.sandbox.confined or conn.sandbox.reason):
                print(f"{conn.name}: {conn.sandbox.describe()}")
        else:
            if _sandbox(args) is not None:
                raise UsageError("the sandbox options are for --command: a --url server runs elsewhere")
            broker.connect(
                args.name,
                url=args.url,
                headers=dict(split_header(h) for h in args.header),
                timeout=args.timeout,
                advertise_roots=args.advertise_roots,
                auth=_auth(broker, args),
            )

    def _do_signout(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        known = broker.sign_out(args.name)
        conn = broker.connections.get(args.name)
        if conn is not None:
            conn.wait_closed()  # as disconnect does: the next cell finds it closed
        print(
            f"Signed out of {args.name}." if known else f"{args.name} was not signed in; closed it if open."
        )

    def _do_call(self, broker: NotebookBroker, args: argparse.Namespace) -> Any:  # pragma: no cover
        # Reached only when the line did not match _CALL (e.g. "call NAME" without a tool).
        return self._call(broker, args.name, args.tool, args.json)

    @staticmethod
    def _call(broker: NotebookBroker, name: str, tool: str, arguments: str | None) -> Any:
        """Call *tool*; return its data (structured content, or its text as JSON, or text).

        That is what ``conn.call_tool(...)`` shows too (:class:`~.tool_results.ToolResult`
        displays its data the way IPython prints it).
        """
        result = broker.connection(name).call_tool(tool, _arguments(arguments), raise_on_error=False)
        if result.is_error:
            print(f"{name}: {tool} reported an error: {result.text}", file=sys.stderr)
            return None
        return result.data

    def _do_disconnect(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        broker.disconnect(args.name)
        print(f"Disconnected {args.name}.")

    def _do_revoke(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        revoked = broker.connection(args.name).revoke(args.path)
        where = f" on {args.path}" if args.path else ""
        print(f"Revoked {len(revoked)} grant{'' if len(revoked) == 1 else 's'} of {args.name}{where}.")

    def _do_status(self, broker: NotebookBroker, args: argparse.Namespace) -> None:
        broker.show_status()

    def _do_trash(self, broker: NotebookBroker, args: argparse.Namespace) -> Any:
        trash = broker.trash()
        if args.trash_action == "restore":
            entry = broker.core.trash.find(args.id)
            where = trash.restore(entry, to=args.to, overwrite=args.overwrite)
            print(f"Restored {entry.path} to {where}.")
            return None
        if args.trash_action == "empty":
            older = None if args.older_than is None else args.older_than * 86400.0
            count = trash.empty(older_than=older)
            print(f"Deleted {count} trash entr{'y' if count == 1 else 'ies'} for good.")
            return None
        return trash.list()
