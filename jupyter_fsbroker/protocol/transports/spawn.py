"""The client side of stdio: spawn an MCP server, and shut it down as mcp does.

:func:`spawn` is a drop-in for mcp's ``stdio_client``: the same
arguments (``StdioServerParameters``, ``errlog``), the same spawning (the
command with its args, mcp's minimal safe environment plus ``env``, ``cwd``,
stderr to ``errlog``, a new session and so a new process group), the same
shutdown (stop reading and writing, close the server's stdin, wait 2 s, SIGTERM
its process group, wait 2 s, SIGKILL; then up to 2 s more until the group is
gone, all shielded from cancellation so a server is never left behind), and the
same ``(read_stream, write_stream)`` pair of ``SessionMessage`` streams, here the
project's own pipes (:mod:`.pipes`). POSIX only: on Windows :func:`spawn` is mcp's
``stdio_client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import TextIO

import anyio
from mcp.client.stdio import StdioServerParameters, get_default_environment

from .pipes import PipeReader, PipeWriter

__all__ = ["spawn"]


log = logging.getLogger(__name__)

# mcp's shutdown timings (mcp/client/stdio.py), kept so servers see the same goodbye.
_EXIT_GRACE = 2.0  # after stdin closes, for the server to exit on its own
_TERM_GRACE = 2.0  # after SIGTERM to the process group, before SIGKILL
_KILL_REAP = 2.0  # after SIGKILL to the process group, for it to end (the leader reaped)
_FLUSH_GRACE = 0.5  # for a message being written when the transport closes
_POLL = 0.01

# Pipes this large hold a whole 1 MiB chunk's answer; the default (64 KiB) needs ~20 wake-ups.
_PIPE_SIZE = 1024 * 1024


@contextlib.asynccontextmanager
async def spawn(
    server: StdioServerParameters, errlog: TextIO = sys.stderr
) -> AsyncIterator[tuple[PipeReader, PipeWriter]]:
    """Start *server* as a subprocess; yield its ``(read_stream, write_stream)``.

    Parameters
    ----------
    server
        The command, its args, extra environment (merged over mcp's
        ``get_default_environment()``) and working directory. Its ``encoding``
        fields are ignored: MCP's stdio is UTF-8.
    errlog
        The server's stderr (a file with a descriptor).

    Raises
    ------
    OSError
        The command cannot be started.
    ValueError
        Invalid spawn arguments (an embedded NUL).
    """
    if sys.platform == "win32":  # pragma: no cover - job objects and such: mcp knows how
        from mcp.client.stdio import stdio_client

        async with stdio_client(server, errlog=errlog) as streams:
            yield streams  # type: ignore[misc]
        return
    loop = asyncio.get_running_loop()
    process = subprocess.Popen(  # noqa: S603 - the command the user asked for
        [server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | (server.env or {}),
        cwd=server.cwd,
        start_new_session=True,
    )
    # No await until the try: a cancellation in between would leak the process.
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin.fileno(), process.stdout.fileno()
    for fd in (stdin, stdout):
        _enlarge_pipe(fd)
        os.set_blocking(fd, False)
    reader = PipeReader(loop, stdout)
    writer = PipeWriter(loop, stdin, on_broken=reader.detach)
    try:
        yield reader, writer
    finally:
        with anyio.CancelScope(shield=True):
            await _shut_down(process, reader, writer)


async def _shut_down(process: subprocess.Popen[bytes], reader: PipeReader, writer: PipeWriter) -> None:
    """mcp's order: stop traffic, let a write finish, close stdin, wait, SIGTERM the group, SIGKILL."""
    reader.close()  # keeps draining stdout, so a server blocked writing can exit
    writer.close()
    with anyio.move_on_after(_FLUSH_GRACE):
        await writer.flushed()
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError):
        process.stdin.close()
    if not await _exited(process, _EXIT_GRACE) and not await _terminate_group(process):
        log.warning("MCP server process group %d is still alive after SIGKILL; abandoning it", process.pid)
    reader.detach()
    # The reading thread ends at its next wake-up (or once an answer it is making is made):
    # its pipe and thread are gone with the transport, unless a file system holds it up.
    with anyio.move_on_after(_FLUSH_GRACE):
        while reader.reading:
            await anyio.sleep(_POLL)
    with contextlib.suppress(OSError):
        process.stdout.close()


async def _exited(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether *process* exited within *timeout* (polled, so it is reaped as it goes)."""
    with anyio.move_on_after(timeout):
        while process.poll() is None:
            await anyio.sleep(_POLL)
        return True
    return False


async def _terminate_group(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM the server's process group (its pid: a new session), then SIGKILL what is left.

    Returns whether the group is gone. A signal is only queued when ``killpg`` returns: each
    one is followed by a wait for the group to end, so that what the server started has
    stopped once the transport is closed, however long a loaded machine takes to schedule it.
    """
    group = process.pid
    for signum, grace in ((signal.SIGTERM, _TERM_GRACE), (signal.SIGKILL, _KILL_REAP)):
        # PermissionError is no proof that the group is gone: wait (and escalate) anyway.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signum)
        with anyio.move_on_after(grace):
            # poll() reaps the leader, or its zombie keeps the group alive.
            while process.poll() is None or _group_alive(group):
                await anyio.sleep(_POLL)
            return True
    return False


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _enlarge_pipe(fd: int) -> None:
    import fcntl

    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if setsize is not None:
        with contextlib.suppress(OSError):  # over the user's pipe quota: keep the default
            fcntl.fcntl(fd, setsize, _PIPE_SIZE)
