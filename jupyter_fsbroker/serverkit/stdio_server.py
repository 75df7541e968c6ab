"""Serving an mcp server over stdio on non-blocking pipes: :func:`run_stdio` and its streams.

mcp's own stdio transport spends a worker thread per line; reading the pipe
on the event loop (:class:`~.inbound.LineReader`, into one kept buffer) and
writing it through an asyncio pipe transport roughly halve the cost of a
round trip. While serving, the process's fd 0 and fd 1 are moved aside so
stray ``print()`` output cannot corrupt the wire. Nothing here knows about
files: any mcp server can be served this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from ..wire.caps import MiB
from .direct import DirectChannel
from .inbound import LineReader
from .mcp_internals import lowlevel_server

__all__ = ["run_stdio", "serve_stdio", "stdio_streams"]


def _is_pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


_Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@contextlib.asynccontextmanager
async def stdio_streams(*, max_line: int = 64 * MiB) -> AsyncIterator[_Streams]:
    """Serve the process's stdin and stdout as mcp message streams, on non-blocking pipes.

    Like mcp's ``stdio_server()``, but read and written on the event loop
    instead of a worker thread per line, which roughly halves the cost of a
    round trip.
    While serving, fd 0 reads from the null device and fd 1 writes to stderr,
    so stray ``print()`` output cannot corrupt the wire; both are restored on
    exit. Requires the asyncio backend and pipes or sockets as stdin and
    stdout; otherwise it falls back to mcp's ``stdio_server()``.

    Parameters
    ----------
    max_line
        Largest message accepted, in bytes.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or not (_is_pipe_like(0) and _is_pipe_like(1)):
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            yield cast("_Streams", (read_stream, write_stream))
        return

    import fcntl

    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    transports: list[asyncio.BaseTransport] = []
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    reader: LineReader | None = None
    try:
        wire_out = os.fdopen(fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3), "wb", buffering=0)
        # The wire now lives on private descriptors: stray reads of fd 0 see EOF,
        # stray writes to fd 1 go to stderr.
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        os.set_blocking(wire_in, False)
        reader = LineReader(loop, wire_in, max_line)
        write_transport, write_protocol = await loop.connect_write_pipe(
            lambda: _WriteProtocol(loop), wire_out
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        async with _pipe_streams(reader, writer) as streams:
            yield streams
    finally:
        if reader is not None:
            reader.close()
        os.close(wire_in)
        for transport in reversed(transports):
            transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        for fd in (0, 1):
            # The wire's descriptors made the (shared) pipes non-blocking.
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)


@contextlib.asynccontextmanager
async def _pipe_streams(reader: LineReader, writer: asyncio.StreamWriter) -> AsyncIterator[_Streams]:
    """mcp message streams over newline-delimited JSON on *reader* and *writer*."""
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](32)
    written = anyio.Event()
    # The helper's requests to the client skip mcp's session on these pipes (see .direct).
    direct = DirectChannel(writer)
    reader.decode = direct.wants_bytes

    async def read_lines() -> None:
        try:
            await read_messages()
        finally:
            direct.close()  # the requests still waiting for an answer get ClientDisconnectedError

    async def read_messages() -> None:
        async with inbound_send:
            async for raw in reader:
                if isinstance(raw, ValueError):  # not JSON, or too long and dropped
                    await inbound_send.send(raw)
                    continue
                if direct.route(raw):
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
                except Exception as exc:
                    await inbound_send.send(exc)
                    continue
                await inbound_send.send(SessionMessage(message))

    async def write_lines() -> None:
        try:
            async with outbound_receive:
                async for item in outbound_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.writelines((data.encode("utf-8"), b"\n"))
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            written.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines)
        tg.start_soon(write_lines)
        try:
            with direct.active():
                yield inbound, outbound
        finally:
            # Let the answers already queued reach the wire, then stop.
            outbound.close()
            with anyio.move_on_after(5, shield=True):
                await written.wait()
            tg.cancel_scope.cancel()


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for the write pipe (what ``StreamWriter.drain`` waits on)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._closed_future: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed_future.done():
            self._closed_future.set_result(None)

    def _get_close_waiter(self, stream: object) -> asyncio.Future[None]:
        return self._closed_future


async def serve_stdio(server: MCPServer[Any] | Server[Any]) -> None:
    """Serve *server* over stdio on :func:`stdio_streams` until stdin closes."""
    lowlevel = lowlevel_server(server)
    async with stdio_streams() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def run_stdio(server: MCPServer[Any] | Server[Any]) -> None:
    """Run *server* over stdio on non-blocking pipes (a faster ``server.run("stdio")``)."""
    anyio.run(serve_stdio, server, backend="asyncio")
