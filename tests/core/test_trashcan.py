"""The user's side of the trash: list, restore (with and without overwrite, where the root is gone,
elsewhere), empty; every entry that leaves is audited; links planted in the trash lead nowhere."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.connection import Connection
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.core.trashentry import TrashEntry

DAY = 86400.0


def delete(conn: Connection, path: str, **params: object) -> TrashEntry:
    """Delete *path* through the connection and return its new trash entry."""
    assert conn.handle("files/delete", {"path": path, **params})["trashed"] is True
    entry = conn.broker.trash.list()[0]
    assert entry.path == path
    return entry


def user_records(broker: Broker) -> list[tuple[str, str | None, str | None]]:
    return [(r.method, r.path, r.error) for r in broker.audit.records() if r.actor == "user"]


def test_list_is_newest_first_with_what_the_user_needs(broker: Broker, conn: Connection, data: Path) -> None:
    assert broker.trash.list() == ()
    for name in ("a.csv", "b.csv"):
        (data / name).write_text(name)
    first = delete(conn, "data/a.csv")
    second = delete(conn, "data/b.csv")
    assert broker.trash.list() == (second, first)
    assert (first.root, first.path, first.origin, first.size) == (
        "data",
        "data/a.csv",
        str(data / "a.csv"),
        5,
    )
    assert (first.server, first.connection_id) == ("test-server", conn.id)
    assert first.deleted_at <= second.deleted_at <= time.time()
    assert broker.trash.find(first.id[-8:]) == first == broker.trash.find(first)
    with pytest.raises(ConfigError, match="no trash entry"):
        broker.trash.find("nope")


def test_restore_puts_it_back_whole_with_its_mode(broker: Broker, conn: Connection, data: Path) -> None:
    (data / "sub").mkdir()
    (data / "sub" / "x.csv").write_text("a,b\n1,2\n")
    (data / "sub" / "x.csv").chmod(0o640)
    entry = delete(conn, "data/sub/x.csv")
    assert broker.trash.restore(entry.id) == str(data / "sub" / "x.csv")
    assert (data / "sub" / "x.csv").read_text() == "a,b\n1,2\n"
    assert stat.S_IMODE((data / "sub" / "x.csv").stat().st_mode) == 0o640
    assert broker.trash.list() == ()
    [record] = [r for r in broker.audit.records() if r.method == "trash/restore"]
    assert (record.actor, record.server, record.connection_id) == ("user", "(you)", "")
    assert (record.path, record.root, record.decision, record.error, record.bytes) == (
        "data/sub/x.csv",
        "data",
        "allow",
        None,
        8,
    )
    assert broker.audit.totals() == {"test-server": broker.audit.totals()["test-server"]}


def test_restore_refuses_to_replace_unless_asked(broker: Broker, conn: Connection, data: Path) -> None:
    (data / "x.txt").write_text("old")
    entry = delete(conn, "data/x.txt")
    (data / "x.txt").write_text("new")
    with pytest.raises(ConfigError, match=r"something is at .* already"):
        broker.trash.restore(entry)
    assert (data / "x.txt").read_text() == "new"
    assert broker.trash.list() == (entry,)
    # A directory made meanwhile is not replaced either (a plain rename would replace an empty one).
    (data / "x.txt").unlink()
    (data / "x.txt").mkdir()
    with pytest.raises(ConfigError, match="already"):
        broker.trash.restore(entry)
    assert (data / "x.txt").is_dir() and broker.trash.list() == (entry,)
    broker.trash.restore(entry, overwrite=True)
    assert (data / "x.txt").read_text() == "old"
    assert broker.trash.list() == ()
    assert user_records(broker) == [
        ("trash/restore", "data/x.txt", "ALREADY_EXISTS"),
        ("trash/restore", "data/x.txt", "ALREADY_EXISTS"),
        ("trash/restore", "data/x.txt", None),
    ]


def test_restore_a_folder_over_a_folder(broker: Broker, conn: Connection, data: Path) -> None:
    (data / "t" / "deep").mkdir(parents=True)
    (data / "t" / "deep" / "f").write_text("f")
    entry = delete(conn, "data/t", recursive=True)
    (data / "t").mkdir()
    (data / "t" / "other").write_text("other")
    broker.trash.restore(entry.id, overwrite=True)
    assert (data / "t" / "deep" / "f").read_text() == "f"
    assert not (data / "t" / "other").exists()


def test_restore_when_the_root_is_gone(broker: Broker, conn: Connection, data: Path) -> None:
    (data / "reports" / "2026").mkdir(parents=True)
    (data / "reports" / "2026" / "q1.md").write_text("# Q1")
    entry = delete(conn, "data/reports/2026/q1.md")
    broker.remove_root("data")
    shutil.rmtree(data)
    assert broker.trash.restore(entry.id[-8:]) == str(data / "reports" / "2026" / "q1.md")
    assert (data / "reports" / "2026" / "q1.md").read_text() == "# Q1"


def test_restore_elsewhere(broker: Broker, conn: Connection, data: Path, tmp_path: Path) -> None:
    (data / "a.txt").write_text("a")
    (data / "b.txt").write_text("b")
    a, b = delete(conn, "data/a.txt"), delete(conn, "data/b.txt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert broker.trash.restore(a, to=elsewhere) == str(elsewhere / "a.txt")  # into a folder
    assert broker.trash.restore(b, to=elsewhere / "new" / "name.txt") == str(elsewhere / "new" / "name.txt")
    assert (elsewhere / "a.txt").read_text() == "a"
    assert (elsewhere / "new" / "name.txt").read_text() == "b"
    assert not (data / "a.txt").exists()


def test_an_entry_restored_by_another_process_is_gone(broker: Broker, conn: Connection, data: Path) -> None:
    (data / "x").write_text("x")
    entry = delete(conn, "data/x")
    broker.trash.storage().restore(entry.id)  # as another process would
    with pytest.raises(ConfigError, match="no trash entry"):
        broker.trash.restore(entry)


def test_empty_all_or_the_older_ones(
    broker: Broker, conn: Connection, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c"):
        (data / name).write_text(name)
    with monkeypatch.context() as m:  # "a" was deleted two days ago
        two_days_ago = time.time() - 2 * DAY
        m.setattr("jupyter_fsbroker.core.trash.time.time", lambda: two_days_ago)
        delete(conn, "data/a")
    delete(conn, "data/b")
    delete(conn, "data/c")
    trash = Path(broker.trash.directory)
    assert [e.path for e in broker.trash.empty(older_than=DAY)] == ["data/a"]
    assert [e.path for e in broker.trash.list()] == ["data/c", "data/b"]
    with pytest.raises(ConfigError):
        broker.trash.empty(older_than=-1)
    assert [e.path for e in broker.trash.empty()] == ["data/b", "data/c"]
    assert broker.trash.list() == ()
    assert [(m, p) for m, p, _ in user_records(broker)] == [
        ("trash/empty", "data/a"),
        ("trash/empty", "data/b"),
        ("trash/empty", "data/c"),
    ]
    assert sorted(os.listdir(trash)) == [".lock"]


# -- links planted in the trash -----------------------------------------------------------------------


def test_links_planted_in_the_trash_lead_nowhere(
    broker: Broker, conn: Connection, data: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "folder" / "payload").write_text("not yours")
    (outside / "secret.txt").write_text("keep me")
    fake = {
        "version": 2,
        "id": "20200101T000000Z-0000feed",
        "root": "data",
        "path": "data/fake",
        "origin": str(outside / "restored"),
        "size": 9,
        "deleted_at": time.time() - 100 * DAY,
        "server": "s",
        "connection_id": "c1",
        "is_dir": False,
    }
    (outside / "folder" / "item.json").write_text(json.dumps(fake))
    (data / "real").mkdir()
    (data / "real" / "f").write_text("f")
    real = delete(conn, "data/real", recursive=True)
    trash = Path(broker.trash.directory)
    # An entry directory that is a link to a folder outside, dressed up as a complete old entry.
    os.symlink(outside / "folder", trash / "20200101T000000Z-0000feed")
    # A link inside a real entry's payload, to a folder outside.
    os.symlink(outside, trash / real.id / "payload" / "escape")
    # An entry whose metadata is a link to metadata outside (old, so it would be expired).
    odd = trash / "20200101T000000Z-0000beef"
    odd.mkdir()
    (odd / "payload").write_text("p")
    (outside / "meta.json").write_text(json.dumps({**fake, "id": odd.name}))
    os.symlink(outside / "meta.json", odd / "item.json")
    os.utime(odd, (0, 0))
    # The lock file replaced by a link to a file outside.
    (trash / ".lock").unlink(missing_ok=True)
    os.symlink(outside / "secret.txt", trash / ".lock")

    assert [e.id for e in broker.trash.list()] == [real.id]  # neither link makes an entry
    broker.trash.enforce()
    assert [e.path for e in broker.trash.empty()] == ["data/real"]
    assert sorted(os.listdir(trash)) == [".lock", "20200101T000000Z-0000feed"]  # the link is left as it is
    assert (trash / ".lock").is_file() and not (trash / ".lock").is_symlink()
    assert (outside / "folder" / "payload").read_text() == "not yours"
    assert json.loads((outside / "folder" / "item.json").read_text()) == fake
    assert json.loads((outside / "meta.json").read_text())["id"] == odd.name
    assert (outside / "secret.txt").read_text() == "keep me"
    assert not (outside / "restored").exists()
    with pytest.raises(ConfigError):
        broker.trash.restore("20200101T000000Z-0000feed")
