"""``jupyter-fsbroker connect`` and what the server says about itself: its name, its stderr, its log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.cli import run_cli as cli

CLI = [sys.executable, "-m", "jupyter_fsbroker", "connect"]
ANALYSIS = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]
ROOTS_SERVER = [
    sys.executable,
    str(Path(__file__).resolve().parents[1] / "protocol" / "servers" / "roots_server.py"),
]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return cli("connect", *args)


def test_the_default_name_is_the_servers_own(workdir: Path) -> None:
    out = run_cli(
        "--root", "data=./data", "--allow", "data:read", "--audit", "audit.jsonl",
        "--call", "profile_csv", "--args", '{"path": "data/sales.csv"}', "--", *ANALYSIS,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    assert records and {record["server"] for record in records} == {"jupyter-fsbroker-analysis"}


def test_the_servers_stderr_and_log_messages_are_shown_one_safe_line_each(workdir: Path) -> None:
    message = {"level": "warning", "logger": "db", "data": "disk \x1b[2J almost full\nsecond line"}
    out = run_cli("--root", "./data", "--call", "log", "--args", json.dumps(message), "--", *ROOTS_SERVER)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "[roots-test-server] roots server ready" in lines
    assert "[roots-test-server] warning: db: disk \\x1b[2J almost full second line" in lines
    assert "\x1b" not in out.stderr


def test_quiet_keeps_only_warnings_and_above(workdir: Path) -> None:
    for level, shown in (("info", False), ("error", True)):
        message = {"level": level, "data": f"a {level} message"}
        out = run_cli(
            "-q", "--root", "./data", "--call", "log", "--args", json.dumps(message), "--", *ROOTS_SERVER
        )
        assert out.returncode == 0, out.stderr
        assert "roots server ready" not in out.stderr
        assert (f"a {level} message" in out.stderr) is shown, out.stderr
