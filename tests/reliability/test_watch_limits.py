"""The operating system out of file watches: ``files/watch`` refused clearly, the rest goes on.

The brokering process runs in a user namespace of its own whose inotify limits
it lowers (``/proc/sys/user/max_inotify_watches`` and ``..._instances`` are
per namespace): nothing else on the machine is affected. A watch the OS cannot
give, whole, is RATE_LIMITED with ``reason: watch_limit`` (also a recursive
one the limit would cut short, which inotify's backend would otherwise accept
silently, watching only part of the tree); the watches already set keep
reporting, the server is served, and the broker holds no more threads or
descriptors than before.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.brokerproc import BrokerProcess, unshare_prefix
from tests.reliability.harness import TIMEOUT

#: Watches the brokering process may have in all: a few, fewer than the big tree's folders.
WATCHES = 10


@pytest.fixture(scope="module")
def own_namespace() -> list[str]:
    prefix = unshare_prefix("--map-root-user")
    if prefix is None:
        pytest.skip(
            "no user namespace can be made here: the inotify limits could only be lowered for everyone"
        )
    return prefix


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    (folder / "small").mkdir(parents=True)
    for i in range(3 * WATCHES):
        (folder / "big" / f"d{i:02}").mkdir(parents=True)
    return folder


def watch_error(broker: BrokerProcess, server: str, **params: Any) -> dict[str, Any]:
    outcome = broker.call(server, "request", method="files/watch", params=params)
    assert "error" in outcome, outcome
    return outcome["error"]  # type: ignore[no-any-return]


def assert_watch_limit(error: dict[str, Any]) -> None:
    assert (error["name"], error["code"], error["reason"]) == ("RATE_LIMITED", -32107, "watch_limit")
    assert "limit of file watches" in error["message"]
    assert error["data"]["retryAfterMs"] > 0


def wait_for_watches(broker: BrokerProcess, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while broker.stats()["watches"] != count:
        assert time.monotonic() < deadline, f"the broker did not get to {count} watches"
        time.sleep(0.02)


@pytest.mark.slow
def test_out_of_inotify_watches(tmp_path: Path, data: Path, own_namespace: list[str]) -> None:
    allow = ["data:read,write,watch"]
    broker = BrokerProcess(
        tmp_path, {"data": data}, allow=allow, prefix=own_namespace, inotify_watches=WATCHES
    )
    try:
        broker.connect("watcher")
        broker.connect("greedy")
        watching = broker.send(
            "call",
            name="watcher",
            tool="watch",
            args={"path": "data/small", "count": 1, "timeout": TIMEOUT},
            timeout=TIMEOUT,
        )
        wait_for_watches(broker, 1)
        before = broker.stats()

        # 31 folders to watch, room for fewer: refused, not accepted half-blind.
        assert_watch_limit(watch_error(broker, "greedy", path="data/big", recursive=True))
        after = broker.stats()
        assert after["watches"] == 1
        assert after["fds"] == before["fds"]
        assert after["threads"] == before["threads"]

        # The broker serves, and the watch set before still reports.
        written = broker.call(
            "greedy", "request", method="files/write", params={"path": "data/small/new.txt", "content": "x"}
        )
        assert written["result"]["size"] == 1
        events = broker.wait(watching, TIMEOUT + 10)["events"]
        assert [(e["path"], e["event"]) for e in events] == [("data/small/new.txt", "created")]
        # A watch that fits is still given.
        fits = broker.call("greedy", "request", method="files/watch", params={"path": "data/small"})
        assert fits["result"]["watchId"].startswith("w_")
    finally:
        broker.exit()


@pytest.mark.slow
def test_out_of_inotify_instances(tmp_path: Path, data: Path, own_namespace: list[str]) -> None:
    broker = BrokerProcess(
        tmp_path, {"data": data}, allow=["data:read,write,watch"], prefix=own_namespace, inotify_instances=0
    )
    try:
        broker.connect("watcher")
        assert_watch_limit(watch_error(broker, "watcher", path="data/small"))
        first = broker.stats()
        assert_watch_limit(watch_error(broker, "watcher", path="data/big", recursive=True))
        again = broker.stats()
        assert (again["fds"], again["threads"], again["watches"]) == (first["fds"], first["threads"], 0)
        written = broker.call(
            "watcher", "request", method="files/write", params={"path": "data/small/new.txt", "content": "x"}
        )
        assert written["result"]["size"] == 1
    finally:
        broker.exit()
