"""The client on the 2026-07-28 era against the example server (the kit's modern path), stdio and HTTP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.audit import AuditRecord
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.protocol import open_connection
from tests.support.env import server_env
from tests.support.servers import MODULE, AnalysisServer, stateless_analysis_server

pytestmark = pytest.mark.anyio

ROWS = 100_000  # about 1.2 MB: more than one read per batch
TRANSPORTS = ["stdio", "http"]


@pytest.fixture(scope="module")
def stateless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnalysisServer]:
    with stateless_analysis_server(tmp_path_factory.mktemp("keys")) as server:
        yield server


@pytest.fixture(params=TRANSPORTS)
def where(request: pytest.FixtureRequest, stateless: AnalysisServer) -> dict[str, Any]:
    # The default era (auto) over HTTP; over stdio auto asks for the handshake era first, so the
    # 2026-07-28 era is asked for by name there.
    if request.param == "stdio":
        return {"command": sys.executable, "args": ["-m", MODULE], "env": server_env(), "era": "modern"}
    return {"url": stateless.url}


async def test_profile_write_and_increment_through_batches(
    broker: Broker, data: Path, where: dict[str, Any]
) -> None:
    (data / "sales.csv").write_text("n,double\n" + "".join(f"{i},{2 * i}\n" for i in range(ROWS)))
    (data / "counter.txt").write_text("41")
    asked: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        return ConsentDecision.approve_all(request)

    async with open_connection(broker, "analysis", consenter=CallbackConsenter(decide), **where) as conn:
        assert conn.era == "modern"
        profile = await conn.call_tool("profile_csv", {"path": "data/sales.csv"}, timeout=120)
        assert profile["isError"] is False and profile["structuredContent"]["rows"] == ROWS
        consents_after_profile = len(asked)
        again = await conn.call_tool("profile_csv", {"path": "data/sales.csv"}, timeout=120)
        assert again["structuredContent"]["rows"] == ROWS
        assert len(asked) == consents_after_profile == 1  # asked once: the grant covers the second call
        report = await conn.call_tool("write_report", {"path": "data/sales.csv"}, timeout=120)
        assert report["isError"] is False
        for _ in range(3):
            counted = await conn.call_tool("atomic_increment", {"path": "data/counter.txt"}, timeout=120)
            assert counted["isError"] is False, counted
    assert (data / "counter.txt").read_text().strip() == "44"
    assert (data / report["structuredContent"]["report"].removeprefix("data/")).is_file()
    writes = [r for r in broker.audit.records() if r.method == "files/write" and r.path == "data/counter.txt"]
    assert len(writes) == 3  # one record per write operation: a re-run replays, never repeats


async def test_watch_changes_hears_a_change_through_files_changes(
    broker: Broker, data: Path, where: dict[str, Any]
) -> None:
    """The example server's watch_changes on the 2026-07-28 wire: files/watch, then files/changes
    until the file it waits for appears; the file is made once the watch is live (its audit record)."""
    made = []

    def on_record(record: AuditRecord) -> None:
        if record.method == "files/watch" and record.error is None and not made:
            made.append(record)
            (data / "_SUCCESS").write_text("done")

    stop = broker.audit.subscribe(on_record)
    try:
        async with open_connection(
            broker, "analysis", consenter=CallbackConsenter(ConsentDecision.approve_all), **where
        ) as conn:
            assert conn.era == "modern"
            arguments = {"path": "data", "seconds": 60, "until": "_SUCCESS"}
            result = await conn.call_tool("watch_changes", arguments, timeout=120)
    finally:
        stop()
    assert result["isError"] is False, result
    seen = result["structuredContent"]
    assert seen["until_seen"] is True
    assert ("data/_SUCCESS", "created") in [(e["path"], e["event"]) for e in seen["events"]]
    methods = [r.method for r in broker.audit.records()]
    assert "files/changes" in methods and methods[-1] == "files/unwatch"
