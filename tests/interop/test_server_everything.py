"""jupyter_fsbroker as the client of ``@modelcontextprotocol/server-everything``, and of a server that asks.

server-everything sends MCP log messages (``notifications/message``) and fetches
the roots (their names only: it learns no location); it offers its sampling and
elicitation tools only to clients that advertise those capabilities, which
jupyter_fsbroker does not. A server on the TypeScript SDK that asks anyway
(``js/asking_server.mjs``) must be refused at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import ServerConnection, connect
from tests.interop.conftest import free_port
from tests.interop.npm import NodeTools
from tests.support.env import server_env
from tests.support.serverlog import logged

pytestmark = pytest.mark.anyio

CLI = [sys.executable, "-m", "jupyter_fsbroker", "connect"]


@asynccontextmanager
async def everything_http(tools: NodeTools) -> AsyncIterator[str]:
    """server-everything's Streamable HTTP transport; yields its URL.

    It listens on the port its ``PORT`` variable names and cannot report one the
    OS chose (with ``PORT=0`` it prints 0), so a port found free is handed to it,
    and another one tried if it was taken meanwhile.
    """
    for _ in range(3):
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            *tools.server_everything,
            "streamableHttp",
            env={**os.environ, "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stderr is not None
            line = b""
            while b"listening on port" not in line and b"already in use" not in line:
                line = await asyncio.wait_for(proc.stderr.readline(), 30)
                assert line, "server-everything did not start"
            if b"listening on port" in line:
                yield f"http://127.0.0.1:{port}/mcp"
                return
        finally:
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()
    raise AssertionError("server-everything found no free port in three tries")


@asynccontextmanager
async def everything(tools: NodeTools, broker: Broker, transport: str) -> AsyncIterator[ServerConnection]:
    if transport == "stdio":
        conn = await connect(
            broker, None, command=tools.server_everything[0], args=tools.server_everything[1:]
        )
        try:
            yield conn
        finally:
            await conn.aclose()
        return
    async with everything_http(tools) as url:
        conn = await connect(broker, None, url=url)
        try:
            yield conn
        finally:
            await conn.aclose()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_log_messages_reach_the_log_and_python_logging(
    node_tools: NodeTools, broker: Broker, data: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="jupyter_fsbroker.server")
    async with everything(node_tools, broker, transport) as conn:
        assert conn.name == "mcp-servers/everything"
        roots = await conn.call_tool("get-roots-list", {})
        # Told the roots' names only (it uses no files/*), it learns no location of this machine.
        assert "no roots are currently configured" in roots["content"][0]["text"]
        assert str(data.resolve()) not in roots["content"][0]["text"]
        # It says so in a log message when it fetched the roots, and logs at random levels when asked.
        entry = await logged(conn.log, lambda e: e.source == "message" and "Roots updated" in e.text, 20.0)
        assert (entry.level, entry.logger) == ("info", "everything-server")
        await conn.call_tool("toggle-simulated-logging", {})
        await logged(conn.log, lambda e: e.source == "message" and "-level message" in e.text, 20.0)
        await conn.call_tool("toggle-simulated-logging", {})
    if transport == "stdio":
        assert any(e.source == "stderr" for e in conn.log.entries())
    else:  # no stderr over HTTP: the log holds the messages
        assert all(e.source == "message" for e in conn.log.entries())
    assert "[info] everything-server: Roots updated: 0 root(s)" in conn.log.text()
    notice = conn.roots_offer.notice
    assert notice is not None and notice.withheld == ("data",)
    names = {r.name for r in caplog.records}
    assert "jupyter_fsbroker.server.mcp-servers/everything" in names
    assert any("Roots updated" in r.getMessage() for r in caplog.records)


def test_log_messages_reach_the_clis_stderr(node_tools: NodeTools, data: Path) -> None:
    out = subprocess.run(
        [*CLI, "--root", f"data={data}", "--call", "get-roots-list", "--", *node_tools.server_everything],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **server_env()},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "[mcp-servers/everything] Starting default (STDIO) server..." in lines
    assert any(
        line.startswith("[mcp-servers/everything] info: everything-server: Roots updated") for line in lines
    ), lines


async def test_it_is_offered_no_sampling_nor_elicitation_and_a_server_that_asks_is_refused_at_once(
    node_tools: NodeTools, broker: Broker
) -> None:
    async with everything(node_tools, broker, "stdio") as conn:
        names = {tool["name"] for tool in conn.tools}
    assert not {"trigger-sampling-request", "trigger-elicitation-request"} & names
    asking = node_tools.script("asking_server.mjs")
    conn = await connect(broker, None, command=node_tools.node, args=[str(asking)])
    try:
        answers = json.loads((await conn.call_tool("ask", {}))["content"][0]["text"])
    finally:
        await conn.aclose()
    assert [(a["method"], a["error"]["code"]) for a in answers] == [
        ("sampling/createMessage", -32600),
        ("elicitation/create", -32600),
    ]
    assert "not supported" in answers[0]["error"]["message"]
