"""The command line run as a user runs it: ``python -m jupyter_fsbroker ...`` from this checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.env import server_env

#: The one file of ``data/``, the shared folder of the command-line tests' working folder.
SALES = "region,revenue\nnorth,120\nsouth,95\neast,\n"
#: The command, in a process importing this checkout.
COMMAND = [sys.executable, "-m", "jupyter_fsbroker"]


def run_cli(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command with *args*, no keyboard (stdin is empty); its output as text, once it ends.

    *env* is added to this process's environment; *cwd* is where it runs (default: here).
    """
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **server_env(), **(env or {})},
        cwd=cwd,
    )


def call_tool(
    tool: str, arguments: Mapping[str, object], server: Sequence[str], *options: str
) -> dict[str, object]:
    """``connect`` with ``data/`` shared, its reads pre-approved and the audit in ``audit.jsonl``:
    call *tool* with *arguments* on the stdio *server*; the printed result, once it exited 0.

    *options* go before ``--call`` (``--era auto``, say).
    """
    out = run_cli(
        "connect",
        *("--root", "data=./data", "--allow", "data:read", "--audit", "audit.jsonl"),
        *options,
        *("--call", tool, "--args", json.dumps(arguments), "--", *server),
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def audit_records(workdir: Path) -> list[dict[str, Any]]:
    """The records of ``audit.jsonl`` in *workdir*, oldest first."""
    lines = (workdir / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]
