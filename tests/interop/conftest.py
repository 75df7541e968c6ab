"""Fixtures of the interop tests: the pinned npm packages, a free port, a shared data folder, an issuer.

The packages are installed by the tests themselves (:mod:`.npm`). Without node,
npm or the registry the tests are skipped with the reason — except under CI
(``CI=true``), where that is a failure: these tests must run there.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from tests.interop.authorization_server import authorization_server
from tests.interop.npm import NodeTools, install_or_skip
from tests.support.brokers import make_broker


@pytest.fixture(scope="session")
def node_tools() -> NodeTools:
    return install_or_skip("INTEROP TESTS", "the interop tests")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    """A port free right now on 127.0.0.1, for a server that can only be told a port.

    There is a window in which another process may take it: the caller tries
    again if it was taken. Servers that can bind port 0 and say which port they
    got use that instead (``tests.support.servers``).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    rows = ["region,amount,units"] + [f"r{i % 5},{i * 2.5:.1f},{i % 9}" for i in range(2000)]
    (folder / "sales.csv").write_text("\n".join(rows) + "\n")
    (folder / "notes.txt").write_text("hello from the notebook\n")
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        yield b


@pytest.fixture
def issuer(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real authorization server's issuer URL and its log file (:mod:`.authorization_server`)."""
    with authorization_server(tmp_path) as server:
        yield server.issuer, server.log
