"""The client against servers that behave like real ones: roots fetched late, log messages, stderr, names.

``servers/roots_server.py`` fetches ``roots/list`` some milliseconds after the
handshake and applies the answer later still, as the official filesystem server
does; its ``roots`` tool says which roots were in force when a call arrived and
what the answer carried: the roots' names, and their locations only where the
settings hand them over, with a notice when a server asked for them in vain.
Waits are on events (the connection's log, the gate's counters, the notice),
never on the clock.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.serverlog import LogEntry
from jupyter_fsbroker.protocol import ConnectError, RootsGrace, ServerConnection, connect, open_connection
from jupyter_fsbroker.protocol.roots_offer import RootsNotice
from tests.protocol.servers.harness import HttpServer, ok
from tests.support.brokers import make_broker
from tests.support.serverlog import logged

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parent / "servers" / "roots_server.py")


@asynccontextmanager
async def roots_server(
    broker: Broker, *options: str, name: str | None = "late", **kwargs: Any
) -> AsyncIterator[ServerConnection]:
    conn = await connect(broker, name, command=sys.executable, args=[SERVER, *options], **kwargs)
    try:
        yield conn
    finally:
        await conn.aclose()


async def roots_in_force(conn: ServerConnection) -> dict[str, Any]:
    result = await conn.call_tool("roots")
    assert result["isError"] is False, result
    seen: dict[str, Any] = json.loads(result["content"][0]["text"])
    return seen


# -- the roots race --------------------------------------------------------------------------------

#: The race is that of a server handed the roots' locations (it applies them itself): these
#: servers are handed them. A server told the names only needs no head start (tested below).
LOCATED: dict[str, Any] = {"advertise_roots": True}


async def test_the_first_call_waits_for_a_server_that_fetches_the_roots_late(
    broker: Broker, data: Path
) -> None:
    async with roots_server(broker, "--ask-after", "40", "--apply-after", "30", **LOCATED) as conn:
        seen = await roots_in_force(conn)
        assert seen["applied"] == [data.resolve().as_uri()] and seen["asked"] == 1
        gate = conn.roots_gate
        assert gate is not None and (gate.last_outcome, gate.waits) == ("answered", 1)
        await roots_in_force(conn)  # settled: later calls do not consult the gate again
        assert gate.waits == 1


async def test_without_the_grace_the_call_races_the_server(broker: Broker) -> None:
    """The race the gate exists for: the call arrives before the roots."""
    async with roots_server(broker, "--ask-after", "500", roots_grace=None, **LOCATED) as conn:
        assert conn.roots_gate is None
        assert (await roots_in_force(conn))["applied"] is None


async def test_a_server_that_already_asked_causes_no_wait(broker: Broker, data: Path) -> None:
    # "Already asked" means asked, answered, and given its settle time (zero here, so that
    # the test need not wait on the clock): the call then goes at once.
    async with roots_server(broker, "--ask-after", "0", roots_grace=RootsGrace(settle=0), **LOCATED) as conn:
        await logged(conn.log, lambda e: e.text == "roots applied")
        assert (await roots_in_force(conn))["applied"] == [data.resolve().as_uri()]
        gate = conn.roots_gate
        assert gate is not None and (gate.last_outcome, gate.waits) == ("answered", 0)


async def test_a_server_that_never_asks_is_given_a_quiet_period_only(broker: Broker) -> None:
    async with roots_server(broker, **LOCATED) as conn:
        assert (await roots_in_force(conn))["asked"] == 0
        gate = conn.roots_gate
        assert gate is not None and gate.last_outcome == "quiet" and gate.waits == 1


async def test_no_roots_shared_means_no_wait(tmp_path: Path) -> None:
    with make_broker(tmp_path) as empty:
        async with roots_server(empty, "--ask-after", "500", **LOCATED) as conn:
            gate = conn.roots_gate
            assert gate is not None and not gate.armed
            assert (await roots_in_force(conn))["applied"] is None
            assert (gate.last_outcome, gate.waits) == (None, 0)


async def test_a_server_told_the_names_only_is_not_waited_for(broker: Broker) -> None:
    """The default: no location goes out, so there is nothing for a server to apply first."""
    async with roots_server(broker, "--ask-after", "500") as conn:
        gate = conn.roots_gate
        assert gate is not None and not gate.armed
        assert (await roots_in_force(conn))["asked"] == 0  # the call did not wait the 500 ms
        assert (gate.last_outcome, gate.waits) == (None, 0)


async def test_a_call_right_after_the_roots_change_waits_for_the_new_ones(
    broker: Broker, data: Path, tmp_path: Path
) -> None:
    more = tmp_path / "more"
    more.mkdir()
    async with roots_server(broker, "--ask-after", "20", "--apply-after", "20", **LOCATED) as conn:
        await roots_in_force(conn)
        broker.add_root(more, name="more")
        seen = await roots_in_force(conn)  # at once: the call waits for the new roots
        assert seen["applied"] == [data.resolve().as_uri(), more.resolve().as_uri()]
        assert seen["asked"] == 2
        gate = conn.roots_gate
        assert gate is not None and (gate.last_outcome, gate.waits) == ("answered", 2)


# -- what roots/list carries -----------------------------------------------------------------------

NAMES_META = "filesystemBrokering"


async def fetched(conn: ServerConnection) -> dict[str, Any]:
    """What the server took from its last ``roots/list`` (it applies the answer, then logs it)."""
    await logged(conn.log, lambda e: e.text == "roots applied")
    return await roots_in_force(conn)


async def notice_naming(conn: ServerConnection, root: str, timeout: float = 10) -> RootsNotice:
    """The connection's notice once it names *root* among the withheld (now, or when it comes)."""
    loop = asyncio.get_running_loop()
    found: asyncio.Future[RootsNotice] = loop.create_future()

    def check(notice: RootsNotice | None) -> None:
        if notice is not None and root in notice.withheld and not found.done():
            found.set_result(notice)

    stop = conn.roots_offer.follow(lambda notice: loop.call_soon_threadsafe(check, notice))
    try:
        check(conn.roots_offer.notice)
        return await asyncio.wait_for(found, timeout)
    finally:
        stop()


async def test_by_default_a_server_learns_the_names_only_and_the_notice_says_why(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jupyter_fsbroker.protocol.roots_offer")
    (tmp_path / "ref").mkdir()
    broker.add_root(tmp_path / "ref", name="ref", read_only=True)
    async with roots_server(broker, "--ask-after", "0") as conn:
        seen = await fetched(conn)
        assert seen["raw"] == [] and seen["applied"] == []
        assert seen["meta"] == {NAMES_META: {"roots": [{"name": "data"}, {"name": "ref", "readOnly": True}]}}
        notice = conn.roots_offer.notice
        assert notice is not None and (notice.server, notice.withheld) == ("late", ("data", "ref"))
        assert notice.text.startswith(
            "late asked where the shared folders are (roots/list) and got only their names (data, ref): "
            "it has sent no files/* request, so it seems to open files itself, which would bypass "
            "consent, grants and the activity log. To let it: connect with advertise_roots=True "
            "(or --advertise-roots), or run it with sandbox='roots'."
        )
        assert notice.text.endswith("Read-only folders also need advertise_read_only_roots.")
        (tmp_path / "more").mkdir()
        broker.add_root(tmp_path / "more", name="more")  # it asks again
        again = await notice_naming(conn, "more")
        assert again.withheld == ("data", "ref", "more")
    logs = [r for r in caplog.records if r.name == "jupyter_fsbroker.protocol.roots_offer"]
    assert [(r.levelno, r.getMessage()) for r in logs] == [(logging.INFO, notice.text)]  # once


async def test_handed_over_on_request_read_only_roots_still_are_not(broker: Broker, tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    broker.add_root(tmp_path / "ref", name="ref", read_only=True)
    async with roots_server(broker, "--ask-after", "0", **LOCATED) as conn:
        seen = await fetched(conn)
        notice = conn.roots_offer.notice
    assert seen["raw"] == [{"uri": broker.roots.get("data").uri, "name": "data"}]
    assert seen["meta"] == {NAMES_META: {"roots": [{"name": "data"}, {"name": "ref", "readOnly": True}]}}
    assert notice is None  # it got what the settings give: nothing to say


async def test_read_only_roots_are_marked_when_listed(tmp_path: Path, data: Path) -> None:
    (tmp_path / "ref").mkdir()
    with make_broker(tmp_path, advertise_roots=True, advertise_read_only_roots=True) as b:
        b.add_root(data, name="data")
        b.add_root(tmp_path / "ref", name="ref", read_only=True)
        assert isinstance(b.config, BrokerConfig) and b.config.advertise_read_only_roots
        async with roots_server(b, "--ask-after", "0") as conn:
            raw = (await fetched(conn))["raw"]
    assert raw == [
        {"uri": data.resolve().as_uri(), "name": "data"},
        {"uri": (tmp_path / "ref").resolve().as_uri(), "name": "ref", "_meta": {"readOnly": True}},
    ]


async def test_advertise_read_only_roots_alone_hands_over_nothing(tmp_path: Path, data: Path) -> None:
    (tmp_path / "ref").mkdir()
    with make_broker(tmp_path, advertise_read_only_roots=True) as b:
        b.add_root(data, name="data")
        b.add_root(tmp_path / "ref", name="ref", read_only=True)
        async with roots_server(b, "--ask-after", "0") as conn:
            assert (await fetched(conn))["raw"] == []


@pytest.mark.parametrize(
    ("setting", "per_connection", "located"), [(False, True, True), (True, False, False)]
)
async def test_the_connection_overrides_the_setting(
    tmp_path: Path, data: Path, setting: bool, per_connection: bool, located: bool
) -> None:
    with make_broker(tmp_path, advertise_roots=setting) as b:
        b.add_root(data, name="data")
        async with roots_server(b, "--ask-after", "0", advertise_roots=per_connection) as conn:
            seen = await fetched(conn)
            notice = conn.roots_offer.notice
    assert seen["applied"] == ([data.resolve().as_uri()] if located else [])
    assert (notice is None) == located


async def test_a_remote_server_gets_the_names_only_and_is_told_why(broker: Broker, http: HttpServer) -> None:
    async with open_connection(broker, "web", url=http.url) as conn:
        assert await ok(conn, "roots/list") == {
            "roots": [],
            "_meta": {NAMES_META: {"roots": [{"name": "data"}]}},
        }
        notice = conn.roots_offer.notice
    assert notice is not None and "would tell a remote server your user name and folder layout" in notice.text
    assert notice.text.endswith(
        "To hand them over anyway: connect with advertise_roots=True (or --advertise-roots)."
    )


# -- what the server says --------------------------------------------------------------------------


async def test_log_messages_and_stderr_reach_the_log_in_order_and_python_logging(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="jupyter_fsbroker.server")
    seen: list[LogEntry] = []
    async with roots_server(broker, name=None, on_log=seen.append) as conn:
        await logged(conn.log, lambda e: e.text == "roots server ready")
        params = {"level": "warning", "logger": "db", "data": {"table": "sales", "rows": 3}}
        await conn.call_tool("log", params)
        await logged(conn.log, lambda e: e.source == "message")
        await conn.call_tool("stderr", {"text": "after the message"})
        await logged(conn.log, lambda e: e.text == "after the message")
        await conn.call_tool("log", {"level": "emergency", "data": "plain text"})
        await logged(conn.log, lambda e: e.level == "emergency")
    entries = [(e.source, e.level, e.logger, e.text) for e in conn.log.entries()]
    assert entries == [
        ("stderr", None, None, "roots server ready"),
        ("message", "warning", "db", '{"table": "sales", "rows": 3}'),
        ("stderr", None, None, "after the message"),
        ("message", "emergency", None, "plain text"),
    ]
    assert [e.text for e in seen] == [e[3] for e in entries]  # on_log saw each, from the start
    assert "[warning] db: " in conn.log.text() and "stderr: after the message" in conn.log.text()
    records = [
        (r.name, r.levelno, r.getMessage())
        for r in caplog.records
        if r.name.startswith("jupyter_fsbroker.server.")
    ]
    assert (
        "jupyter_fsbroker.server.roots-test-server",
        logging.WARNING,
        'db: {"table": "sales", "rows": 3}',
    ) in records
    assert ("jupyter_fsbroker.server.roots-test-server", logging.INFO, "stderr: after the message") in records
    assert any(level > logging.CRITICAL and text == "plain text" for _, level, text in records)


async def test_a_failed_start_quotes_the_servers_stderr(broker: Broker) -> None:
    crash = "import sys; print('boom: no config file', file=sys.stderr); sys.exit(3)"
    with pytest.raises(ConnectError) as info:
        await connect(broker, "crash", command=sys.executable, args=["-c", crash])
    assert "boom: no config file" in str(info.value)


# -- names and descriptions ------------------------------------------------------------------------


async def test_without_a_name_the_connection_takes_the_servers(broker: Broker) -> None:
    async with roots_server(broker, name=None) as conn:
        assert conn.named_by_server and conn.name == "roots-test-server"
        assert conn.connection.server == "roots-test-server"
    async with roots_server(broker, "--name", "\x1b[31mEvil\nBank\u202e  ", name=None) as conn:
        assert conn.name == "[31mEvil Bank"
    async with roots_server(broker, "--name", "\n\t", name=None) as conn:
        assert conn.name == Path(sys.executable).name  # no usable name: the command's file name
    async with roots_server(broker, "--name", "ignored", name="mine") as conn:
        assert (conn.name, conn.named_by_server) == ("mine", False)


async def test_tool_descriptions_lose_their_docstring_indentation(broker: Broker) -> None:
    async with roots_server(broker) as conn:
        described = {tool["name"]: tool["description"] for tool in conn.tools}
    assert described["log"] == "Send a log message.\n\nArguments: level, data, logger."


async def test_stderr_is_read_line_by_line_safely(broker: Broker) -> None:
    """Invalid UTF-8, a line without end and a line far too long: none breaks the log."""
    noisy = (
        "import sys, time\n"
        "sys.stderr.buffer.write(b'bad \\xff byte\\n' + b'y' * 200000 + b'\\nlast words')\n"
        "sys.stderr.flush()\n"
        "sys.exit(1)\n"
    )
    with pytest.raises(ConnectError) as info:
        await connect(broker, "noisy", command=sys.executable, args=["-c", noisy])
    message = str(info.value)
    assert "bad \ufffd byte | " in message and " | last words" in message
    assert len(message) < 1000  # the long line is quoted cut
