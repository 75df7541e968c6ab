"""The environment of a subprocess that must import this checkout, whatever is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The root of this checkout.
REPO = Path(__file__).resolve().parents[2]


def server_env() -> dict[str, str]:
    """What to add to a subprocess's environment so that it imports this checkout first.

    Servers, kernels and the command line run ``jupyter_fsbroker`` from ``PYTHONPATH``
    before anything installed (an editable install may point at another checkout).
    Merge it into the environment the subprocess gets: ``{**os.environ, **server_env()}``.
    """
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), path) if p)}


def run_python(code: str, *, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run *code* in a fresh interpreter importing this checkout; its output as text, once it ends.

    With *check*, a non-zero exit raises :class:`subprocess.CalledProcessError`.
    """
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **server_env()},
        check=check,
    )
