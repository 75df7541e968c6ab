"""Every view says whether a connection's local server runs sandboxed: the card, the dashboard, the status."""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_fsbroker.console.status import ConnectionView, sandbox_text, status_text
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.sandbox import Sandbox, SandboxStatus
from jupyter_fsbroker.widgets.markup import connection_html
from jupyter_fsbroker.widgets.places import card_text
from tests.widgets.conftest import FakeConnection, FakeView


@dataclass(eq=False)
class LocalView(FakeView):
    """A connection to a local server, with its sandbox."""

    sandbox: SandboxStatus | None = None


def test_the_words_for_each_case() -> None:
    confined = LocalView("boxed", sandbox=SandboxStatus(Sandbox(level="roots", connect_ports=(443,)), abi=7))
    assert sandbox_text(confined) == "sandboxed (roots, network: port 443; Landlock ABI 7)"
    old = LocalView("old", sandbox=SandboxStatus(Sandbox(), abi=5))
    assert sandbox_text(old) == "sandboxed (files; Landlock ABI 5, no signal or abstract-socket scoping)"
    failed = LocalView("free", sandbox=SandboxStatus(reason="sandbox unavailable: no Landlock"))
    assert sandbox_text(failed) == "not sandboxed (sandbox unavailable: no Landlock)"
    assert sandbox_text(LocalView("plain", sandbox=SandboxStatus())) == "not sandboxed"
    assert sandbox_text(FakeView("remote")) == "", "a view without sandbox (a remote server) says nothing"
    assert isinstance(confined, ConnectionView)


def test_card_dashboard_row_and_status(broker: Broker) -> None:
    view = LocalView("boxed", sandbox=SandboxStatus(Sandbox(), abi=7))
    card = FakeConnection("boxed", "snooping", tools=(), sandbox=view.sandbox)
    assert card_text(card).endswith(", 0 tools, sandboxed (files; Landlock ABI 7)")
    row = connection_html("boxed", "s", "stdio", "2025-06-18", "connected", sandbox_text(view))
    assert row.endswith(" · sandboxed (files; Landlock ABI 7)")
    lines = status_text(broker, [view, FakeView("remote", transport="http")]).splitlines()
    assert next(line for line in lines if "boxed" in line).endswith(
        "connected  sandboxed (files; Landlock ABI 7)"
    )
    assert next(line for line in lines if "remote" in line).endswith("connected")
