"""The Streamable HTTP transport against mcp's own server: pooled connections, the session's headers."""

from __future__ import annotations

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import open_connection
from tests.protocol.servers.harness import HttpServer, ok, payload
from tests.support.proxy import proxy_to


@pytest.mark.anyio
async def test_round_trips_reuse_a_few_connections(broker: Broker, http: HttpServer) -> None:
    broker.allow("data", ops=("read",))
    async with proxy_to(http.url) as (proxy, url), open_connection(broker, "pooled", url=url) as conn:
        connected = proxy.accepted
        for _ in range(40):
            await ok(conn, "files/stat", {"path": "data/hello.txt"})
        # 40 tool calls and 40 answers: 80 POSTs. mcp's own client opened a connection for nearly each.
        assert proxy.accepted - connected <= 6, proxy.accepted


@pytest.mark.anyio
async def test_every_request_after_initialize_carries_the_session(broker: Broker, http: HttpServer) -> None:
    broker.allow("data", ops=("read",))
    async with open_connection(broker, "headers", url=http.url) as conn:
        session = payload(await conn.call_tool("info"))["session"]
        await ok(conn, "files/read", {"path": "data/hello.txt"})
        log = payload(await conn.call_tool("http_log"))["requests"]
    mine = [entry for entry in log if entry[1] == session]
    unsessioned = [entry for entry in log if entry[1] is None]
    # Only the server/discover and initialize POSTs of each connection (this server serves one
    # module, whose connections ask for the default era) come without one.
    assert unsessioned == [["POST", None]] * 2 * len({s for _, s in log if s is not None})
    assert {method for method, _ in mine} >= {"POST", "GET"}
