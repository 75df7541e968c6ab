"""A TCP proxy on the test's event loop, between a client and an HTTP server: count and cut connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Proxy:
    """A TCP proxy between the client and an HTTP server; :meth:`drop` cuts every connection."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        #: Connections accepted so far.
        self.accepted = 0
        self._transports: list[asyncio.WriteTransport] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    def drop(self) -> None:
        for transport in self._transports:
            transport.abort()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        self.drop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        self._transports += [writer.transport, up_writer.transport]
        pumps = [self._pump(reader, up_writer), self._pump(up_reader, writer)]
        tasks = [asyncio.ensure_future(pump) for pump in pumps]
        self._tasks.update(tasks)
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._tasks.difference_update(tasks)
            for stream in (writer, up_writer):
                stream.transport.abort()

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await source.read(1 << 16):
                sink.write(chunk)
                await sink.drain()
            sink.write_eof()


@contextlib.asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[tuple[Proxy, str]]:
    """A proxy to the server of *url* (``http://127.0.0.1:PORT/mcp``); yields it and its own URL."""
    proxy = Proxy(int(url.rsplit(":", 1)[1].split("/")[0]))
    try:
        yield proxy, await proxy.start()
    finally:
        await proxy.close()
