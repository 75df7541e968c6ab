"""``jupyter-fsbroker trash`` and the trash and audit options of ``connect``: real processes, a real server.

A server (``tests/reliability/servers/app.py``, built with the server helper) deletes through
``jupyter-fsbroker connect``; then ``jupyter-fsbroker trash`` lists, restores and empties what
it deleted, as a user in a terminal would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import SALES
from tests.support.cli import run_cli as cli
from tests.support.env import REPO

APP = str(REPO / "tests" / "reliability" / "servers" / "app.py")
CLI = [sys.executable, "-m", "jupyter_fsbroker"]


def server_request(method: str, params: dict[str, Any], *options: str) -> dict[str, Any]:
    """One raw request of the server through ``jupyter-fsbroker connect``; its result or error."""
    out = cli(
        "connect",
        "--root",
        "data=./data",
        "--allow",
        "data:read,write,delete",
        "--name",
        "cleaner",
        *options,
        "--call",
        "request",
        "--args",
        json.dumps({"method": method, "params": params}),
        "--",
        sys.executable,
        APP,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["structuredContent"]  # type: ignore[no-any-return]


@pytest.mark.slow
def test_list_restore_and_empty_what_a_server_deleted(workdir: Path) -> None:
    assert cli("trash").stdout == "Trash: 0 entries, 0 B\n"
    assert server_request("files/delete", {"path": "data/sales.csv"})["result"]["trashed"] is True
    assert not (workdir / "data" / "sales.csv").exists()

    listed = cli("trash", "list")
    assert listed.returncode == 0
    assert f"Trash: 1 entry, {len(SALES)} B" in listed.stdout and "data/sales.csv" in listed.stdout
    assert str(workdir / "data" / "sales.csv") in listed.stdout  # where it was, for the user's eyes
    [entry] = [json.loads(line) for line in cli("trash", "list", "--json").stdout.splitlines()]
    assert (entry["root"], entry["path"], entry["size"], entry["server"]) == (
        "data",
        "data/sales.csv",
        len(SALES),
        "cleaner",
    )

    restored = cli("trash", "restore", entry["id"][-8:], "--audit", "audit.jsonl")
    assert restored.returncode == 0, restored.stderr
    assert f"restored data/sales.csv to {workdir / 'data' / 'sales.csv'}" in restored.stderr
    assert (workdir / "data" / "sales.csv").read_text() == SALES
    [record] = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    assert (record["method"], record["actor"], record["server"], record["path"]) == (
        "trash/restore",
        "user",
        "(you)",
        "data/sales.csv",
    )

    # Deleted again and written again: a restore does not replace the new file unless told to.
    server_request("files/delete", {"path": "data/sales.csv"})
    (workdir / "data" / "sales.csv").write_text("newer\n")
    [entry] = [json.loads(line) for line in cli("trash", "list", "--json").stdout.splitlines()]
    refused = cli("trash", "restore", entry["id"])
    assert refused.returncode == 2 and "something is at" in refused.stderr
    assert (workdir / "data" / "sales.csv").read_text() == "newer\n"
    assert cli("trash", "restore", entry["id"], "--to", "old-sales.csv").returncode == 0
    assert (workdir / "old-sales.csv").read_text() == SALES

    server_request("files/delete", {"path": "data/sales.csv"})
    kept = cli("trash", "empty", "--older-than", "1")
    assert kept.returncode == 0 and "deleted 0 trash entries" in kept.stderr
    emptied = cli("trash", "empty")
    assert emptied.returncode == 0 and "deleted 1 trash entry for good" in emptied.stderr
    assert cli("trash", "list", "--json").stdout == ""

    unknown = cli("trash", "restore", "nope")
    assert unknown.returncode == 2 and "no trash entry 'nope'" in unknown.stderr


def test_connect_with_a_small_trash_refuses_a_large_delete(workdir: Path) -> None:
    answer = server_request("files/delete", {"path": "data/sales.csv"}, "--trash-max-bytes", "10")
    assert (answer["error"]["name"], answer["error"]["reason"]) == ("TOO_LARGE", "exceeds_trash")
    assert answer["error"]["data"]["maxBytes"] == 10
    assert (workdir / "data" / "sales.csv").exists()
    bad = cli("connect", "--trash-max-age", "0", "--", sys.executable, APP)
    assert bad.returncode == 2 and "trash_max_age must be a positive number" in bad.stderr


def test_connect_audit_required(workdir: Path) -> None:
    alone = cli("connect", "--audit-required", "--", sys.executable, APP)
    assert alone.returncode == 2 and "audit_required needs an audit file" in alone.stderr
    answer = server_request(
        "files/write",
        {"path": "data/sales.csv", "content": "x"},
        "--audit",
        "audit.jsonl",
        "--audit-required",
    )
    assert answer["result"]["size"] == 1
    lines = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    [intent] = [line for line in lines if line.get("phase") == "intent"]
    [record] = [line for line in lines if line.get("method") == "files/write" and "phase" not in line]
    assert intent["auditId"] == record["auditId"]
    if Path("/dev/full").exists():  # a full disk, for real
        refused = server_request(
            "files/write",
            {"path": "data/sales.csv", "content": "y"},
            "--audit",
            "/dev/full",
            "--audit-required",
        )
        assert (refused["error"]["name"], refused["error"]["reason"]) == (
            "PERMISSION_DENIED",
            "audit_unavailable",
        )
        assert (workdir / "data" / "sales.csv").read_text() == "x"
