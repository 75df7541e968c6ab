"""The example analysis server end to end: its tools over stdio and over Streamable HTTP.

The server runs as ``python -m jupyter_fsbroker.examples.analysis_server`` (stdio)
and with ``--http 127.0.0.1:0`` under uvicorn (it binds a free port and reports
it); ``rawclient`` answers its ``files/*`` requests with the core broker.
Nothing is pre-approved: every tool has to ask ``files/consent`` first, and the
consenter approves.
"""

from __future__ import annotations

import asyncio
import csv
import io
import random
import statistics
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.examples.analysis_server import CsvProfiler, render_report, report_path
from jupyter_fsbroker.examples.csvstream import RowFilter
from tests.protocol.rawclient import HttpClient, RawClient, RpcError, StdioClient, python_argv
from tests.protocol.servers.harness import Consents
from tests.support.brokers import make_broker
from tests.support.env import server_env
from tests.support.servers import MODULE, SEP_MESSAGE, TOOLS, analysis_server_http

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024


def make_csv(target: int, seed: int) -> str:
    """A CSV of about *target* bytes with missing values, quoted commas and quotes, non-ASCII
    text, and a quoted multi-line field straddling every MiB boundary."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "region", "amount", "comment", "when"])
    next_boundary = MiB
    row = 0
    while out.tell() < target:
        row += 1
        comment = rng.choice(["", "ok", "late, again", 'said "hi"', "café crème", "naïve 🎉"])
        if out.tell() > next_boundary - 300:
            comment = "\n".join(f"line {i}, with a comma" for i in range(40))  # about 800 chars
            next_boundary += MiB
        writer.writerow(
            [
                row,
                rng.choice(["north", "south", "east", "west", ""]),
                rng.choice([f"{rng.uniform(-50, 500):.2f}", "NA", str(rng.randint(0, 9))]),
                comment,
                f"2026-{rng.randint(1, 12):02}-{rng.randint(1, 28):02}",
            ]
        )
    return out.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("analysis")
    folder = base / "data"
    folder.mkdir()
    (folder / "sales.csv").write_text(make_csv(3 * MiB + 1000, seed=11), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def broker(data: Path) -> Iterator[Broker]:
    with make_broker(data.parent, limits=Limits(lock_wait=0.5)) as b:
        b.add_root(data, name="data")
        yield b


@pytest.fixture(scope="module")
async def stdio(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    argv = python_argv("-m", MODULE)
    consenter = CallbackConsenter(consents.decide)
    async with await StdioClient.start(argv, broker, env=server_env(), consenter=consenter) as c:
        yield c


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The server under uvicorn on 127.0.0.1 and a port it chose; yields its /mcp URL once it listens."""
    with analysis_server_http() as server:
        yield server.url


@pytest.fixture(scope="module")
async def http(http_url: str, broker: Broker, consents: Consents) -> AsyncIterator[HttpClient]:
    consenter = CallbackConsenter(consents.decide)
    async with await HttpClient.start(http_url, broker, name="analysis-http", consenter=consenter) as c:
        yield c


@pytest.fixture(params=["stdio", "http"])
def client(request: pytest.FixtureRequest) -> RawClient:
    c: RawClient = request.getfixturevalue(request.param)
    c.reset()
    return c


def reference_profile(text: str) -> dict[str, Any]:
    profiler = CsvProfiler()
    profiler.feed(text)
    return profiler.finish()


# -- tools -----------------------------------------------------------------------------------------


async def test_lists_its_tools(client: RawClient) -> None:
    result = await client.request("tools/list")
    assert {tool["name"] for tool in result["tools"]} >= TOOLS
    assert client.initialize_result is not None
    assert client.initialize_result["serverInfo"]["name"] == "jupyter-fsbroker-analysis"


async def test_profile_csv_streams_the_file_in_chunks(client: RawClient, data: Path) -> None:
    text = (data / "sales.csv").read_text(encoding="utf-8")
    stats = await client.tool_json("profile_csv", {"path": "data/sales.csv"})
    expected = reference_profile(text)
    assert stats["rows"] == expected["rows"] and stats["columns"] == expected["columns"]
    assert stats["bytes"] == len(text.encode("utf-8")) and stats["chunks"] >= 4
    reads = [r for r in client.requests("files/read") if r.result is not None]
    assert all(r.result["bytesRead"] <= MiB for r in reads)
    # Independent checks with the csv module.
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert stats["rows"] == len(rows)
    columns = {c["name"]: c for c in stats["columns"]}
    amounts = [float(r["amount"]) for r in rows if r["amount"] != "NA"]
    amount = columns["amount"]
    assert amount["type"] == "numeric" and amount["missing"] == sum(r["amount"] == "NA" for r in rows)
    assert (amount["min"], amount["max"]) == (min(amounts), max(amounts))
    assert amount["mean"] == pytest.approx(statistics.fmean(amounts))
    assert amount["std"] == pytest.approx(statistics.stdev(amounts))
    region = columns["region"]
    assert region["type"] == "text" and region["distinct"] == 4
    assert region["missing"] == sum(r["region"] == "" for r in rows)
    assert sum(t["count"] for t in region["top"]) == region["count"]
    assert len(rows) > 10_000 and columns["id"]["distinct"] == 10_000 and columns["id"]["distinct_capped"]
    assert columns["id"]["top_approximate"] is True
    multiline = [r for r in rows if "\n" in r["comment"]]
    assert len(multiline) >= 3  # one across each MiB boundary


async def test_write_report_writes_markdown_next_to_the_data(
    client: RawClient, data: Path, consents: Consents
) -> None:
    name = f"report_{type(client).__name__}"
    (data / name).mkdir()
    text = 'city,temp\nOslo,-3.5\nLima,19\n"Quito, EC",14\n'
    (data / name / "weather.csv").write_text(text)
    before = len(consents.requests)
    result = await client.tool_json("write_report", {"path": f"data/{name}/weather.csv"})
    assert result["report"] == f"data/{name}/weather.report.md" and result["rows"] == 3
    report = (data / name / "weather.report.md").read_text(encoding="utf-8")
    assert report.startswith(f"# Profile of `data/{name}/weather.csv`")
    assert "| city | text | 3 | 0 | 3 |" in report and "| temp | numeric | 3 | 0 | 3 | -3.5 | 19 |" in report
    assert result["bytes"] == len(report.encode("utf-8"))
    # One prompt covered reading the data and writing the report.
    [asked] = consents.requests[before:]
    assert {item.path for item in asked.items} == {
        f"data/{name}/weather.csv",
        f"data/{name}/weather.report.md",
    }
    assert set(asked.operations) == {"read", "write"}
    # The client lists perPathConsent: one request with per-path items, write on the report only.
    [sent] = [answered.params for answered in client.requests("files/consent")]
    assert sent["requestedPaths"] == [
        {"path": f"data/{name}/weather.csv", "operations": ["read"]},
        {"path": f"data/{name}/weather.report.md", "operations": ["write"]},
    ]
    assert report_path("data/x/sales.csv") == "data/x/sales.report.md"
    assert render_report({**reference_profile(text), "path": "p", "bytes": 1}).count("\n| ") == 3


async def test_atomic_increment_under_concurrency(client: RawClient, data: Path, broker: Broker) -> None:
    path = f"data/counter_{type(client).__name__}.txt"
    values = await asyncio.gather(*(client.tool_json("atomic_increment", {"path": path}) for _ in range(4)))
    assert sorted(v["value"] for v in values) == [1, 2, 3, 4]
    assert (data / path.removeprefix("data/")).read_text() == "4\n"
    # Each call locked (a keepLocked read, or a keepLocked create for the first) and unlocked.
    locked = [r.result["lockId"] for r in client.answered if r.result and "lockId" in r.result]
    unlocks = client.requests("files/unlock")
    assert len(locked) == 4 and [u.params["lockId"] for u in unlocks] == locked
    assert all(u.error is None for u in unlocks)
    assert [info for info in broker.locks.held() if info.owner == client.conn.id] == []


async def test_atomic_increment_across_two_connections(
    stdio: StdioClient, http: HttpClient, data: Path
) -> None:
    path = "data/shared_counter.txt"
    calls = [
        c.tool_json("atomic_increment", {"path": path}, timeout=60) for c in (stdio, http) for _ in range(2)
    ]
    values = await asyncio.gather(*calls)
    assert sorted(v["value"] for v in values) == [1, 2, 3, 4]
    assert (data / "shared_counter.txt").read_text() == "4\n"


async def test_watch_changes_reports_events(client: RawClient, data: Path) -> None:
    folder = data / f"watched_{type(client).__name__}"
    folder.mkdir()
    task = asyncio.ensure_future(
        client.tool_json("watch_changes", {"path": f"data/{folder.name}", "seconds": 2.5})
    )
    # The first files/watch is refused (not granted yet); the one after consent starts the watch.
    await client.wait_answered("files/watch", lambda a: a.error is None)
    (folder / "new.txt").write_text("hello")
    result = await asyncio.wait_for(task, 30)
    assert result["count"] == len(result["events"]) >= 1
    assert {e["path"] for e in result["events"]} == {f"data/{folder.name}/new.txt"}
    assert {e["event"] for e in result["events"]} <= {"created", "modified"}
    await client.wait_answered("files/unwatch")


async def test_filter_csv_writes_the_matching_rows_back_at_once(
    client: RawClient, data: Path, consents: Consents
) -> None:
    name = f"filter_{type(client).__name__}"
    folder = data / name
    folder.mkdir()
    rng = random.Random(7)
    lines = ["id,kind,note"]
    lines += [f'{i},{rng.choice(["keep"] * 9 + ["drop"])},"line {i}, quoted"' for i in range(90_000)]
    (folder / "in.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "out.csv").write_text("old\n", encoding="utf-8")
    seen_before_final: list[str] = []

    async def look(method: str, params: dict[str, Any]) -> None:
        if method == "files/write" and not params.get("final", True):
            seen_before_final.append((folder / "out.csv").read_text(encoding="utf-8"))

    client.intercept = look
    before = len(consents.requests)
    args = {
        "path": f"data/{name}/in.csv",
        "column": "kind",
        "value": "keep",
        "output": f"data/{name}/out.csv",
    }
    result = await client.tool_json("filter_csv", args)
    with (folder / "in.csv").open(newline="", encoding="utf-8") as f:
        expected = [row for row in csv.DictReader(f) if row["kind"] == "keep"]
    with (folder / "out.csv").open(newline="", encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert written == expected
    assert (result["rows"], result["matched"]) == (90_000, len(expected))
    assert result["bytes"] == (folder / "out.csv").stat().st_size and result["chunks"] >= 2
    # Staged in chunks: the old file stayed whole until the final chunk replaced it.
    assert seen_before_final and set(seen_before_final) == {"old\n"}
    [asked] = consents.requests[before:]
    assert {(item.path, item.operations) for item in asked.items} == {
        (f"data/{name}/in.csv", ("read",)),
        (f"data/{name}/out.csv", ("write",)),
    }
    missing = await client.call_tool("filter_csv", {**args, "column": "colour"})
    assert missing["isError"] and "no column named 'colour'" in missing["content"][0]["text"]


async def test_write_text_with_if_match_refuses_a_stale_etag(client: RawClient, data: Path) -> None:
    path = f"data/notes_{type(client).__name__}.md"
    target = data / path.removeprefix("data/")
    target.write_text("# Notes\n", encoding="utf-8")
    read = await client.tool_json("read_text", {"path": path})
    assert (read["text"], read["size"]) == ("# Notes\n", 8) and read["etag"]
    first = await client.tool_json(
        "write_text", {"path": path, "text": "# Notes\nA\n", "if_match": read["etag"]}
    )
    assert first["etag"] != read["etag"] and target.read_text(encoding="utf-8") == "# Notes\nA\n"
    stale = await client.call_tool(
        "write_text", {"path": path, "text": "# Notes\nB\n", "if_match": read["etag"]}
    )
    assert stale["isError"] and "PRECONDITION_FAILED" in stale["content"][0]["text"]
    assert target.read_text(encoding="utf-8") == "# Notes\nA\n"
    plain = await client.tool_json("write_text", {"path": path, "text": "# Notes\nC\n"})
    assert plain["bytes"] == 10 and target.read_text(encoding="utf-8") == "# Notes\nC\n"
    large = await client.call_tool("read_text", {"path": "data/sales.csv"})
    assert large["isError"] and "at most 2 MiB" in large["content"][0]["text"]


async def test_list_files_shows_what_the_client_shows(client: RawClient, data: Path) -> None:
    folder = data / f"listed_{type(client).__name__}"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.csv").write_text("x\n1\n")
    (folder / "sub" / "b.txt").write_text("b")
    (folder / ".env").write_text("SECRET=1")
    listed = await client.tool_json("list_files", {"path": f"data/{folder.name}"})
    assert sorted((e["name"], e["type"]) for e in listed["entries"]) == [
        ("a.csv", "file"),
        ("sub", "directory"),
    ]
    deep = await client.tool_json("list_files", {"path": f"data/{folder.name}", "recursive": True})
    assert {e["path"] for e in deep["entries"]} == {
        f"data/{folder.name}/a.csv",
        f"data/{folder.name}/sub",
        f"data/{folder.name}/sub/b.txt",
    }


async def test_lock_file_holds_until_unlocked_or_force_released(
    stdio: StdioClient, http: HttpClient, data: Path, broker: Broker
) -> None:
    (data / "shared.md").write_text("v1\n", encoding="utf-8")
    held = await stdio.tool_json("lock_file", {"path": "data/shared.md"})
    lock_id = held["lock_id"]
    assert lock_id.startswith("lock_")
    assert [(i.lock_id, i.owner) for i in broker.locks.held() if i.lock_id] == [(lock_id, stdio.conn.id)]
    # The holder still writes; the other connection is refused while the lock is kept.
    await stdio.tool_json("write_text", {"path": "data/shared.md", "text": "v2\n"})
    refused = await http.call_tool("write_text", {"path": "data/shared.md", "text": "other\n"})
    assert refused["isError"] and "FILE_LOCKED" in refused["content"][0]["text"]
    assert (data / "shared.md").read_text(encoding="utf-8") == "v2\n"
    broker.force_unlock(lock_id)  # the user's override
    await http.tool_json("write_text", {"path": "data/shared.md", "text": "v3\n"})
    gone = await stdio.call_tool("unlock_file", {"lock_id": lock_id})
    assert gone["isError"] and "NOT_FOUND" in gone["content"][0]["text"]
    again = await stdio.tool_json("lock_file", {"path": "data/shared.md"})
    assert await stdio.tool_json("unlock_file", {"lock_id": again["lock_id"]}) == {
        "lock_id": again["lock_id"],
        "unlocked": True,
    }
    assert [i for i in broker.locks.held() if i.lock_id] == []


async def test_watch_changes_stops_when_the_marker_appears(client: RawClient, data: Path) -> None:
    folder = data / f"until_{type(client).__name__}"
    folder.mkdir()
    args = {"path": f"data/{folder.name}", "seconds": 300, "until": "_SUCCESS"}
    task = asyncio.ensure_future(client.tool_json("watch_changes", args))
    await client.wait_answered("files/watch", lambda a: a.error is None)
    (folder / "part-0.csv").write_text("x\n")
    (folder / "_SUCCESS").write_text("")
    result = await task
    assert result["until_seen"] is True
    assert result["events"][-1]["path"] == f"data/{folder.name}/_SUCCESS"
    assert f"data/{folder.name}/part-0.csv" in {e["path"] for e in result["events"]}


def test_row_filter_handles_chunks_cut_anywhere() -> None:
    text = make_csv(40_000, seed=4)
    whole = RowFilter("region", "north")
    expected = whole.feed(text) + whole.finish()
    assert expected.startswith("id,region,amount,comment,when\n") and whole.matched > 10
    rng = random.Random(6)
    for _ in range(20):
        keep = RowFilter("region", " north ")
        position, pieces = 0, []
        while position < len(text):
            step = rng.randint(1, 3000)
            pieces.append(keep.feed(text[position : position + step]))
            position += step
        pieces.append(keep.finish())
        assert "".join(pieces) == expected and (keep.rows, keep.matched) == (whole.rows, whole.matched)
    with pytest.raises(ValueError, match="no column named 'colour'"):
        RowFilter("colour", "red").feed(text)


def test_the_http_server_names_the_port_it_bound() -> None:
    with analysis_server_http() as server:
        [line] = [line for line in server.stderr if "listening on" in line]
    assert line.startswith("analysis server: listening on http://127.0.0.1:")
    assert server.url.startswith("http://127.0.0.1:") and not server.url.startswith("http://127.0.0.1:0/")
    assert line.strip().endswith(server.url)


# -- capability ------------------------------------------------------------------------------------


async def test_refuses_clients_that_do_not_broker_files(broker: Broker) -> None:
    c = await StdioClient.start(python_argv("-m", MODULE), broker, env=server_env(), brokering=False)
    try:
        with pytest.raises(RpcError) as info:
            await c.call_tool("profile_csv", {"path": "data/sales.csv"})
        assert (info.value.code, info.value.message) == (-32603, SEP_MESSAGE)
    finally:
        await c.close()


def test_profiler_handles_chunks_cut_anywhere() -> None:
    text = make_csv(40_000, seed=3)
    whole = reference_profile(text)
    rng = random.Random(5)
    for _ in range(20):
        profiler = CsvProfiler()
        position = 0
        while position < len(text):
            step = rng.randint(1, 3000)
            profiler.feed(text[position : position + step])
            position += step
        assert profiler.finish() == whole


def test_main_rejects_a_bad_http_address(capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_fsbroker.examples.analysis_server import main

    with pytest.raises(SystemExit) as info:
        main(["--http", "nonsense"])
    assert info.value.code == 2
    assert "HOST:PORT" in capsys.readouterr().err
    assert sys.executable  # the module is importable without serving
