"""A brokering process killed with SIGKILL while it holds kept locks and staged uploads.

The process (a ``Broker`` serving a real server over stdio) keeps a lock on one
file and has two uploads staged, one in the root's folder and one deeper. It
dies without a word. The OS drops its locks with it: another broker locks the
file at once. Its temporary files stay behind, hidden; a broker started later
removes the one in the root's folder once it is old enough, and the deeper one
goes when that folder is next written.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.errors import FileLocked
from tests.reliability.brokerproc import BrokerProcess
from tests.reliability.harness import TIMEOUT, temp_files
from tests.support.brokers import ALL_OPS
from tests.support.processes import pid_alive

OLD = "the old content\n"
CHUNK = base64.b64encode(b"staged " * 10_000).decode()
#: How far back the leftovers are dated: older than any stale-age setting used here.
LONG_AGO = 3600.0


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} did not exit"
        time.sleep(0.01)


def request(broker: BrokerProcess, server: str, method: str, **params: object) -> dict[str, object]:
    outcome = broker.call(server, "request", method=method, params=params)
    assert "result" in outcome, outcome
    return outcome["result"]  # type: ignore[no-any-return]


def age(paths: list[str]) -> None:
    then = time.time() - LONG_AGO
    for path in paths:
        os.utime(path, (then, then))


@pytest.mark.slow
def test_a_brokering_process_killed_holding_kept_locks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "target.txt").write_text(OLD)
    allow = ["data:read,write,delete,watch"]

    doomed = BrokerProcess(tmp_path, {"data": data}, allow=allow, label="doomed")
    try:
        server_pid = doomed.connect("holder")
        assert server_pid is not None
        locked = request(doomed, "holder", "files/read", path="data/target.txt", keepLocked=True)
        assert str(locked["lockId"]).startswith("lock_")
        for path in ("data/big.bin", "data/sub/big.bin"):
            staged = request(
                doomed,
                "holder",
                "files/write",
                path=path,
                content=CHUNK,
                encoding="base64",
                offset=0,
                final=False,
            )
            assert staged["staged"] is True

        # Another broker on the same folder and lock directory, as another kernel has.
        config = BrokerConfig(
            lock_dir=str(tmp_path / "locks"), trash_dir=str(tmp_path / "trash"), stale_temp_age=0
        )
        with Broker(config) as other:
            other.add_root(data, name="data")
            other.allow("data", ops=ALL_OPS)
            conn = other.connect("other")
            # Alive, the doomed process's lock and staged files are its own, however old.
            with pytest.raises(FileLocked) as info:
                conn.handle("files/write", {"path": "data/target.txt", "content": "intruder"})
            assert str(info.value.data["lockedBy"]).startswith(f"holder (process {doomed.pid})")
            leftovers = temp_files(data)
            assert len(leftovers) == 2
            age(leftovers)
            conn.handle("files/write", {"path": "data/sub/other.txt", "content": "o"})  # sweeps data/sub
            assert temp_files(data) == leftovers

            doomed.kill()
            wait_gone(server_pid)  # its server saw its input end, and exited

            # The OS dropped the dead process's locks: another broker locks the file at once.
            other.configure(lock_wait=0)
            kept = conn.handle("files/read", {"path": "data/target.txt", "keepLocked": True})
            assert kept["content"] == OLD
            conn.handle("files/unlock", {"lockId": kept["lockId"]})
        assert (data / "target.txt").read_text() == OLD
        assert not (data / "big.bin").exists() and not (data / "sub" / "big.bin").exists()
        leftovers = temp_files(data)
        assert len(leftovers) == 2  # hidden, and no broker was started or wrote there since

        # A broker started now: the leftovers are dead but fresh; the age guard keeps them a while.
        for path in leftovers:
            os.utime(path)
        fresh = BrokerProcess(tmp_path, {"data": data}, allow=allow, label="fresh")
        fresh.exit()
        assert temp_files(data) == leftovers

        # Later: the root's folder is swept when a broker starts, the deeper one when it is written.
        age(leftovers)
        later = BrokerProcess(tmp_path, {"data": data}, allow=allow, label="later")
        try:
            assert temp_files(data) == [p for p in leftovers if "/sub/" in p]
            later.connect("writer")
            request(later, "writer", "files/write", path="data/sub/new.txt", content="new")
            assert temp_files(data) == []
        finally:
            later.exit()
    finally:
        doomed.kill()
    assert sorted(p.name for p in data.iterdir()) == ["sub", "target.txt"]
