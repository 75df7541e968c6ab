"""Foreign clients driving the example analysis server: the MCP Inspector CLI, and a brokering client
written on the TypeScript SDK that speaks PROTOCOL.md's dialect or the SEP-1708 draft's, with
per-path consent or only the flat form.

Both run over stdio (the client starts the server) and Streamable HTTP (the
server runs on its own, ``--http``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.examples.analysis_server import CsvProfiler
from tests.interop.npm import NodeTools
from tests.support.env import server_env
from tests.support.servers import SEP_MESSAGE, TOOLS, analysis_server_http

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
