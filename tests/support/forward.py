"""A byte forwarder between loopback TCP ports and unix sockets, for :mod:`tests.support.netns`.

    python forward.py tcp2unix 127.0.0.1:PORT=/path/to.sock ...  # listen on TCP, connect to the socket
    python forward.py unix2tcp /path/to.sock=127.0.0.1:PORT ...  # listen on the socket, connect to TCP

A unix socket is a file, so it crosses network namespaces: a ``unix2tcp`` forwarder on the host
and a ``tcp2unix`` one inside a namespace make a host port appear on the namespace's loopback.
It prints ``ready`` on stdout once every listener is up, and runs until it is terminated. It
imports nothing of the project (it runs by path, inside the namespace too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _tcp(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def _serve(mode: str, listen: str, target: str) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if mode == "tcp2unix":
                up_reader, up_writer = await asyncio.open_unix_connection(target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*_tcp(target))
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    if mode == "tcp2unix":
        return await asyncio.start_server(handle, *_tcp(listen))
    if os.path.exists(listen):
        os.unlink(listen)
    return await asyncio.start_unix_server(handle, listen)


async def main(mode: str, pairs: list[str]) -> None:
    if mode not in ("tcp2unix", "unix2tcp"):
        raise SystemExit(f"unknown mode {mode!r}: tcp2unix or unix2tcp")
    servers = [await _serve(mode, *pair.split("=", 1)) for pair in pairs]
    print("ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
