"""The command line run as a user runs it: ``python -m jupyter_fsbroker ...`` from this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

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
