"""``jupyter-fsbroker``: the broker without a notebook, for scripts, CI and terminals.

::

    jupyter-fsbroker connect [OPTIONS] (--url URL | -- COMMAND [ARG...])

connects to an MCP server, shares the given roots, and answers its ``files/*``
requests. With ``--call TOOL`` it calls one tool, prints the result as JSON on
stdout and exits (0: the tool succeeded, 1: it reported an error, 2: anything
else); without, it serves until the server ends the connection or the process
receives SIGINT or SIGTERM. Consent for paths not pre-approved with ``--allow``
is asked on the terminal when stdin is one, and refused otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, NoReturn, TextIO
from urllib.parse import urlsplit

from .core.broker import Broker, BrokerConfig
from .core.consent import ConsentDecision, Consenter, ConsentRequest, DenyingConsenter
from .core.errors import BrokerError
from .core.grants import OPERATIONS
from .protocol.client import ServerConnection, connect

__all__ = ["TerminalConsenter", "main"]

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
        "--name", help="the connection's name in prompts and the audit log (default: from the server)"
    )
    c.add_argument("--call", metavar="TOOL", help="call TOOL, print its result as JSON and exit")
    c.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments (default {})")
    c.add_argument("--audit", metavar="FILE", help="append audit records to FILE as JSON Lines")
    c.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="limit for --call (default 300)"
    )
    c.add_argument("command", nargs=argparse.REMAINDER, help="after --: the server command and its arguments")
    return parser


def _split_root(spec: str) -> tuple[str | None, str]:
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name:
        return name, path
    return None, spec


def _split_allow(spec: str) -> tuple[str, tuple[str, ...]]:
    path, sep, ops = spec.rpartition(":")
    if sep and path and all(op in OPERATIONS for op in ops.split(",")):
        return path, tuple(ops.split(","))
    return spec, ("read",)


def _parse_headers(specs: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {spec!r}: write it as 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    return headers


class TerminalConsenter:
    """Asks for consent on the terminal, one request at a time.

    Prompts go to *output* (stderr by default, so stdout stays clean for
    results); answers are read from *input*. A request that times out or whose
    connection closes is withdrawn from the terminal and refused.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self._input = input or sys.stdin
        self._output = output or sys.stderr
        self._queue: queue.Queue[tuple[ConsentRequest, Future[ConsentDecision]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fsbroker-consent-prompt", daemon=True)
        self._thread.start()

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        self._queue.put((request, future))
        return future

    def close(self) -> None:
        """Stop the prompt thread."""
        self._queue.put(None)
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            request, future = item
            if future.set_running_or_notify_cancel():
                try:
                    decision = self._ask(request, future)
                except Exception as exc:  # a closed terminal must not hang the server
                    future.set_exception(exc)
                else:
                    if decision is not None:
                        future.set_result(decision)

    def _say(self, text: str) -> None:
        self._output.write(text)
        self._output.flush()

    def _ask(self, request: ConsentRequest, future: Future[ConsentDecision]) -> ConsentDecision | None:
        lines = [f"\n{request.server} asks for access: {request.message or '(no message)'}"]
        for item in request.items:
            mark = "  +" if item.approvable else "  -"
            note = "" if item.approvable else f"  (not approvable: {item.reason})"
            ro = "  (read-only folder)" if item.read_only else ""
            lines.append(f"{mark} {item.path}{note}{ro}")
        lines.append(f"  operations: {', '.join(request.operations)}")
        lines.append(f"Approve? [y]es / [r]ead only / [N]o (refused in {request.timeout:.0f} s): ")
        self._say("\n".join(lines))
        answer = self._read_line(future, request.deadline)
        if answer is None:
            self._say("\n(no answer: refused)\n")
            return None if future.cancelled() else ConsentDecision.deny()
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return ConsentDecision.approve_all(request)
        if answer in ("r", "read"):
            return ConsentDecision(request.approvable_paths, ("read",))
        return ConsentDecision.deny()

    def _read_line(self, future: Future[ConsentDecision], deadline: float) -> str | None:
        while not future.cancelled() and time.time() < deadline:
            ready, _, _ = select.select([self._input], [], [], 0.2)
            if ready:
                line = self._input.readline()
                return line if line else None
        return None


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
    headers = _parse_headers(args.header)
    name = args.name or (urlsplit(args.url).netloc if args.url else os.path.basename(command[0]))

    broker = Broker(BrokerConfig(audit_path=args.audit))
    consenter, terminal = _make_consenter()
    conn: ServerConnection | None = None
    try:
        try:
            for spec, read_only in [(s, False) for s in args.root] + [(s, True) for s in args.root_ro]:
                root_name, path = _split_root(spec)
                broker.add_root(path, root_name, read_only=read_only)
            for spec in args.allow:
                path, ops = _split_allow(spec)
                broker.allow(path, ops)
        except BrokerError as exc:
            raise UsageError(str(exc)) from None
        conn = await connect(
            broker,
            name,
            command=command[0] if command else None,
            args=command[1:],
            url=args.url,
            headers=headers,
            consenter=consenter,
        )
        if args.call:
            return await _call(conn, args.call, tool_args, args.timeout)
        return await _serve(conn)
    finally:
        if conn is not None:
            await conn.aclose()
        broker.close()
        if terminal is not None:
            terminal.close()


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
        print(
            f"jupyter-fsbroker: serving {conn.name} ({conn.server_name or 'unnamed server'}, "
            f"protocol {conn.protocol_version}); Ctrl-C to stop",
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
    except (BrokerError, TimeoutError, OSError) as exc:
        message = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            message = "timed out"
        print(f"jupyter-fsbroker: {message}", file=sys.stderr)
        return EXIT_FAILURE
