"""Two brokering processes of one user meet in one lock folder, whatever their sessions set.

A kernel started from a desktop session has ``XDG_RUNTIME_DIR``; a command line run
from SSH or cron often has not, and sudo or a cron job may change ``HOME`` and the
XDG folders. Before, the lock folder followed ``XDG_RUNTIME_DIR`` (else the cache
folder of ``XDG_CACHE_HOME``/``HOME``): such processes locked in different folders
and each took the other's kept lock without a word. Now the folder follows the
account, so the second process gets FILE_LOCKED.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.brokerproc import BrokerProcess

ALLOW = ["data:read,write"]


def request(broker: BrokerProcess, server: str, method: str, **params: object) -> dict[str, Any]:
    outcome: dict[str, Any] = broker.call(server, "request", method=method, params=params)
    return outcome


def private_folder(path: Path) -> str:
    path.mkdir(parents=True)
    os.chmod(path, 0o700)
    return str(path)


@pytest.mark.parametrize("session", ["ssh", "cron"])
def test_a_kept_lock_is_seen_by_a_process_of_another_session(tmp_path: Path, session: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "shared.csv").write_text("a,b\n1,2\n")
    desktop_env: dict[str, str | None] = {"XDG_RUNTIME_DIR": private_folder(tmp_path / "runtime")}
    other_env: dict[str, str | None] = {"XDG_RUNTIME_DIR": None}
    if session == "cron":  # another HOME and cache folder too, as sudo -H or a cron job's environment
        other_env |= {
            "HOME": private_folder(tmp_path / "cron-home"),
            "XDG_CACHE_HOME": private_folder(tmp_path / "cron-cache"),
        }
    desktop = BrokerProcess(
        tmp_path, {"data": data}, allow=ALLOW, label="desktop", default_locks=True, env=desktop_env
    )
    try:
        other = BrokerProcess(
            tmp_path, {"data": data}, allow=ALLOW, label=session, default_locks=True, env=other_env
        )
        try:
            desktop.connect("holder")
            other.connect("intruder")
            kept = request(desktop, "holder", "files/read", path="data/shared.csv", keepLocked=True)
            assert "result" in kept, kept

            refused = request(other, "intruder", "files/read", path="data/shared.csv", keepLocked=True)
            assert "error" in refused, f"the {session} process took a lock the desktop process keeps"
            error = refused["error"]
            assert error["name"] == "FILE_LOCKED", error
            assert str(error["data"]["lockedBy"]).startswith(f"holder (process {desktop.pid})")

            # Released in one process, free in the other: the same lock file, not a refusal of another kind.
            unlocked = request(desktop, "holder", "files/unlock", lockId=kept["result"]["lockId"])
            assert unlocked == {"result": {"unlocked": True}}
            taken = request(other, "intruder", "files/read", path="data/shared.csv", keepLocked=True)
            assert "result" in taken, taken
        finally:
            other.exit()
    finally:
        desktop.exit()
