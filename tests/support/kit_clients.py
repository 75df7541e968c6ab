"""A test server module of the kit reached over stdio and over Streamable HTTP, as module fixtures.

A module whose tests run on both transports takes its fixtures from
:func:`transport_fixtures`::

    stdio, http, client = transport_fixtures("tests.serverkit.filesystem_server")

``client`` is parametrized: each test that takes it runs once over stdio and
once over HTTP, on connections kept for the module (their records reset before
each test). The module provides ``broker`` (see :func:`data_broker`) and the
``consents`` fixture its clients answer prompts with. :func:`kit_client` opens
one more connection, with a consenter of the test's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, Consenter
from tests.protocol.rawclient import HttpClient, RawClient, StdioClient, python_argv
from tests.protocol.servers.harness import Consents
from tests.support.brokers import make_broker
from tests.support.env import server_env
from tests.support.servers import analysis_server_http

__all__ = ["TRANSPORTS", "data_broker", "kit_client", "transport_fixtures"]

TRANSPORTS = ("stdio", "http")


@contextmanager
def data_broker(data: Path, **config: Any) -> Iterator[Broker]:
    """A broker sharing *data* as the root ``data``, its state beside it (*config*: BrokerConfig fields)."""
    with make_broker(data.parent, **config) as broker:
        broker.add_root(data, name="data")
        yield broker


@asynccontextmanager
async def kit_client(
    transport: str, module: str, broker: Broker, consenter: Consenter
) -> AsyncIterator[RawClient]:
    """*module* (a server with ``--http HOST:PORT``) started and connected over *transport*."""
    client: RawClient
    if transport == "stdio":
        argv = python_argv("-m", module)
        async with await StdioClient.start(argv, broker, env=server_env(), consenter=consenter) as client:
            yield client
        return
    with analysis_server_http(module=module) as server:
        name = f"{module.rpartition('.')[2]}-http"
        async with await HttpClient.start(server.url, broker, name=name, consenter=consenter) as client:
            yield client


def transport_fixtures(module: str) -> tuple[Any, Any, Any]:
    """The fixtures ``stdio``, ``http`` (a connection each, for the module) and ``client`` (either)."""

    async def connected(transport: str, broker: Broker, consents: Consents) -> AsyncIterator[RawClient]:
        async with kit_client(transport, module, broker, CallbackConsenter(consents.decide)) as client:
            yield client

    @pytest.fixture(scope="module")
    async def stdio(broker: Broker, consents: Consents) -> AsyncIterator[RawClient]:
        async for client in connected("stdio", broker, consents):
            yield client

    @pytest.fixture(scope="module")
    async def http(broker: Broker, consents: Consents) -> AsyncIterator[RawClient]:
        async for client in connected("http", broker, consents):
            yield client

    @pytest.fixture(params=TRANSPORTS)
    def client(request: pytest.FixtureRequest) -> RawClient:
        chosen: RawClient = request.getfixturevalue(request.param)
        chosen.reset()
        return chosen

    return stdio, http, client
