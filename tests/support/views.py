"""What the view tests share: a broker with two roots, a consent request, a connection as the views see it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.consent import ConsentItem, ConsentRequest
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol.roots_offer import RootsNotice
from jupyter_fsbroker.sandbox import SandboxStatus
from tests.support.brokers import make_broker

WAIT = 10.0  # seconds: the most any test waits for an event that is expected at once


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """The folder shared as root ``data``."""
    folder = tmp_path / "data"
    (folder / "sales").mkdir(parents=True)
    (folder / "sales" / "2024.csv").write_text("month,total\n1,10\n")
    (folder / "x.csv").write_text("a,b\n1,2\n")
    (folder / ".env").write_text("SECRET=1\n")
    return folder


@pytest.fixture
def ref(tmp_path: Path) -> Path:
    """The folder shared read-only as root ``ref``."""
    folder = tmp_path / "ref"
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "t.csv").write_text("t\n")
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path, ref: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(lock_wait=0.3)) as b:
        b.add_root(data, name="data")
        b.add_root(ref, name="ref", read_only=True)
        yield b


def make_request(
    *,
    timeout: float = 120.0,
    created_at: float | None = None,
    operations: tuple[str, ...] = ("read", "write"),
    message: str = "Profile the sales data",
) -> ConsentRequest:
    """A request with two approvable paths (one read-only) and two that are not."""
    items = (
        ConsentItem("data/sales", "data/sales", True),
        ConsentItem("/home/ana/config.json", None, False, "outside_roots"),
        ConsentItem("data/.env", "data/.env", False, "sensitive", False),
        ConsentItem("ref/tables", "ref/tables", True, None, True),
    )
    extra = {} if created_at is None else {"created_at": created_at}
    return ConsentRequest(
        server="analysis",
        connection_id="c0",
        message=message,
        items=items,
        operations=operations,
        timeout=timeout,
        **extra,  # type: ignore[arg-type]
    )


@dataclass
class FakeConnection:
    """What a connection card reads of a kernel connection (``sandbox``: of a local server's;
    ``roots_notice``: why its server got the shared folders' names only)."""

    name: str = "analysis"
    server_name: str = "Analysis Server"
    transport: str = "stdio"
    protocol_version: str | None = "2025-06-18"
    state: str = "open"
    closed: bool = False
    close_reason: str | None = None
    tools: tuple[dict[str, Any], ...] = field(default_factory=lambda: ({"name": "profile_csv"},))
    sandbox: SandboxStatus | None = None
    roots_notice: RootsNotice | None = None
    era: str | None = None

    def close(self) -> None:
        self.closed, self.state, self.close_reason = True, "closed", "closed by the user"


@dataclass(eq=False)
class FakeView:
    """A kernel connection as the dashboard sees it; ``close()`` is the kill switch."""

    name: str
    connection: Connection | None = None
    server_name: str = "Analysis Server"
    transport: str = "stdio"
    protocol_version: str | None = "2025-06-18"
    state: str = "connected"
    closed: threading.Event = field(default_factory=threading.Event)
    release: threading.Event | None = None  # when set, close() waits for it (a slow disconnect)

    def close(self) -> None:
        if self.release is not None:
            assert self.release.wait(WAIT)
        if self.connection is not None:
            self.connection.close()
        self.state = "closed"
        self.closed.set()
