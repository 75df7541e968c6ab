"""Fixtures shared by the client and kit tests: a broker sharing a prepared ``data`` tree, an HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from tests.protocol.servers.harness import Consents, HttpServer, make_broker, make_tree


@pytest.fixture(scope="module")  # module-scoped: some modules share async fixtures across their tests
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http() -> Iterator[HttpServer]:
    """The test server under uvicorn, one per module (tests that kill it start their own)."""
    with HttpServer() as server:
        yield server


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "data")


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(lock_wait=0.2), coalesce=0.01) as b:
        b.add_root(data, name="data")
        yield b


@pytest.fixture(scope="module")
def consents() -> Consents:
    """The consent policy of a module's clients: approve all but what it denies, recording each request."""
    return Consents()
