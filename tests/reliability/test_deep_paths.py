"""A tree 250 levels deep, served over a real connection by a brokering process limited to 128 descriptors.

Before: resolving a path held one descriptor per level, so a few concurrent
requests ~120 levels deep ran out of descriptors under a 1024 limit (EMFILE,
answered -32603), and ``parents: true`` stopped at 40 levels. Here a server
(``servers/app.py`` over stdio) creates ``data/d0/…/d249/f.txt`` with one
``files/create``, then sends reads, stats, writes, listings and a recursive
watch of that depth from eight tool calls at once, and finally deletes the
tree (a copy into the trash, 250 levels) — all within a descriptor limit that
one descriptor per level would pass with a single request. Every request
succeeds, and the process ends with the descriptors it started with.
(``tests/core/test_deep.py`` checks the walk's bound itself, and symlinks
climbing up at depth.)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.brokerproc import BrokerProcess

DEPTH = 250
CONCURRENT = 8
#: The brokering process's descriptor limit (soft and hard): far below one per level per request.
LIMIT = 128
#: Runs the rest of the command line with RLIMIT_NOFILE at LIMIT.
LIMITED = [
    sys.executable,
    "-c",
    "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); "
    "os.execv(sys.argv[2], sys.argv[2:])",
    str(LIMIT),
]


def chain(depth: int) -> str:
    return "/".join(f"d{i}" for i in range(depth))


def request(broker: BrokerProcess, method: str, params: dict[str, Any]) -> int:
    return broker.send(
        "call", name="deep", tool="request", args={"method": method, "params": params}, timeout=240
    )


@pytest.mark.slow
def test_a_deep_tree_under_a_low_descriptor_limit_with_concurrency(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    deep = f"data/{chain(DEPTH)}"
    broker = BrokerProcess(
        tmp_path, {"data": data}, allow=["data:read,write,delete,watch"], label="deep", prefix=LIMITED
    )
    try:
        with open(f"/proc/{broker.pid}/limits", encoding="ascii") as limits:
            [line] = [line for line in limits if line.startswith("Max open files")]
        assert line.split()[3:5] == [str(LIMIT), str(LIMIT)], line
        broker.connect("deep")
        created = broker.wait(
            request(
                broker,
                "files/create",
                {"path": f"{deep}/f.txt", "type": "file", "content": "0", "parents": True},
            )
        )
        assert created == {"result": {"path": f"{deep}/f.txt", "type": "file"}}, created
        start = broker.stats()
        calls = []
        for i in range(CONCURRENT):
            calls += [
                request(broker, "files/read", {"path": f"{deep}/f.txt"}),
                request(broker, "files/stat", {"path": f"{deep}/f.txt"}),
                request(broker, "files/write", {"path": f"{deep}/w{i}.txt", "content": str(i)}),
                request(broker, "files/list", {"path": deep}),
                request(broker, "files/list", {"path": f"data/{chain(DEPTH // 2)}", "recursive": True}),
                request(
                    broker,
                    "files/create",
                    {"path": f"{deep}/e{i}/" + chain(20), "type": "directory", "parents": True},
                ),
            ]
        outcomes = [broker.wait(call, 300) for call in calls]
        failed = [o for o in outcomes if "result" not in o]
        assert failed == [], failed[:5]
        reads = outcomes[0::6]
        assert {o["result"]["content"] for o in reads} == {"0"}
        watch = broker.wait(request(broker, "files/watch", {"path": "data", "recursive": True}))
        assert "watchId" in watch["result"], watch
        trashed = broker.wait(request(broker, "files/delete", {"path": "data/d0", "recursive": True}))
        assert trashed == {"result": {"path": "data/d0", "trashed": True}}, trashed
        broker.command("close", name="deep")
        end = broker.stats()
    finally:
        broker.exit()
    assert list(data.iterdir()) == []
    print(
        f"\n{len(calls)} requests {DEPTH} levels deep, {CONCURRENT} calls at once, "
        f"under a {LIMIT}-descriptor limit: descriptors {len(start['fds'])} -> {len(end['fds'])}"
    )
    assert len(end["fds"]) <= len(start["fds"])
