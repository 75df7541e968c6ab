"""The dashboard's server log: a view of each connection's log (stderr lines and MCP log messages)."""

from __future__ import annotations

from dataclasses import dataclass, field

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.serverlog import ServerLog
from jupyter_fsbroker.widgets.dashboard import Dashboard

from .conftest import WAIT, FakeView


@dataclass(eq=False)
class LoggingView(FakeView):
    """A connection view with a server log, as the kernel's connections have."""

    log: ServerLog = field(default_factory=ServerLog)


def test_the_server_log_shows_every_connections_log_newest_first_and_follows_it(broker: Broker) -> None:
    analysis, other = LoggingView("analysis"), LoggingView("other")
    analysis.log.add_stderr("server starting")
    other.log.add_message("warning", "disk almost full", "storage")
    dash = Dashboard(broker, lambda: [analysis, other])
    try:
        assert "fsbroker-server-log" in dash.server_log_html._dom_classes
        html = dash.server_log_html.value
        assert html.index("disk almost full") < html.index("server starting")  # newest first
        assert "storage: disk almost full" in html and "warning" in html and "stderr" in html
        # A new entry schedules a refresh: the view follows the log.
        analysis.log.add_message("error", "<script>alert(1)</script> \x1b[2J")
        assert dash.flush(WAIT)
        html = dash.server_log_html.value
        assert html.index("&lt;script&gt;") < html.index("disk almost full")
        assert "<script>" not in html and "\\x1b[2J" in html
    finally:
        dash.close()
    renders = dash.renders
    analysis.log.add_stderr("after close")  # no longer followed
    assert dash.renders == renders


def test_views_without_a_log_show_nothing(broker: Broker) -> None:
    dash = Dashboard(broker, lambda: [FakeView("plain")])
    try:
        assert "No server has said anything yet." in dash.server_log_html.value
    finally:
        dash.close()
