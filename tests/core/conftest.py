"""Fixtures for the core tests: a broker with a root called ``data`` in a temporary folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.limits import Limits
from tests.support.brokers import ALL_OPS, make_broker


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """The folder shared as root ``data``."""
    folder = tmp_path / "data"
    folder.mkdir()
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(lock_wait=0.3)) as b:
        b.add_root(data, name="data")
        yield b


@pytest.fixture
def conn(broker: Broker) -> Connection:
    """A connection with every operation granted on the whole root."""
    broker.allow("data", ops=ALL_OPS)
    return broker.connect("test-server")


def error_of(conn: Connection, method: str, params: dict[str, object]) -> FilesError:
    """The error *conn* answers to a request that must fail."""
    with pytest.raises(FilesError) as info:
        conn.handle(method, params)
    return info.value


def tree_snapshot(folder: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry below *folder* with its mode and content (or link target): to prove nothing changed."""
    result: dict[str, tuple[int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if os.path.islink(path):
                result[os.path.relpath(path, folder)] = (st.st_mode, os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    result[os.path.relpath(path, folder)] = (st.st_mode, f.read())
            else:
                result[os.path.relpath(path, folder)] = (st.st_mode, "")
    return result
