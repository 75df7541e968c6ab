from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core import trash as trash_mod
from jupyter_fsbroker.core import trees as trees_mod
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.core.trash import Trash
from jupyter_fsbroker.core.trashentry import TrashEntry
from jupyter_fsbroker.core.trees import remove_tree


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("keep me")
    return path


@pytest.fixture
def trash(tmp_path: Path) -> Trash:
    return Trash(tmp_path / "data" / "trash")


@pytest.fixture
def dir_fd(root: Path) -> Iterator[int]:
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def make_tree(base: Path) -> None:
    (base / "sub" / "deeper").mkdir(parents=True)
    (base / "a.txt").write_text("alpha")
    (base / "sub" / "b.bin").write_bytes(b"\x00\x01\x02" * 100)
    (base / "sub" / "deeper" / "c.txt").write_text("gamma")
    (base / "sub" / "deeper" / "c.txt").chmod(0o640)
    os.symlink("../a.txt", base / "sub" / "link")


def snapshot(base: Path) -> dict[str, Any]:
    """Content, mode and link targets of everything below *base*."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(base))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif not stat.S_ISREG(st.st_mode):
                out[rel] = ("special", stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", p.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def move(trash: Trash, dir_fd: int, root: Path, name: str, server: str = "srv") -> TrashEntry:
    return trash.move_in(
        dir_fd,
        name,
        origin=str(root / name),
        root="root",
        path=f"root/{name}",
        server=server,
        connection_id="c1",
    )


def listing(trash: Trash) -> list[str]:
    """The trash directory's names, but its lock file."""
    return sorted(name for name in os.listdir(trash.directory) if name != ".lock")


def test_trash_directory_is_private(tmp_path: Path, trash: Trash) -> None:
    assert trash.directory == str(tmp_path / "data" / "trash")
    assert stat.S_IMODE(os.stat(trash.directory).st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    Trash(loose)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700


def test_trash_directory_symlink_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(ConfigError):
        Trash(tmp_path / "link")


def test_move_file(trash: Trash, root: Path, dir_fd: int) -> None:
    (root / "x.csv").write_text("a,b\n1,2\n")
    (root / "x.csv").chmod(0o640)
    item = move(trash, dir_fd, root, "x.csv")
    assert not (root / "x.csv").exists()
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", item.id)
    assert item.name == "x.csv"
    assert item.origin == str(root / "x.csv")
    assert (item.root, item.path) == ("root", "root/x.csv")
    assert (item.server, item.connection_id) == ("srv", "c1")
    assert not item.is_dir
    assert item.size == 8
    assert abs(item.deleted_at - time.time()) < 60
    assert trash.entries() == (item,)
    payload = Path(trash.directory) / item.id / "payload"
    assert payload.read_text() == "a,b\n1,2\n"
    assert stat.S_IMODE(os.stat(Path(trash.directory) / item.id).st_mode) == 0o700


def test_move_directory_tree(trash: Trash, root: Path, dir_fd: int) -> None:
    make_tree(root / "tree")
    before = snapshot(root / "tree")
    item = move(trash, dir_fd, root, "tree")
    assert not (root / "tree").exists()
    assert item.is_dir
    assert item.size == 5 + 300 + 5
    assert snapshot(Path(trash.directory) / item.id / "payload") == before
    assert trash.restore(item.id) == str(root / "tree")
    assert snapshot(root / "tree") == before
    assert trash.entries() == ()
    assert listing(trash) == []


def test_move_symlink_to_outside(trash: Trash, root: Path, dir_fd: int, outside: Path) -> None:
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "escape-file")
    for name in ("escape", "escape-file"):
        item = move(trash, dir_fd, root, name)
        assert not item.is_dir
        assert item.size == 0
        payload = Path(trash.directory) / item.id / "payload"
        assert payload.is_symlink()
        assert not os.path.lexists(root / name)
    assert (outside / "secret.txt").read_text() == "keep me"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    # Purging the trashed links leaves their targets alone too.
    assert len(trash.empty()) == 2
    assert (outside / "secret.txt").read_text() == "keep me"


def test_move_missing_leaves_nothing(trash: Trash, dir_fd: int, root: Path) -> None:
    with pytest.raises(FileNotFoundError):
        move(trash, dir_fd, root, "nope")
    assert listing(trash) == []
    with pytest.raises(ValueError):
        trash.move_in(dir_fd, "a/b", origin=str(root / "a/b"), root="root", path="root/a/b", server="s")
    with pytest.raises(ValueError):
        trash.move_in(dir_fd, "..", origin=str(root), root="root", path="root", server="s")
    (root / "f").write_text("x")
    with pytest.raises(ValueError):
        trash.move_in(dir_fd, "f", origin="relative/f", root="root", path="root/f", server="s")


def test_items_oldest_first_and_ignores_junk(trash: Trash, root: Path, dir_fd: int) -> None:
    created = []
    for i in range(3):
        (root / f"f{i}").write_text(str(i))
        created.append(move(trash, dir_fd, root, f"f{i}", server=f"s{i}"))
    # An incomplete item (no metadata) and foreign files are not items.
    os.mkdir(Path(trash.directory) / "20260101T000000Z-00000000")
    (Path(trash.directory) / "README").write_text("hi")
    bad = Path(trash.directory) / "20260101T000000Z-11111111"
    bad.mkdir()
    (bad / "payload").write_text("x")
    (bad / "item.json").write_text("{not json")
    items = trash.entries()
    assert [i.name for i in items] == ["f0", "f1", "f2"]
    assert items == tuple(sorted(created, key=lambda i: (i.deleted_at, i.id)))


def test_restore_refuses_existing(trash: Trash, root: Path, dir_fd: int) -> None:
    (root / "x").write_text("old")
    item = move(trash, dir_fd, root, "x")
    (root / "x").write_text("new")
    with pytest.raises(FileExistsError):
        trash.restore(item.id)
    assert (root / "x").read_text() == "new"
    assert trash.entries() == (item,)
    assert trash.restore(item.id, overwrite=True) == str(root / "x")
    assert (root / "x").read_text() == "old"
    assert trash.entries() == ()


def test_restore_overwrite_directory(trash: Trash, root: Path, dir_fd: int) -> None:
    make_tree(root / "t")
    item = move(trash, dir_fd, root, "t")
    (root / "t").mkdir()
    (root / "t" / "other").write_text("other")
    trash.restore(item.id, overwrite=True)
    assert (root / "t" / "a.txt").read_text() == "alpha"
    assert not (root / "t" / "other").exists()


def test_restore_and_purge_unknown(trash: Trash) -> None:
    for bad in ("20260101T000000Z-deadbeef", "../x", "", "nope"):
        with pytest.raises(KeyError):
            trash.restore(bad)
        with pytest.raises(KeyError):
            trash.purge(bad)


def test_purge(trash: Trash, root: Path, dir_fd: int) -> None:
    make_tree(root / "t")
    (root / "t" / "sub").chmod(0o500)  # a read-only directory inside is still purged
    (root / "f").write_text("x")
    a = move(trash, dir_fd, root, "t")
    b = move(trash, dir_fd, root, "f")
    trash.purge(a.id)
    assert trash.entries() == (b,)
    assert listing(trash) == [b.id]
    with pytest.raises(KeyError):
        trash.purge(a.id)


def test_empty(trash: Trash, root: Path, dir_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_800_000_000.0]
    monkeypatch.setattr("jupyter_fsbroker.core.trash.time.time", lambda: clock[0])
    for i in range(3):
        (root / f"f{i}").write_text("x")
        move(trash, dir_fd, root, f"f{i}")
        clock[0] += 100
    # Ages now: 300, 200, 100 seconds.
    assert [e.name for e in trash.empty(older_than=150)] == ["f0", "f1"]
    assert [i.name for i in trash.entries()] == ["f2"]
    with pytest.raises(ValueError):
        trash.empty(older_than=-1)
    assert len(trash.empty()) == 1
    assert trash.entries() == ()
    assert trash.empty() == ()


def test_empty_removes_old_orphans_only(trash: Trash) -> None:
    young = Path(trash.directory) / "20260101T000000Z-00000001"
    old = Path(trash.directory) / "20260101T000000Z-00000002"
    for d in (young, old):
        d.mkdir()
        (d / "payload").write_text("x")
    os.utime(old, (0, 0))
    assert trash.empty() == ()
    assert listing(trash) == [young.name]


class FirstRenameCrossDevice:
    """Make the first os.rename fail with EXDEV, as across filesystems."""

    def __init__(self, real: Callable[..., None]) -> None:
        self.real = real
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        self.real(*args, **kwargs)


def test_exdev_copy_file(trash: Trash, root: Path, dir_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "x.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    (root / "x.bin").chmod(0o604)
    before = snapshot(root)
    fake = FirstRenameCrossDevice(os.rename)
    monkeypatch.setattr("jupyter_fsbroker.core.trash.os.rename", fake)
    item = move(trash, dir_fd, root, "x.bin")
    assert fake.calls >= 2
    assert not (root / "x.bin").exists()
    payload = Path(trash.directory) / item.id / "payload"
    assert snapshot(Path(trash.directory) / item.id)["payload"] == before["x.bin"]
    assert item.size == payload.stat().st_size == 3 * 1024 * 1024 + 7
    assert trash.entries() == (item,)


def test_exdev_copy_tree(
    trash: Trash, root: Path, dir_fd: int, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(root / "tree")
    os.symlink(outside, root / "tree" / "escape")
    (root / "tree" / "ro").mkdir()
    (root / "tree" / "ro" / "f").write_text("f")
    (root / "tree" / "ro").chmod(0o555)
    os.mkfifo(root / "tree" / "fifo")
    before = snapshot(root / "tree")
    monkeypatch.setattr("jupyter_fsbroker.core.trash.os.rename", FirstRenameCrossDevice(os.rename))
    item = move(trash, dir_fd, root, "tree")
    assert not os.path.lexists(root / "tree")
    payload = Path(trash.directory) / item.id / "payload"
    assert snapshot(payload) == before
    assert stat.S_ISFIFO((payload / "fifo").lstat().st_mode)
    assert item.is_dir
    assert item.size == 5 + 300 + 5 + 1
    # The link was copied as a link; the outside is untouched.
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "keep me"
    # Restoring across filesystems copies back.
    monkeypatch.setattr("jupyter_fsbroker.core.trash.os.rename", FirstRenameCrossDevice(os.rename))
    trash.restore(item.id)
    assert snapshot(root / "tree") == before
    assert listing(trash) == []
    (root / "tree" / "ro").chmod(0o755)


def test_exdev_copy_failure_keeps_original(
    trash: Trash, root: Path, dir_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(root / "tree")
    before = snapshot(root / "tree")
    monkeypatch.setattr("jupyter_fsbroker.core.trash.os.rename", FirstRenameCrossDevice(os.rename))
    real_copy = trees_mod._copy_file
    calls = [0]

    def failing_copy(*args: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.ENOSPC, "no space")
        real_copy(*args)

    monkeypatch.setattr(trees_mod, "_copy_file", failing_copy)
    with pytest.raises(OSError, match="no space"):
        move(trash, dir_fd, root, "tree")
    assert snapshot(root / "tree") == before
    assert listing(trash) == []


def test_metadata_failure_moves_back(
    trash: Trash, root: Path, dir_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "x").write_text("x")

    def failing(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "no space")

    monkeypatch.setattr(trash_mod, "write_meta", failing)
    with pytest.raises(OSError, match="no space"):
        move(trash, dir_fd, root, "x")
    assert (root / "x").read_text() == "x"
    assert listing(trash) == []


# -- remove_tree -------------------------------------------------------------------------------------


def test_remove_tree_file_and_link(root: Path, dir_fd: int, outside: Path) -> None:
    (root / "f").write_text("x")
    os.symlink(outside / "secret.txt", root / "l")
    os.symlink(outside, root / "d")
    for name in ("f", "l", "d"):
        remove_tree(dir_fd, name)
        assert not os.path.lexists(root / name)
    assert (outside / "secret.txt").read_text() == "keep me"
    with pytest.raises(FileNotFoundError):
        remove_tree(dir_fd, "f")
    with pytest.raises(ValueError):
        remove_tree(dir_fd, "a/b")


def test_remove_tree_with_link_to_outside(root: Path, dir_fd: int, outside: Path) -> None:
    make_tree(root / "tree")
    os.symlink(outside, root / "tree" / "sub" / "escape")
    os.symlink(outside / "secret.txt", root / "tree" / "escape-file")
    remove_tree(dir_fd, "tree")
    assert not os.path.lexists(root / "tree")
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "keep me"


def test_remove_tree_deep(root: Path, dir_fd: int) -> None:
    # A deep chain, built and removed by descriptor (one held per level).
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    fds = [fd]
    try:
        for _ in range(300):
            os.mkdir("d", dir_fd=fds[-1])
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fds[-1]))
    finally:
        for f in fds:
            os.close(f)
    remove_tree(dir_fd, "d")
    assert os.listdir(root) == []


def test_remove_tree_directory_swapped_for_symlink(
    root: Path, dir_fd: int, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory replaced by a link to the outside after it was listed is never entered."""
    make_tree(root / "tree")
    real_list = trees_mod._list
    swapped = [False]

    def list_then_swap(fd: int) -> list[tuple[str, bool]]:
        entries = real_list(fd)
        if not swapped[0] and ("sub", True) in entries:
            swapped[0] = True
            os.rename(root / "tree" / "sub", root / "moved-away")
            os.symlink(outside, root / "tree" / "sub")
        return entries

    monkeypatch.setattr(trees_mod, "_list", list_then_swap)
    remove_tree(dir_fd, "tree")
    assert swapped[0]
    assert not os.path.lexists(root / "tree")
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "keep me"
    assert (root / "moved-away" / "b.bin").exists()


def test_usage_counts_own_changes_at_once_and_others_when_listed(
    tmp_path: Path, trash: Trash, root: Path, dir_fd: int
) -> None:
    other = Trash(trash.directory)  # what another process sees
    assert trash.usage() == (0, None)
    (root / "a").write_text("aaa")
    a = move(trash, dir_fd, root, "a")
    assert trash.usage(fresh=3600) == (3, a.deleted_at)  # its own addition, without listing
    (root / "b").write_text("bbbbb")
    move(other, dir_fd, root, "b")
    assert trash.usage(fresh=3600) == (3, a.deleted_at)  # not listed since
    assert trash.usage() == (8, a.deleted_at)  # listed now
    trash.purge(a.id)
    assert trash.usage(fresh=3600)[0] == 5
