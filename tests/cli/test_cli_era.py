"""``jupyter-fsbroker connect --era``: a real 2026-07-28 era server of the batch shape over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.cli import audit_records, call_tool, run_cli

BATCH_SERVER = [
    sys.executable,
    str(Path(__file__).resolve().parents[1] / "protocol" / "servers" / "batch_server.py"),
]
STEPS = {"steps": [[{"id": "r", "method": "files/read", "params": {"path": "data/sales.csv"}}]]}


def call(*era: str) -> dict[str, object]:
    return call_tool("batches", STEPS, BATCH_SERVER, *era)


def test_era_modern_reads_through_a_batch(workdir: Path) -> None:
    result = call("--era", "modern")
    structured = result["structuredContent"]
    assert isinstance(structured, dict)
    [[answer]] = structured["answers"]
    assert answer["id"] == "r" and answer["result"]["content"] == (workdir / "data" / "sales.csv").read_text()
    assert [(r["method"], r["decision"]) for r in audit_records(workdir)] == [("files/read", "allow")]


def test_the_default_era_over_stdio_is_the_handshake_era(workdir: Path) -> None:
    # auto asks an stdio server for the handshake era first (its first request fixes the era):
    # the server that offers both runs the tool without batches, as it does with --era legacy.
    for era in ((), ("--era", "legacy")):
        result = call(*era)
        assert result["structuredContent"] == {"unanswered": "the files extension is not in use"}
    assert not (workdir / "audit.jsonl").exists() or not (workdir / "audit.jsonl").read_text().strip()


def test_an_unknown_era_is_a_usage_error(workdir: Path) -> None:
    out = run_cli("connect", "--era", "newest", "--call", "plain", "--", *BATCH_SERVER, timeout=60)
    assert out.returncode != 0 and "--era" in out.stderr
