"""Foreign clients driving the example analysis server: the MCP Inspector CLI, a brokering client
written on the TypeScript SDK that speaks PROTOCOL.md's dialect or the SEP-1708 draft's, with
per-path consent or only the flat form, and a client of the 2026-07-28 era written from
PROTOCOL.md alone (``js/modern_client.mjs``).

The first two run over stdio (the client starts the server) and Streamable HTTP (the server runs
on its own, ``--http``); the modern one over stateless HTTP, to one server and to three replicas
behind nginx, and its results are compared with the Python client's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.examples.analysis_server import CsvProfiler
from jupyter_fsbroker.protocol import open_connection
from jupyter_fsbroker.wire.modern import EXTENSION_ID, RESULT_TYPE
from tests.interop.npm import NodeTools
from tests.serverkit.test_replicas import deployment
from tests.support.ci import in_ci
from tests.support.env import server_env
from tests.support.servers import (
    SEP_MESSAGE,
    TOOLS,
    AnalysisServer,
    analysis_server_http,
    stateless_analysis_server,
)

ANALYSIS = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]


@contextmanager
def target(transport: str) -> Iterator[list[str]]:
    """How a client names the server: ``-- COMMAND`` for stdio, the URL for HTTP."""
    if transport == "stdio":
        yield ["--", *ANALYSIS]
    else:
        with analysis_server_http() as server:
            yield [server.url]


def run_node(tools: NodeTools, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **server_env()},
    )


# -- the Inspector CLI -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_inspector_cli_lists_and_calls_the_example_servers_tools(
    node_tools: NodeTools, transport: str
) -> None:
    command, cwd = node_tools.inspector_cli
    with target(transport) as server:
        where = server[1:] if transport == "stdio" else server
        extra = [] if transport == "stdio" else ["--transport", "http"]
        listed = run_node(node_tools, [*command, *where, *extra, "--method", "tools/list"], cwd)
        called = run_node(
            node_tools,
            [
                *command,
                *where,
                *extra,
                "--method",
                "tools/call",
                "--tool-name",
                "profile_csv",
                "--tool-arg",
                "path=data/x.csv",
            ],
            cwd,
        )
    assert listed.returncode == 0, listed.stderr
    tools = {tool["name"]: tool for tool in json.loads(listed.stdout)["tools"]}
    assert set(tools) == TOOLS
    description = tools["profile_csv"]["description"]
    assert description.startswith("Per-column statistics") and "\n        " not in description
    # The Inspector does not broker files: the tool says so with SEP-1708's error.
    assert SEP_MESSAGE in called.stdout + called.stderr, (called.stdout, called.stderr)


# -- a brokering client on the TypeScript SDK ------------------------------------------------------


def broker_with_ts(
    tools: NodeTools, root: Path, calls: list[dict[str, Any]], transport: str, *options: str
) -> dict[str, Any]:
    script = tools.script("brokering_client.mjs")
    with target(transport) as server:
        where = server if transport == "stdio" else ["--url", server[0]]
        out = run_node(
            tools,
            [tools.node, str(script), "--root", str(root), "--calls", json.dumps(calls), *options, *where],
        )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("dialect", ["protocol", "sep"])
def test_a_typescript_brokering_client_drives_the_example_server(
    node_tools: NodeTools, data: Path, dialect: str, transport: str
) -> None:
    rows = ["region,amount"] + [f"r{i % 7},{i * 0.5:.1f}" for i in range(150_000)]  # ~2 MB: two chunks
    text = "\n".join(rows) + "\n"
    (data / "big.csv").write_text(text)
    calls = [
        {"name": "profile_csv", "arguments": {"path": "data/big.csv"}},
        {"name": "write_report", "arguments": {"path": "data/sales.csv"}},
        {"name": "atomic_increment", "arguments": {"path": "data/count.txt"}},
        {"name": "atomic_increment", "arguments": {"path": "data/count.txt"}},
    ]
    out = broker_with_ts(node_tools, data, calls, transport, "--dialect", dialect)
    profile, report, first, second = out["results"]
    assert not any(result.get("isError") for result in out["results"]), out["results"]
    expected = CsvProfiler()
    expected.feed(text)
    wanted = expected.finish()
    stats = profile["structuredContent"]
    assert stats["chunks"] >= 2
    assert (stats["rows"], stats["columns"]) == (wanted["rows"], wanted["columns"])
    assert report["structuredContent"]["report"] == "data/sales.report.md"
    assert (data / "sales.report.md").read_text().startswith("# Profile of `data/sales.csv`")
    assert (first["structuredContent"]["value"], second["structuredContent"]["value"]) == (1, 2)
    assert (data / "count.txt").read_text() == "2\n"
    # Nothing was pre-approved: each tool asked for consent once, then repeated the refused request.
    assert out["answered"][:3] == ["files/read", "files/consent", "files/read"]
    # The client lists perPathConsent: write_report asked once, for read on the data and write on
    # the report.
    [_, asked, *_] = out["consents"]
    assert asked["requestedPaths"] == [
        {"path": "data/sales.csv", "operations": ["read"]},
        {"path": "data/sales.report.md", "operations": ["write"]},
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("dialect", ["protocol", "sep"])
def test_a_flat_only_client_gets_flat_consents_and_write_report_writes(
    node_tools: NodeTools, data: Path, dialect: str, transport: str
) -> None:
    """A client written to the flat form of files/consent (strings in requestedPaths, SEP-1708's
    example) lists no perPathConsent: the server asks one flat consent per operation set."""
    calls = [{"name": "write_report", "arguments": {"path": "data/sales.csv"}}]
    out = broker_with_ts(node_tools, data, calls, transport, "--dialect", dialect, "--consent", "flat")
    [report] = out["results"]
    assert not report.get("isError"), report
    assert report["structuredContent"]["report"] == "data/sales.report.md"
    assert (data / "sales.report.md").read_text().startswith("# Profile of `data/sales.csv`")
    assert [consent["requestedPaths"] for consent in out["consents"]] == [
        ["data/sales.csv"],
        ["data/sales.report.md"],
    ]
    assert [consent["operations"] for consent in out["consents"]] == [["read"], ["write"]]


def test_a_client_that_misreports_bytes_read_gets_an_error_not_numbers(
    node_tools: NodeTools, data: Path
) -> None:
    calls = [{"name": "profile_csv", "arguments": {"path": "data/sales.csv"}}]
    out = broker_with_ts(node_tools, data, calls, "stdio", "--lie-bytes-read", "3")
    [result] = out["results"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "cannot be trusted" in text and "bytes read" in text, text
    assert "structuredContent" not in result


# -- a 2026-07-28 client written from PROTOCOL.md alone ----------------------------------------------

__all__ = ["deployment"]  # the replicas behind nginx, a fixture of tests/serverkit/test_replicas.py

#: What the modern client is asked, and the Python client alike.
MODERN_CALLS = [
    {"name": "profile_csv", "arguments": {"path": "data/sales.csv"}},
    {"name": "write_report", "arguments": {"path": "data/sales.csv"}},
    *[{"name": "atomic_increment", "arguments": {"path": "data/count.txt"}}] * 3,
]


@pytest.fixture(scope="module")
def stateless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnalysisServer]:
    with stateless_analysis_server(tmp_path_factory.mktemp("keys")) as server:
        yield server


def modern_with_ts(
    tools: NodeTools, root: Path, calls: list[dict[str, Any]], url: str, *options: str
) -> dict[str, Any]:
    script = tools.script("modern_client.mjs")
    argv = [
        tools.node,
        str(script),
        "--root",
        str(root),
        "--url",
        url,
        "--calls",
        json.dumps(calls),
        *options,
    ]
    out = run_node(tools, argv)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


async def modern_with_python(broker: Broker, url: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def decide(request: ConsentRequest) -> ConsentDecision:
        return ConsentDecision.approve_all(request)

    async with open_connection(
        broker, "analysis", consenter=CallbackConsenter(decide), era="modern", url=url
    ) as conn:
        assert conn.era == "modern"
        return [await conn.call_tool(c["name"], c["arguments"], timeout=120) for c in calls]


def comparable(results: list[dict[str, Any]]) -> list[Any]:
    """The tools' structured results without what depends on the clock."""
    kept = []
    for result in results:
        assert not result.get("isError") and "rpcError" not in result, result
        content = dict(result["structuredContent"])
        content.pop("seconds", None)
        kept.append(content)
    return kept


def _report(data: Path) -> str:
    text = (data / "sales.report.md").read_text()
    return re.sub(r"Generated: \S+", "Generated: <time>", text)


@pytest.mark.anyio
async def test_a_modern_client_written_from_the_protocol_drives_a_stateless_server_as_python_does(
    node_tools: NodeTools, broker: Broker, data: Path, tmp_path: Path, stateless: AnalysisServer
) -> None:
    theirs = tmp_path / "theirs" / "data"
    shutil.copytree(data, theirs)
    out = modern_with_ts(node_tools, theirs, MODERN_CALLS, stateless.url)
    ours = await modern_with_python(broker, stateless.url, MODERN_CALLS)
    assert out["discover"]["capabilities"]["extensions"][EXTENSION_ID]["resultType"] == RESULT_TYPE
    assert comparable(out["results"]) == comparable(ours)
    assert [r["structuredContent"]["value"] for r in out["results"][2:]] == [1, 2, 3]
    assert (theirs / "count.txt").read_text() == (data / "count.txt").read_text() == "3\n"
    assert _report(theirs) == _report(data)
    # Every step was a batch the client performed and continued: the calls took several each.
    assert len(out["rounds"]) > len(MODERN_CALLS)
    # Nothing was pre-approved: each tool asked once, and the errors it met first (PERMISSION_DENIED
    # before the consent) came back on the modern codes, which the server understood.
    assert [c["requestedPaths"] for c in out["consents"]] == [
        ["data/sales.csv"],
        [
            {"path": "data/sales.csv", "operations": ["read"]},
            {"path": "data/sales.report.md", "operations": ["write"]},
        ],
        ["data/count.txt"],
    ]


@pytest.mark.anyio
@pytest.mark.skipif(
    shutil.which("nginx") is None and not in_ci(), reason="needs nginx (apt-get install nginx)"
)
async def test_a_modern_client_written_from_the_protocol_drives_three_replicas_behind_nginx(
    node_tools: NodeTools,
    broker: Broker,
    data: Path,
    tmp_path: Path,
    deployment: tuple[str, list[AnalysisServer], Path],
) -> None:
    url, _, _ = deployment
    theirs = tmp_path / "theirs" / "data"
    shutil.copytree(data, theirs)
    out = modern_with_ts(node_tools, theirs, MODERN_CALLS, url)
    ours = await modern_with_python(broker, url, MODERN_CALLS)
    assert comparable(out["results"]) == comparable(ours)
    assert (theirs / "count.txt").read_text() == "3\n"
    assert _report(theirs) == _report(data)


@pytest.mark.anyio
async def test_the_modern_client_watches_through_files_changes_and_its_errors_reach_the_tools(
    node_tools: NodeTools, data: Path, stateless: AnalysisServer
) -> None:
    calls = [
        # The client writes _SUCCESS when the call's first files/changes arrives: the watch is live.
        {
            "name": "watch_changes",
            "arguments": {"path": "data", "seconds": 60, "until": "_SUCCESS"},
            "touch": {"path": "data/_SUCCESS"},
        },
        {"name": "read_text", "arguments": {"path": "data/missing.txt"}},
    ]
    out = modern_with_ts(node_tools, data, calls, stateless.url)
    watched, missing = out["results"]
    assert not watched.get("isError"), watched
    assert watched["structuredContent"]["until_seen"] is True
    assert ("data/_SUCCESS", "created") in [
        (e["path"], e["event"]) for e in watched["structuredContent"]["events"]
    ]
    assert "files/changes" in out["answered"] and "files/unwatch" in out["answered"]
    # NOT_FOUND on its modern code (-31102): the tool names it, as it does on the legacy wire.
    assert missing["isError"] is True and "NOT_FOUND" in missing["content"][0]["text"], missing


@pytest.mark.anyio
async def test_the_modern_client_revoking_after_consent_ends_the_call_with_the_refusal(
    node_tools: NodeTools, data: Path, stateless: AnalysisServer
) -> None:
    calls = [{"name": "write_report", "arguments": {"path": "data/sales.csv"}}]
    out = modern_with_ts(node_tools, data, calls, stateless.url, "--revoke-after-consents", "1")
    [report] = out["results"]
    assert report["isError"] is True
    text = report["content"][0]["text"]
    assert "PERMISSION_DENIED" in text and "revoked" in text, text
    assert not (data / "sales.report.md").exists()
    assert "files/write" not in out["answered"] and len(out["consents"]) == 1


@pytest.mark.anyio
async def test_a_modern_client_without_changes_gets_files_unavailable_for_a_watch(
    node_tools: NodeTools, data: Path, stateless: AnalysisServer
) -> None:
    calls = [{"name": "watch_changes", "arguments": {"path": "data", "seconds": 1}}]
    out = modern_with_ts(node_tools, data, calls, stateless.url, "--features", "perPathConsent")
    [refused] = out["results"]
    assert refused["rpcError"]["code"] == -31112
    assert refused["rpcError"]["data"] == {"error": "FILES_UNAVAILABLE", "reason": "no_changes"}
    assert out["answered"] == []
