"""The trash's retention: it never grows past its size or keeps entries past their age, whoever prunes.

Each test deletes through a broker connection (``files/delete``) or lays entries out on disk as
an older process would have, then reads what is left from the disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jupyter_fsbroker.core import trashcan
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.config import DEFAULT_TRASH_MAX_AGE
from jupyter_fsbroker.core.connection import Connection
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.retention import TRASH_BYTES_CAP, Retention, default_trash_max_bytes
from jupyter_fsbroker.core.trash import Trash
from jupyter_fsbroker.core.trashentry import TrashEntry
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.env import server_env

MiB = 1024 * 1024
DAY = 86400.0


def on_disk(trash: Path) -> list[tuple[str, int]]:
    """``(path, payload size)`` of every complete entry in the trash directory, oldest first."""
    found = []
    for entry in trash.iterdir() if trash.exists() else ():
        meta = entry / "item.json"
        if entry.is_dir() and not entry.is_symlink() and meta.exists() and not meta.is_symlink():
            info = json.loads(meta.read_text())
            path = info.get("path") or info["display"]
            found.append((info["deleted_at"], path, payload_bytes(entry / "payload")))
    return [(path, size) for _, path, size in sorted(found)]


def payload_bytes(payload: Path) -> int:
    """The bytes of the files of a payload, counted on the disk (a link counts 0)."""
    if payload.is_symlink() or not payload.is_dir():
        return 0 if payload.is_symlink() else payload.stat().st_size
    return sum(
        (Path(folder) / name).lstat().st_size
        for folder, _, names in os.walk(payload)
        for name in names
        if not (Path(folder) / name).is_symlink()
    )


def old_entry(trash: Path, entry_id: str, *, age: float, size: int = 3, path: str = "data/old.txt") -> Path:
    """An entry as a broker of the version before roots were recorded left it, deleted *age* seconds ago."""
    folder = trash / entry_id
    folder.mkdir(parents=True)
    (folder / "payload").write_bytes(b"x" * size)
    meta = {
        "version": 1,
        "id": entry_id,
        "name": path.rpartition("/")[2],
        "origin": f"/nowhere/{path}",
        "display": path,
        "server": "old-server",
        "deleted_at": time.time() - age,
        "is_dir": False,
        "size": size,
    }
    (folder / "item.json").write_text(json.dumps(meta))
    return folder


def deleter(broker: Broker, data: Path) -> Connection:
    broker.add_root(data, name="data")
    broker.allow("data", ops=ALL_OPS)
    return broker.connect("deleter")


# -- the size -----------------------------------------------------------------------------------------


def test_the_default_size_bound_keeps_the_newest_deletes(tmp_path: Path, data: Path) -> None:
    """Before the fix, eight deletes of 300 MiB left all eight (2.4 GB) in the trash."""
    assert default_trash_max_bytes(str(tmp_path)) == TRASH_BYTES_CAP  # a large disk: 1 GiB
    with make_broker(tmp_path) as broker:
        conn = deleter(broker, data)
        for i in range(8):
            with open(data / f"big{i}.bin", "wb") as f:
                f.truncate(300 * MiB)  # sparse: 300 MiB by size, nothing on disk
            assert conn.handle("files/delete", {"path": f"data/big{i}.bin"})["trashed"] is True
        left = on_disk(tmp_path / ".trash")
        assert left == [(f"data/big{i}.bin", 300 * MiB) for i in (5, 6, 7)]
        assert sum(size for _, size in left) <= TRASH_BYTES_CAP
        expired = [r for r in broker.audit.records() if r.method == "trash/expire"]
        assert [(r.path, r.reason, r.actor, r.server, r.bytes) for r in expired] == [
            (f"data/big{i}.bin", "max_bytes", "broker", "(retention)", 300 * MiB) for i in range(5)
        ]


def test_an_object_larger_than_the_trash_is_refused_and_kept(tmp_path: Path, data: Path) -> None:
    with make_broker(tmp_path, trash_max_bytes=1000) as broker:
        conn = deleter(broker, data)
        (data / "small.txt").write_bytes(b"s" * 600)
        (data / "big").mkdir()
        (data / "big" / "a").write_bytes(b"a" * 600)
        (data / "big" / "b").write_bytes(b"b" * 600)
        with pytest.raises(FilesError) as info:
            conn.handle("files/delete", {"path": "data/big", "recursive": True})
        error = info.value
        assert (error.name, error.reason, error.data["maxBytes"]) == ("TOO_LARGE", "exceeds_trash", 1000)
        assert "nothing was deleted" in error.message and str(tmp_path) not in error.message
        assert sorted(p.name for p in (data / "big").iterdir()) == ["a", "b"]
        assert on_disk(tmp_path / ".trash") == []
        record = broker.audit.records()[-1]
        assert (record.method, record.decision, record.error, record.reason) == (
            "files/delete",
            "deny",
            "TOO_LARGE",
            "exceeds_trash",
        )
        # What fits goes to the trash; a second one pushes the first out.
        conn.handle("files/delete", {"path": "data/small.txt"})
        (data / "small.txt").write_bytes(b"t" * 600)
        conn.handle("files/delete", {"path": "data/small.txt"})
        assert on_disk(tmp_path / ".trash") == [("data/small.txt", 600)]
        [kept] = broker.trash.list()
        assert kept.path == "data/small.txt"
        # The bound follows configure(), like the other settings.
        broker.configure(trash_max_bytes=10_000)
        conn.handle("files/delete", {"path": "data/big", "recursive": True})
        assert on_disk(tmp_path / ".trash") == [("data/small.txt", 600), ("data/big", 1200)]
        assert [e.path for e in broker.trash.list()] == ["data/big", "data/small.txt"]


def test_a_tenth_of_a_small_disk(tmp_path: Path) -> None:
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        assert default_trash_max_bytes(str(mount / "not" / "made" / "yet")) == 64 * MiB // 10
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


# -- the age ------------------------------------------------------------------------------------------


def test_a_broker_that_starts_removes_what_is_too_old(tmp_path: Path) -> None:
    """Before the fix, an entry deleted 40 days ago was still in the trash after a broker started."""
    trash = tmp_path / ".trash"
    old_entry(trash, "20200101T000000Z-0000aaaa", age=40 * DAY)
    old_entry(trash, "20200101T000000Z-0000bbbb", age=29 * DAY, path="data/recent.txt")
    assert DEFAULT_TRASH_MAX_AGE == 30 * DAY
    broker = make_broker(tmp_path)
    broker.close()  # joins the thread that applies the retention first thing
    assert on_disk(trash) == [("data/recent.txt", 3)]
    [record] = [r for r in broker.audit.records() if r.method == "trash/expire"]
    assert (record.path, record.reason) == ("data/old.txt", "max_age")


def test_a_broker_with_no_trash_yet_creates_none(tmp_path: Path) -> None:
    make_broker(tmp_path).close()
    assert not (tmp_path / ".trash").exists()


def test_what_is_too_old_goes_when_something_is_trashed(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a delete the retention may use a listing of the trash up to _FRESH seconds old (plus this
    # process's own changes): another process's entries count from the next listing on. The broker
    # lists the trash as it starts, on a thread of its own, before or after this test writes the
    # other process's entries; with the window closed every delete lists it, which is tested here.
    monkeypatch.setattr(trashcan, "_FRESH", 0.0)
    with make_broker(tmp_path, trash_max_age=3600) as broker:
        conn = deleter(broker, data)
        # Entries another process left while this broker ran: two hours old, and ten minutes old.
        old_entry(tmp_path / ".trash", "20200101T000000Z-0000cccc", age=7200)
        old_entry(tmp_path / ".trash", "20200101T000000Z-0000dddd", age=600, path="data/young.txt")
        (data / "new.txt").write_text("new")
        conn.handle("files/delete", {"path": "data/new.txt"})
        assert [path for path, _ in on_disk(tmp_path / ".trash")] == ["data/young.txt", "data/new.txt"]
        assert [e.path for e in broker.trash.list()] == ["data/new.txt", "data/young.txt"]


def test_the_retention_decides_oldest_first(tmp_path: Path) -> None:
    def entry(n: int, age: float, size: int) -> TrashEntry:
        return TrashEntry(
            id=f"20260101T00000{n}Z-0000000{n}",
            root="data",
            path=f"data/{n}",
            origin=f"/x/data/{n}",
            size=size,
            deleted_at=1000.0 - age,
            server="s",
            connection_id="c1",
            is_dir=False,
        )

    entries = [entry(3, 10, 40), entry(1, 500, 10), entry(2, 50, 40), entry(4, 1, 40)]
    chosen = Retention(max_age=100, max_bytes=90).select(entries, now=1000.0)
    assert [(e.path, why) for e, why in chosen] == [("data/1", "max_age"), ("data/2", "max_bytes")]
    assert Retention(max_age=100, max_bytes=10**6).select(entries[2:], now=1000.0) == []


# -- two processes ------------------------------------------------------------------------------------

#: A process that applies the retention to the trash in argv[1] once told to go (a line on stdin).
PRUNER = textwrap.dedent(
    """
    import json, sys
    from jupyter_fsbroker.core.audit import AuditLog
    from jupyter_fsbroker.core.config import BrokerConfig
    from jupyter_fsbroker.core.trashcan import TrashCan

    config = BrokerConfig(trash_max_bytes=int(sys.argv[2]), trash_max_age=float(sys.argv[3]))
    can = TrashCan(sys.argv[1], audit=AuditLog(), config=lambda: config)
    can.storage()
    print("ready", flush=True)
    sys.stdin.readline()
    print(json.dumps([entry.id for entry in can.enforce()]), flush=True)
    """
)


def test_two_processes_pruning_at_once_remove_each_entry_once(tmp_path: Path) -> None:
    trash_dir = tmp_path / ".trash"
    root = tmp_path / "data"
    root.mkdir()
    trash = Trash(trash_dir)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    made = []
    try:
        for i in range(300):
            (root / f"f{i}").write_bytes(b"x" * 100)
            made.append(
                trash.move_in(
                    fd, f"f{i}", origin=str(root / f"f{i}"), root="data", path=f"data/f{i}", server="s"
                )
            )
    finally:
        os.close(fd)
    # Old ones the age removes, and a size that keeps the newest 100 of the rest.
    for number in range(20):
        old_entry(trash_dir, f"20200101T000000Z-{number:08x}", age=100 * DAY, size=100)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    env = {**os.environ, **server_env()}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", PRUNER, str(trash_dir), str(100 * 100), str(30 * DAY)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    for child in children:  # go, both at once
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = [child.communicate(timeout=120) for child in children]
    for child, (_, stderr) in zip(children, results, strict=True):
        assert child.returncode == 0, stderr
        assert stderr == ""  # no entry was found half removed, no removal failed
    removed = [set(json.loads(out)) for out, _ in results]
    assert not removed[0] & removed[1]  # no entry was removed twice
    expected = {f"20200101T000000Z-{n:08x}" for n in range(20)} | {e.id for e in made[:200]}
    assert removed[0] | removed[1] == expected
    assert {e.id for e in trash.entries()} == {e.id for e in made[200:]}
    assert sorted(os.listdir(trash_dir)) == sorted([".lock", *(e.id for e in made[200:])])
    assert outside.read_text() == "keep"
