"""Permissions changed under the broker between requests and mid-operation: PERMISSION_DENIED, nothing lost.

The brokering process must be one that permission bits bind: when the tests
run as root, it runs in a user namespace of its own as an ordinary user (the
files then belong to it, so their owner bits decide). Each refusal is
PERMISSION_DENIED with ``reason: os_permission``; the files keep their content,
no temporary file stays once the folder is writable again, and the other
server goes on as before.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.brokerproc import BrokerProcess, unshare_prefix
from tests.reliability.harness import temp_files

OLD = "the old content\n"


@pytest.fixture(scope="module")
def unprivileged() -> list[str]:
    """The command prefix that makes the brokering process an ordinary user."""
    if os.geteuid() != 0:
        return []
    prefix = unshare_prefix("--map-user=1000", "--map-group=1000")
    if prefix is None:
        pytest.skip("running as root and no user namespace can be made: permission bits would not bind")
    return prefix


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("permissions")
    (folder / "data").mkdir()
    return folder


@pytest.fixture(scope="module")
def broker(shared: Path, unprivileged: list[str]) -> Iterator[BrokerProcess]:
    """One brokering process for the module (each test has a folder of its own in its root)."""
    process = BrokerProcess(
        shared, {"data": shared / "data"}, allow=["data:read,write,delete"], prefix=unprivileged, stale_age=0
    )
    try:
        process.connect("victim")
        process.connect("bystander")
        yield process
    finally:
        process.exit()


@pytest.fixture
def data(shared: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """This test's folder, ``data/<test>`` on the wire: ``target.txt`` and ``sub/inner.txt``."""
    folder = shared / "data" / request.node.name
    (folder / "sub").mkdir(parents=True)
    (folder / "target.txt").write_text(OLD)
    (folder / "sub" / "inner.txt").write_text(OLD)
    try:
        yield folder
    finally:
        for path in (folder, folder / "sub"):
            path.chmod(0o755)  # so that the test's folder can be removed


def request(broker: BrokerProcess, method: str, server: str = "victim", **params: Any) -> dict[str, Any]:
    return broker.call(server, "request", method=method, params=params)  # type: ignore[no-any-return]


def assert_refused(outcome: dict[str, Any], path: str) -> None:
    assert "error" in outcome, outcome
    error = outcome["error"]
    assert (error["name"], error["code"], error["reason"]) == ("PERMISSION_DENIED", -32101, "os_permission")
    assert error["message"] == f"the operating system refused access to {path}"


def assert_bystander_served(broker: BrokerProcess) -> None:
    outcome = request(broker, "files/write", server="bystander", path="data/bystander.txt", content="fine")
    assert outcome["result"]["size"] == 4


def test_a_file_made_unreadable(broker: BrokerProcess, data: Path) -> None:
    target = f"data/{data.name}/target.txt"
    first = request(broker, "files/read", path=target, length=4)
    assert first["result"]["content"] == OLD[:4]
    (data / "target.txt").chmod(0)
    # The next chunk of the same read, and a whole read.
    assert_refused(request(broker, "files/read", path=target, offset=4), target)
    assert_refused(request(broker, "files/read", path=target), target)
    assert_bystander_served(broker)
    (data / "target.txt").chmod(0o644)
    assert (data / "target.txt").read_text() == OLD
    assert request(broker, "files/read", path=target)["result"]["content"] == OLD


def test_a_folder_made_read_only(broker: BrokerProcess, data: Path) -> None:
    sub = f"data/{data.name}/sub"
    assert request(broker, "files/write", path=f"{sub}/inner.txt", content="v2")["result"]["size"] == 2
    (data / "sub").chmod(0o555)
    refused = {
        "write": request(broker, "files/write", path=f"{sub}/inner.txt", content="v3"),
        "create": request(broker, "files/create", path=f"{sub}/new.txt", type="file"),
        "delete": request(broker, "files/delete", path=f"{sub}/inner.txt"),
        "rename": request(
            broker, "files/rename", path=f"{sub}/inner.txt", newPath=f"data/{data.name}/moved.txt"
        ),
    }
    for outcome in refused.values():
        assert "error" in outcome and outcome["error"]["reason"] == "os_permission", outcome
    assert_refused(refused["write"], f"{sub}/inner.txt")
    assert_bystander_served(broker)
    assert (data / "sub" / "inner.txt").read_text() == "v2"
    assert sorted(p.name for p in (data / "sub").iterdir()) == ["inner.txt"]
    assert temp_files(data) == []
    assert broker.stats()["locks"] == []


def test_a_folder_made_read_only_mid_upload(broker: BrokerProcess, data: Path) -> None:
    """The chunks go to a file opened before; the commit (a rename in the folder) is refused."""
    sub = f"data/{data.name}/sub"
    chunk = base64.b64encode(b"staged " * 1000).decode()
    params = {"path": f"{sub}/inner.txt", "content": chunk, "encoding": "base64"}
    staged = request(broker, "files/write", **params, offset=0, final=False)
    assert staged["result"]["staged"] is True
    (data / "sub").chmod(0o555)
    more = request(broker, "files/write", **params, offset=7000, final=False)
    assert more["result"]["size"] == 14000
    assert_refused(request(broker, "files/write", **params, offset=14000, final=True), f"{sub}/inner.txt")
    assert (data / "sub" / "inner.txt").read_text() == OLD
    assert broker.stats()["locks"] == []
    # The staged file could not be removed from the read-only folder: it is left, unlocked, hidden.
    [left] = temp_files(data)
    listing = request(broker, "files/list", path=sub, includeHidden=True)
    assert [e["name"] for e in listing["result"]["entries"]] == ["inner.txt"]
    # Writable again: the next write in that folder sweeps it.
    (data / "sub").chmod(0o755)
    assert request(broker, "files/write", path=f"{sub}/inner.txt", content="v2")["result"]["size"] == 2
    assert not os.path.exists(left)
    assert temp_files(data) == []
    assert (data / "sub" / "inner.txt").read_text() == "v2"


def test_a_folder_made_unsearchable(broker: BrokerProcess, data: Path) -> None:
    sub = f"data/{data.name}/sub"
    (data / "sub").chmod(0)
    assert_refused(request(broker, "files/list", path=sub), sub)
    assert_refused(request(broker, "files/stat", path=f"{sub}/inner.txt"), f"{sub}/inner.txt")
    assert_refused(request(broker, "files/read", path=f"{sub}/inner.txt"), f"{sub}/inner.txt")
    assert_bystander_served(broker)
    (data / "sub").chmod(0o755)
    assert (data / "sub" / "inner.txt").read_text() == OLD


def test_an_upload_abandoned_in_a_folder_made_read_only(broker: BrokerProcess, data: Path) -> None:
    """Its staged file cannot be removed now: the connection still closes cleanly, and nothing leaks."""
    sub = f"data/{data.name}/sub"
    before = broker.stats()
    broker.connect("abandoner")
    chunk = base64.b64encode(b"staged " * 1000).decode()
    params = {"path": f"{sub}/inner.txt", "content": chunk, "encoding": "base64", "offset": 0, "final": False}
    assert request(broker, "files/write", server="abandoner", **params)["result"]["staged"] is True
    (data / "sub").chmod(0o555)
    broker.command("close", name="abandoner")  # discards the upload
    after = broker.stats()
    assert after["locks"] == [] and after["connections"] == before["connections"]
    assert len(after["fds"]) == len(before["fds"])
    assert (data / "sub" / "inner.txt").read_text() == OLD
    [left] = temp_files(data)
    (data / "sub").chmod(0o755)
    assert request(broker, "files/write", path=f"{sub}/inner.txt", content="v2")["result"]["size"] == 2
    assert not os.path.exists(left)
    assert_bystander_served(broker)
