"""``jupyter-fsbroker connect``: real processes, the example server over stdio and HTTP."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.consent import ConsentDecision, ConsentItem, ConsentRequest
from tests.support.cli import audit_records, call_tool
from tests.support.cli import run_cli as cli
from tests.support.env import server_env
from tests.support.ports import refusing_port
from tests.support.processes import lines_until
from tests.support.servers import MODULE, analysis_server_http
from tests.support.terminal import ask_at_the_terminal

SERVER = [sys.executable, "-m", MODULE]
CLI = [sys.executable, "-m", "jupyter_fsbroker", "connect"]
#: A server that asks where the roots are as soon as it is initialized and never uses files/*.
ROOTS_SERVER = [
    sys.executable,
    str(Path(__file__).resolve().parents[1] / "protocol" / "servers" / "roots_server.py"),
    "--ask-after",
    "0",
]
NOTICE = "jupyter-fsbroker: roots-test-server asked where the shared folders are (roots/list) and got only"


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return cli("connect", *args, timeout=timeout)


def test_call_over_stdio_prints_the_result(workdir: Path) -> None:
    result = call_tool("profile_csv", {"path": "data/sales.csv"}, SERVER)
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert isinstance(structured, dict)
    columns = {c["name"]: c for c in structured["columns"]}
    assert columns["revenue"]["missing"] == 1 and columns["revenue"]["max"] == 120
    assert any(r["method"] == "files/read" and r["decision"] == "allow" for r in audit_records(workdir))


def test_consent_is_refused_when_not_interactive(workdir: Path) -> None:
    out = run_cli(
        "--root", "./data", "--call", "write_report", "--args", '{"path": "data/sales.csv"}', "--", *SERVER
    )
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["isError"] is True
    assert sorted(os.listdir(workdir / "data")) == ["sales.csv"]


@pytest.fixture
def http_server(workdir: Path) -> Iterator[str]:
    with analysis_server_http() as server:
        yield server.url


def test_call_over_http(workdir: Path, http_server: str) -> None:
    out = run_cli(
        "--root",
        "data=./data",
        "--allow",
        "data:read,write",
        "--header",
        "X-Trace: cli-test",
        "--call",
        "write_report",
        "--args",
        '{"path": "data/sales.csv"}',
        "--url",
        http_server,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["structuredContent"]["report"] == "data/sales.report.md"
    assert (workdir / "data" / "sales.report.md").read_text().startswith("#")


def test_list_tools_prints_the_tools_and_exits(workdir: Path) -> None:
    out = run_cli("--root", "data=./data", "--list-tools", "--", *SERVER)
    assert out.returncode == 0, out.stderr
    tools = json.loads(out.stdout)
    assert "profile_csv" in {tool["name"] for tool in tools}
    assert all("inputSchema" in tool for tool in tools)


def test_exit_codes_for_usage_and_failures(workdir: Path) -> None:
    for args in (
        ("--bogus",),
        ("--root", "./data"),
        ("--url", "http://127.0.0.1:1/mcp", "--", "python"),
        ("--root", "./missing", "--url", "http://127.0.0.1:1/mcp"),
        ("--args", "[1]", "--call", "x", "--", *SERVER),
        ("--list-tools", "--call", "x", "--", *SERVER),
        ("--allow", "/etc:read", "--root", "./data", "--", *SERVER),
    ):
        out = run_cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("jupyter-fsbroker: "), (args, out.stderr)
        assert out.stdout == ""
    unknown = run_cli("--root", "./data", "--call", "no_such_tool", "--", *SERVER)
    assert unknown.returncode == 2 and "no_such_tool" in unknown.stderr
    with refusing_port() as port:
        unreachable = run_cli("--root", "./data", "--call", "x", "--url", f"http://127.0.0.1:{port}/mcp")
    assert unreachable.returncode == 2


def test_serves_until_sigterm_and_exits_cleanly(workdir: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "--root", "./data", "--", *SERVER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "the broker did not start serving"
        assert "serving" in proc.stderr.readline()
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        assert children, "the server process was not started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        for pid in children:
            with pytest.raises(ProcessLookupError):
                os.kill(int(pid), 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_roots_locations_only_with_advertise_roots(workdir: Path) -> None:
    wait = '{"wait": true}'  # until the server has applied what roots/list told it
    names_only = run_cli("--root", "./data", "--call", "roots", "--args", wait, "--", *ROOTS_SERVER)
    assert names_only.returncode == 0, names_only.stderr
    told = json.loads(json.loads(names_only.stdout)["content"][0]["text"])
    assert (told["raw"], told["meta"]) == ([], {"filesystemBrokering": {"roots": [{"name": "data"}]}})
    assert str(workdir) not in names_only.stdout
    notices = [line for line in names_only.stderr.splitlines() if line.startswith(NOTICE)]
    assert len(notices) == 1 and "--advertise-roots" in notices[0], names_only.stderr

    located = run_cli(
        "--root", "./data", "--advertise-roots", "--call", "roots", "--args", wait, "--", *ROOTS_SERVER
    )
    assert located.returncode == 0, located.stderr
    told = json.loads(json.loads(located.stdout)["content"][0]["text"])
    assert told["applied"] == [(workdir / "data").resolve().as_uri()]
    assert NOTICE not in located.stderr


def test_serving_says_at_once_why_a_server_got_the_roots_names_only(workdir: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "--root", "./data", "--", *ROOTS_SERVER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **server_env()},
    )
    try:
        assert proc.stderr is not None
        lines_until(proc.stderr.fileno(), lambda line: line.startswith(NOTICE))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _request(timeout: float = 30) -> ConsentRequest:
    return ConsentRequest(
        server="analysis",
        connection_id="c1",
        message="Profile the sales data",
        items=(
            ConsentItem("data/sales", "data/sales", True),
            ConsentItem("/etc", None, False, "outside_roots"),
        ),
        operations=("read", "write"),
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("y\n", ConsentDecision(("data/sales",), ("read", "write"))),
        ("r\n", ConsentDecision(("data/sales",), ("read",))),
        ("n\n", ConsentDecision.deny()),
        ("\n", ConsentDecision.deny()),
    ],
)
def test_terminal_consenter_answers(answer: str, expected: ConsentDecision) -> None:
    decision, text = ask_at_the_terminal(_request(), answer.encode())
    assert decision == expected
    assert "analysis asks" in text and "Profile the sales data" in text and "outside_roots" in text


def test_terminal_consenter_withdraws_a_cancelled_request() -> None:
    # Nobody answers: past the deadline the prompt gives up and refuses.
    decision, _ = ask_at_the_terminal(_request(timeout=0.3), None)
    assert decision == ConsentDecision.deny()


def test_root_and_allow_problems_name_the_spelling(workdir: Path) -> None:
    out = run_cli("--root", "./missing", "--allow", "data:read,fly", "--root", "./data", "--", *SERVER)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("jupyter-fsbroker: root './missing': cannot add root "), out.stderr
    assert "; pre-approval 'data:read,fly': " in out.stderr and out.stderr.count("\n") == 1
