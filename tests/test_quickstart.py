"""The script the README names, `examples/quickstart.py`, keeps working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_shows_grants_and_refusals() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "report written: data/sales/2024.report.md" in out and "# Profile of" in out
    assert '"granted": true' in out
    assert '"reason": "traversal"' in out and '"reason": "sensitive"' in out
    assert "do-not-share" not in out and "outside every root" not in out
