"""Deep trees: resolution holds a constant number of descriptors, and ``parents`` works at any depth.

Before: resolving a path held one descriptor per directory level, so a few concurrent requests
~120 levels deep ran out of descriptors under a 1024 limit (EMFILE, answered -32603); and
``files/create`` with ``parents: true`` stopped at 40 levels, each created directory counting as
a symbolic-link hop. Now the walk holds at most ``WALK_DESCRIPTORS`` descriptors whatever the
depth (a link's ``..`` above the ancestors it still holds walks down again from the deepest one
it holds), and created parents count against no limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core import descent, resolve, trees
from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.resolve import MAX_SYMLINKS, WALK_DESCRIPTORS
from tests.support.env import server_env

from .conftest import error_of

DEPTH = 250


def chain(depth: int, prefix: str = "d") -> str:
    return "/".join(f"{prefix}{i}" for i in range(depth))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def deep(data: Path, conn: Connection) -> str:
    """``data/d0/.../d249/f.txt``, made by one ``files/create`` with ``parents``."""
    path = f"data/{chain(DEPTH)}/f.txt"
    assert conn.handle(
        "files/create", {"path": path, "type": "file", "content": "deep", "parents": True}
    ) == {
        "path": path,
        "type": "file",
    }
    return path


def test_parents_are_created_at_any_depth(data: Path, conn: Connection, deep: str) -> None:
    assert DEPTH > MAX_SYMLINKS
    assert (data.joinpath(*chain(DEPTH).split("/")) / "f.txt").read_text() == "deep"
    directory = f"data/{chain(DEPTH + 10)}"
    assert (
        conn.handle("files/create", {"path": directory, "type": "directory", "parents": True})["type"]
        == "directory"
    )
    # Symbolic links still count: a loop is refused.
    (data / "loop").symlink_to("loop")
    assert error_of(
        conn, "files/create", {"path": "data/loop/x", "type": "file", "parents": True}
    ).reason == ("symlink_loop")


def test_every_method_works_deep_down(conn: Connection, deep: str) -> None:
    folder = deep.rpartition("/")[0]
    assert conn.handle("files/read", {"path": deep})["content"] == "deep"
    assert conn.handle("files/stat", {"path": folder})["type"] == "directory"
    conn.handle("files/write", {"path": deep, "content": "deeper"})
    assert [e["name"] for e in conn.handle("files/list", {"path": folder})["entries"]] == ["f.txt"]
    listed = conn.handle("files/list", {"path": "data/d0", "recursive": True, "maxEntries": 100})
    assert len(listed["entries"]) == 100 and "nextCursor" in listed
    conn.handle("files/rename", {"path": deep, "newPath": f"{folder}/g.txt"})
    conn.handle("files/delete", {"path": f"{folder}/g.txt"})


def test_a_deep_resolution_holds_a_constant_number_of_descriptors(
    conn: Connection, deep: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    peak = 0
    real_open = os.open

    def counting_open(*args: object, **kwargs: object) -> int:
        nonlocal peak
        fd = real_open(*args, **kwargs)  # type: ignore[arg-type]
        peak = max(peak, open_fds() - 1)  # the listing of /proc/self/fd holds one itself
        return fd

    baseline = open_fds()
    monkeypatch.setattr(resolve.os, "open", counting_open)
    assert conn.handle("files/stat", {"path": deep})["size"] == 4
    assert peak - baseline <= WALK_DESCRIPTORS
    assert open_fds() == baseline


@pytest.mark.parametrize("kept", [0, 1, 2])
def test_links_climbing_up_land_where_the_os_says(
    data: Path, conn: Connection, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """A link's ``..`` resolves like the operating system's, whether or not the ancestor is still held."""
    monkeypatch.setattr(resolve, "_KEPT_ANCESTORS", kept)
    depth = 12
    folder = data
    for level in range(depth):
        folder = folder / f"d{level}"
        folder.mkdir()
        (folder / "f").write_text(str(level))
        for up in range(1, level + 2):
            (folder / f"up{up}").symlink_to("/".join([".."] * up))
        (folder / "zig").symlink_to(f"../d{level}/../d{level}/f" if level else "f")
    for level in range(depth):
        here = chain(level + 1)
        for up in range(1, level + 2):
            target = level - up
            raw = f"data/{here}/up{up}/f"
            expected = os.path.realpath(data / here / f"up{up}" / "f")
            if target < 0:
                assert error_of(conn, "files/read", {"path": raw}).name == "NOT_FOUND"
                continue
            result = conn.handle("files/stat", {"path": raw})
            assert result["path"] == "data/" + os.path.relpath(expected, data)
            assert conn.handle("files/read", {"path": raw})["content"] == str(target)
            # Down again below where the link led.
            again = f"data/{here}/up{up}/d{target + 1}/f" if target + 1 < depth else None
            if again is not None:
                assert conn.handle("files/read", {"path": again})["content"] == str(target + 1)
        assert conn.handle("files/read", {"path": f"data/{here}/zig"})["content"] == str(level)


@pytest.fixture
def limited_script(tmp_path: Path) -> Iterator[Path]:
    script = tmp_path / "limited.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, resource, sys, threading
            from pathlib import Path
            from tests.support.brokers import ALL_OPS, make_broker
            from jupyter_fsbroker.core.errors import FilesError
            from jupyter_fsbroker.core.limits import Limits

            base = Path(sys.argv[1])
            depth, threads, limit = (int(a) for a in sys.argv[2:5])
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            (base / "data").mkdir(parents=True)
            folder = "/".join(f"d{i}" for i in range(depth))
            outcomes = {}
            lock = threading.Lock()
            with make_broker(base, limits=Limits(ops_per_second=1e6, ops_burst=10**6)) as broker:
                broker.add_root(base / "data", name="data")
                broker.allow("data", ops=ALL_OPS)
                conn = broker.connect("deep")
                conn.handle("files/create", {"path": f"data/{folder}", "type": "directory", "parents": True})
                start = threading.Barrier(threads)

                def work(n):
                    start.wait()
                    mine = f"data/{folder}/t{n}"
                    steps = [
                        ("files/create", {"path": mine, "type": "directory"}),
                        ("files/write", {"path": f"{mine}/f.txt", "content": "x" * n}),
                    ]
                    for _ in range(10):
                        steps += [
                            ("files/read", {"path": f"{mine}/f.txt"}),
                            ("files/stat", {"path": f"{mine}/f.txt"}),
                            ("files/list", {"path": f"data/{folder}"}),
                            ("files/list", {"path": "data/d0", "recursive": True, "maxEntries": 50}),
                            ("files/write", {"path": f"{mine}/f.txt", "content": "y" * n}),
                        ]
                    for method, params in steps:
                        try:
                            conn.handle(method, params)
                            key = "ok"
                        except FilesError as exc:
                            key = f"{method}:{exc.code}:{exc.reason}"
                        with lock:
                            outcomes[key] = outcomes.get(key, 0) + 1

                pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
                for t in pool:
                    t.start()
                for t in pool:
                    t.join()
                # Whole deep trees: into the trash, and removed for good.
                other = "/".join(f"e{i}" for i in range(depth))
                conn.handle("files/create", {"path": f"data/{other}/f", "type": "file", "parents": True})
                outcomes["trashed"] = conn.handle("files/delete", {"path": "data/d0", "recursive": True})
                broker.configure(permanent_delete=True)
                outcomes["removed"] = conn.handle("files/delete", {"path": "data/e0", "recursive": True})
                outcomes["left"] = sorted(os.listdir(base / "data"))
            print(json.dumps(outcomes))
            """
        )
    )
    yield script


def test_deep_trees_under_a_low_descriptor_limit_with_concurrency(
    tmp_path: Path, limited_script: Path
) -> None:
    threads, limit = 8, 128  # one descriptor per level would need threads x 250
    result = subprocess.run(
        [sys.executable, str(limited_script), str(tmp_path / "world"), str(DEPTH), str(threads), str(limit)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **server_env()},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes == {
        "ok": threads * 52,
        "trashed": {"path": "data/d0", "trashed": True},
        "removed": {"path": "data/e0", "trashed": False},
        "left": [],
    }, outcomes


def test_an_escaping_link_deep_down_is_still_refused(
    data: Path, broker: Broker, conn: Connection, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("no")
    folder = data.joinpath(*chain(60).split("/"))
    folder.mkdir(parents=True)
    (folder / "out").symlink_to("/".join([".."] * 61) + "/outside")
    (folder / "abs").symlink_to(outside)
    for name in ("out", "abs"):
        with pytest.raises(FilesError) as info:
            conn.handle("files/read", {"path": f"data/{chain(60)}/{name}/secret"})
        assert info.value.reason == "escaping_symlink"


def test_tree_walks_hold_few_descriptors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying, sizing and removing a tree 300 levels deep, with a file at every level."""
    src = tmp_path / "src"
    folder = src / "top"
    for level in range(300):
        folder.mkdir(parents=True)
        (folder / "f").write_bytes(b"x" * level)
        folder = folder / "d"
    (tmp_path / "dst").mkdir()
    peak = 0
    real_open = os.open

    def counting_open(*args: object, **kwargs: object) -> int:
        nonlocal peak
        fd = real_open(*args, **kwargs)  # type: ignore[arg-type]
        peak = max(peak, open_fds() - 1)
        return fd

    src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    dst_fd = os.open(tmp_path / "dst", os.O_RDONLY | os.O_DIRECTORY)
    try:
        baseline = open_fds()
        monkeypatch.setattr(trees.os, "open", counting_open)
        monkeypatch.setattr(descent.os, "open", counting_open)
        trees.copy_tree(src_fd, "top", dst_fd, "copy")
        assert trees.tree_size(dst_fd, "copy") == sum(range(300))
        trees.remove_tree(src_fd, "top")
        trees.remove_tree(dst_fd, "copy")
        assert open_fds() == baseline
        assert peak - baseline <= 2 * descent.KEEP + 4  # two chains in a copy, plus a file each side
        assert os.listdir(src) == os.listdir(tmp_path / "dst") == []
    finally:
        os.close(src_fd)
        os.close(dst_fd)
