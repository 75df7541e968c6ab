"""The boundary matrix: what is inside a root is served, nothing else ever is.

Each case names a path as a server could write it and what the broker must
answer. The world: root ``data`` (read-write) and root ``ro`` (read-only) in a
temporary folder, with siblings of similar names and an ``outside`` folder
holding secrets beside them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.paths import parse

from .conftest import ALL_OPS, error_of, make_broker, tree_snapshot

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def world(tmp_path: Path) -> Path:
    base = tmp_path / "w"
    data = base / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("A")
    (data / "sub" / "b.txt").write_text("B")
    (data / "with space ü.txt").write_text("unicode")
    (data / "..test").write_text("dotdot-prefix")
    (data / "a..b").write_text("dotdot-middle")
    (data / "%2e%2e").write_text("literal-percent")
    (data / ".hidden").write_text("hidden")
    (data / ".env").write_text("KEY=1")
    (data / ".env.local").write_text("KEY=2")
    (data / ".git").mkdir()
    (data / ".git" / "config").write_text("[core]")
    (data / "server.pem").write_text("pem")
    (data / "id_ed25519.pub").write_text("pub")
    (data / "vault.kdbx").write_text("kdbx")
    (data / "in_link").symlink_to("sub/b.txt")
    (data / "in_abs_link").symlink_to(data / "sub" / "b.txt")
    (data / "in_dir_link").symlink_to("sub")
    (data / "sub" / "up_link").symlink_to("../a.txt")
    (data / "to_env").symlink_to(".env")
    (base / "secret.txt").write_text(SECRET)
    (base / "outside").mkdir()
    (base / "outside" / "x.txt").write_text(SECRET)
    (data / "esc_file").symlink_to("../secret.txt")
    (data / "esc_abs").symlink_to(base / "secret.txt")
    (data / "esc_dir").symlink_to("../outside")
    (data / "sub" / "esc_deep").symlink_to("../../outside/x.txt")
    (data / "chain1").symlink_to("chain2")
    (data / "chain2").symlink_to("sub/chain3")
    (data / "sub" / "chain3").symlink_to("../../secret.txt")
    (data / "loop1").symlink_to("loop2")
    (data / "loop2").symlink_to("loop1")
    os.mkfifo(data / "fifo")
    for sibling in ("data-old", "data_backup", "database"):
        (base / sibling).mkdir()
        (base / sibling / "x.txt").write_text(SECRET)
    (base / "ro").mkdir()
    (base / "ro" / "r.txt").write_text("R")
    return base


@pytest.fixture
def broker(tmp_path: Path, world: Path) -> Broker:
    b = make_broker(tmp_path)
    b.add_root(world / "data", name="data")
    b.add_root(world / "ro", name="ro", read_only=True)
    b.allow("data", ops=ALL_OPS)
    # Granted behind allow()'s back (which refuses changes in a read-only root): the root's own
    # check must refuse them even so.
    b.grants.add(None, parse("ro", b.roots), ALL_OPS, source="preapproval")
    yield b  # type: ignore[misc]
    b.close()


@pytest.fixture
def conn(broker: Broker) -> Connection:
    return broker.connect("matrix")


def _w(world: Path, rest: str) -> str:
    return f"{world}/{rest}"


# (path template, expected content or (error name, reason or None)); {w} is the world folder.
READ_CASES: list[tuple[str, object]] = [
    # Inside, in all three forms.
    ("data/a.txt", "A"),
    ("{w}/data/a.txt", "A"),
    ("file://{w}/data/a.txt", "A"),
    ("file://localhost{w}/data/a.txt", "A"),
    ("file:{w}/data/a.txt", "A"),
    ("data/./sub//b.txt", "B"),
    ("data/sub/../a.txt", "A"),
    ("data/with space ü.txt", "unicode"),
    ("file://{w}/data/with%20space%20%C3%BC.txt", "unicode"),
    ("data/..test", "dotdot-prefix"),
    ("data/a..b", "dotdot-middle"),
    ("data/%2e%2e", "literal-percent"),
    ("data/.hidden", "hidden"),
    # In-root symlinks are followed.
    ("data/in_link", "B"),
    ("data/in_abs_link", "B"),
    ("data/in_dir_link/b.txt", "B"),
    ("data/sub/up_link", "A"),
    # Siblings with a similar name.
    ("{w}/data-old/x.txt", ("PERMISSION_DENIED", "outside_roots")),
    ("{w}/data_backup/x.txt", ("PERMISSION_DENIED", "outside_roots")),
    ("{w}/database/x.txt", ("PERMISSION_DENIED", "outside_roots")),
    ("file://{w}/data-old/x.txt", ("PERMISSION_DENIED", "outside_roots")),
    ("data-old/x.txt", ("PERMISSION_DENIED", "outside_roots")),
    # Traversal.
    ("data/../secret.txt", ("PERMISSION_DENIED", "traversal")),
    ("data/sub/../../secret.txt", ("PERMISSION_DENIED", "traversal")),
    ("data/sub/../../../../../../etc/passwd", ("PERMISSION_DENIED", "traversal")),
    ("{w}/data/../secret.txt", ("PERMISSION_DENIED", "traversal")),
    ("data/in_dir_link/../../secret.txt", ("PERMISSION_DENIED", "traversal")),
    # ".." is collapsed before any link is looked at: this names data/secret.txt.
    ("data/esc_dir/../secret.txt", ("NOT_FOUND", None)),
    # Absolute paths outside.
    ("{w}/secret.txt", ("PERMISSION_DENIED", "outside_roots")),
    ("/etc/passwd", ("PERMISSION_DENIED", "outside_roots")),
    ("/", ("PERMISSION_DENIED", "outside_roots")),
    # URIs: foreign hosts, other schemes, encoded traversal.
    ("file://evil.example.com{w}/data/a.txt", ("PERMISSION_DENIED", "foreign_host")),
    ("file://127.0.0.1{w}/data/a.txt", ("PERMISSION_DENIED", "foreign_host")),
    ("http://localhost{w}/data/a.txt", ("PERMISSION_DENIED", "unsupported_scheme")),
    ("smb://server/share/a.txt", ("PERMISSION_DENIED", "unsupported_scheme")),
    ("file://{w}/data/%2e%2e/secret.txt", ("PERMISSION_DENIED", "traversal")),
    ("file://{w}/data/%2E%2E/%2e%2e/etc/passwd", ("PERMISSION_DENIED", "traversal")),
    ("file://{w}/data/a.txt%00.png", ("PERMISSION_DENIED", "nul_byte")),
    ("file://{w}/data/%ff%fe", ("PERMISSION_DENIED", "invalid_uri")),
    ("file://{w}/data/a.txt?x=1", ("PERMISSION_DENIED", "invalid_uri")),
    ("file:data/a.txt", ("PERMISSION_DENIED", "invalid_uri")),
    # NUL bytes.
    ("data/a.txt\x00.png", ("PERMISSION_DENIED", "nul_byte")),
    # Escaping symlinks, at the end or in the middle, and a chain of three.
    ("data/esc_file", ("PERMISSION_DENIED", "escaping_symlink")),
    ("data/esc_abs", ("PERMISSION_DENIED", "escaping_symlink")),
    ("data/esc_dir/x.txt", ("PERMISSION_DENIED", "escaping_symlink")),
    ("data/sub/esc_deep", ("PERMISSION_DENIED", "escaping_symlink")),
    ("data/chain1", ("PERMISSION_DENIED", "escaping_symlink")),
    ("data/loop1", ("PERMISSION_DENIED", "symlink_loop")),
    # Special files never hang and are refused.
    ("data/fifo", ("PERMISSION_DENIED", "special_file")),
    # Sensitive names, directly and through an in-root link.
    ("data/.env", ("PERMISSION_DENIED", "sensitive")),
    ("data/.env.local", ("PERMISSION_DENIED", "sensitive")),
    ("data/.git/config", ("PERMISSION_DENIED", "sensitive")),
    ("data/server.pem", ("PERMISSION_DENIED", "sensitive")),
    ("data/id_ed25519.pub", ("PERMISSION_DENIED", "sensitive")),
    ("data/vault.kdbx", ("PERMISSION_DENIED", "sensitive")),
    ("data/.ENV", ("PERMISSION_DENIED", "sensitive")),
    ("data/to_env", ("PERMISSION_DENIED", "sensitive")),
    # Missing things inside a granted root.
    ("data/missing.txt", ("NOT_FOUND", None)),
    ("data/nodir/missing.txt", ("NOT_FOUND", None)),
    ("data/sub", ("WRONG_TYPE", "is_directory")),
]


@pytest.mark.parametrize(("template", "expected"), READ_CASES, ids=[c[0] for c in READ_CASES])
def test_read_boundary(world: Path, conn: Connection, template: str, expected: object) -> None:
    path = template.replace("{w}", quote(str(world)) if template.startswith("file:") else str(world))
    before = tree_snapshot(world)
    if isinstance(expected, str):
        assert conn.handle("files/read", {"path": path})["content"] == expected
    else:
        name, reason = expected  # type: ignore[misc]
        err = error_of(conn, "files/read", {"path": path})
        assert (err.name, err.reason if reason else None) == (name, reason)
        assert err.data.get("lockId") is None
        assert SECRET not in err.message
        assert str(world) not in err.message
    assert tree_snapshot(world) == before


def test_paths_in_results_are_root_relative(world: Path, conn: Connection) -> None:
    assert conn.handle("files/stat", {"path": f"{world}/data/in_link"})["path"] == "data/sub/b.txt"
    assert (
        conn.handle("files/stat", {"path": f"file://{quote(str(world))}/data/a.txt"})["path"] == "data/a.txt"
    )


def test_listing_leaves_out_sensitive_and_never_descends_links(conn: Connection) -> None:
    names = {
        e["path"]
        for e in conn.handle("files/list", {"path": "data", "recursive": True, "includeHidden": True})[
            "entries"
        ]
    }
    assert "data/.hidden" in names and "data/sub/b.txt" in names
    assert not names & {
        "data/.env",
        "data/.env.local",
        "data/.git",
        "data/.git/config",
        "data/server.pem",
        "data/vault.kdbx",
    }
    assert not any(n.startswith(("data/esc_dir/", "data/in_dir_link/")) for n in names)
    types = {e["path"]: e["type"] for e in conn.handle("files/list", {"path": "data"})["entries"]}
    assert (
        types["data/esc_dir"] == "symlink"
        and types["data/fifo"] == "other"
        and types["data/sub"] == "directory"
    )
    assert "data/.hidden" not in types


def test_sensitive_allowed_only_when_the_notebook_says_so(broker: Broker, conn: Connection) -> None:
    assert error_of(conn, "files/read", {"path": "data/.env"}).reason == "sensitive"
    broker.allow("data/.env", ops=("read",), include_sensitive=True)
    assert conn.handle("files/read", {"path": "data/.env"})["content"] == "KEY=1"
    assert error_of(conn, "files/read", {"path": "data/.git/config"}).reason == "sensitive"


def test_no_existence_oracle_outside_grants(tmp_path: Path, world: Path) -> None:
    with make_broker(tmp_path / "b2") as b:
        b.add_root(world / "data", name="data")
        b.allow("data/sub", ops=("read",))
        c = b.connect("s")
        answers = set()
        for path in (
            "data/a.txt",
            "data/missing.txt",
            "data/nodir/x",
            f"{world}/secret.txt",
            f"{world}/nothing",
            "data/esc_dir/x.txt",
            "data/esc_dir/none",
        ):
            err = error_of(c, "files/read", {"path": path})
            answers.add((err.name, err.code))
        assert answers == {("PERMISSION_DENIED", -32101)}
        # Through a granted folder, a link into an ungranted one is refused too, existing or not.
        (world / "data" / "sub" / "peek").symlink_to("../a.txt")
        (world / "data" / "sub" / "peek2").symlink_to("../nothing.txt")
        assert error_of(c, "files/read", {"path": "data/sub/peek"}).reason == "not_granted"
        assert error_of(c, "files/read", {"path": "data/sub/peek2"}).reason == "not_granted"


def test_symlinked_root(tmp_path: Path, world: Path) -> None:
    link = tmp_path / "link-to-data"
    link.symlink_to(world / "data")
    with make_broker(tmp_path / "b2") as b:
        root = b.add_root(link, name="viaLink")
        assert root.path == str(world / "data")
        b.allow("viaLink", ops=("read",))
        c = b.connect("s")
        assert c.handle("files/read", {"path": "viaLink/a.txt"})["content"] == "A"
        assert c.handle("files/read", {"path": f"{link}/a.txt"})["content"] == "A"
        assert c.handle("files/read", {"path": f"{world}/data/a.txt"})["content"] == "A"
        assert error_of(c, "files/read", {"path": f"{link}/../secret.txt"}).reason == "traversal"


def test_single_root_paths_are_relative_to_it(tmp_path: Path, world: Path) -> None:
    with make_broker(tmp_path / "b2") as b:
        b.add_root(world / "data", name="data")
        b.allow("data", ops=("read",))
        c = b.connect("s")
        assert c.handle("files/read", {"path": "sub/b.txt"})["content"] == "B"
        assert c.handle("files/read", {"path": "a.txt"})["content"] == "A"
        assert error_of(c, "files/read", {"path": "../secret.txt"}).reason == "traversal"


def test_empty_roots_set(tmp_path: Path) -> None:
    with make_broker(tmp_path) as b:
        c = b.connect("s")
        for path in ("data/a.txt", "/etc/passwd", "a.txt"):
            assert error_of(c, "files/read", {"path": path}).reason == "no_roots"


def test_create_below_missing_parent_and_through_escaping_link(world: Path, conn: Connection) -> None:
    before = tree_snapshot(world / "outside")
    err = error_of(conn, "files/create", {"path": "data/new/deeper/f.txt", "type": "file"})
    assert err.name == "NOT_FOUND"
    assert not (world / "data" / "new").exists()
    assert conn.handle("files/create", {"path": "data/new/deeper/f.txt", "type": "file", "parents": True})
    assert (world / "data" / "new" / "deeper" / "f.txt").read_bytes() == b""
    for params in (
        {"path": "data/esc_dir/new.txt", "type": "file"},
        {"path": "data/esc_dir/a/b/new.txt", "type": "file", "parents": True},
        {"path": "data/esc_dir/newdir", "type": "directory"},
    ):
        assert error_of(conn, "files/create", params).reason == "escaping_symlink"
    assert (
        error_of(conn, "files/write", {"path": "data/esc_dir/w.txt", "content": "x"}).reason
        == "escaping_symlink"
    )
    assert (
        error_of(conn, "files/write", {"path": "data/esc_file", "content": "x"}).reason == "escaping_symlink"
    )
    assert tree_snapshot(world / "outside") == before
    assert (world / "secret.txt").read_text() == SECRET


def test_rename_checks_both_ends(world: Path, conn: Connection) -> None:
    for new in (
        f"{world}/outside/stolen.txt",
        "data/esc_dir/stolen.txt",
        "data/../stolen.txt",
        "ro/stolen.txt",
    ):
        err = error_of(conn, "files/rename", {"path": "data/a.txt", "newPath": new})
        assert err.name == "PERMISSION_DENIED", new
    assert (world / "data" / "a.txt").read_text() == "A"
    assert not (world / "outside" / "stolen.txt").exists() and not (world / "ro" / "stolen.txt").exists()
    # Renaming an escaping link moves the link itself, inside the root; its target is untouched.
    assert conn.handle("files/rename", {"path": "data/esc_file", "newPath": "data/esc2"}) == {
        "path": "data/esc2"
    }
    assert (world / "data" / "esc2").is_symlink()
    assert error_of(conn, "files/read", {"path": "data/esc2"}).reason == "escaping_symlink"
    assert (world / "secret.txt").read_text() == SECRET


def test_read_only_root_refuses_every_change(world: Path, conn: Connection) -> None:
    assert conn.handle("files/read", {"path": "ro/r.txt"})["content"] == "R"
    before = tree_snapshot(world / "ro")
    for method, params in (
        ("files/write", {"path": "ro/r.txt", "content": "x"}),
        ("files/write", {"path": "ro/new.txt", "content": "x"}),
        ("files/create", {"path": "ro/d", "type": "directory"}),
        ("files/delete", {"path": "ro/r.txt"}),
        ("files/rename", {"path": "ro/r.txt", "newPath": "ro/s.txt"}),
        ("files/rename", {"path": "ro/r.txt", "newPath": "data/r.txt"}),
    ):
        assert error_of(conn, method, params).reason == "read_only", (method, params)
    assert tree_snapshot(world / "ro") == before


def test_root_removed_after_grant(tmp_path: Path, world: Path) -> None:
    with make_broker(tmp_path / "b2") as b:
        b.add_root(world / "data", name="data")
        b.add_root(world / "ro", name="ro", read_only=True)
        b.allow("data", ops=("read",))
        conn = b.connect("s")
        assert conn.handle("files/read", {"path": "data/a.txt"})["content"] == "A"
        b.remove_root("data")
        assert error_of(conn, "files/read", {"path": "data/a.txt"}).reason == "not_granted"
        assert error_of(conn, "files/read", {"path": f"{world}/data/a.txt"}).reason == "outside_roots"
        assert b.grants.grants() == ()
        # A new root of the same name does not bring the old grants back.
        b.add_root(world / "data", name="data")
        assert error_of(conn, "files/read", {"path": "data/a.txt"}).reason == "not_granted"


def test_operation_queued_before_revocation_fails_after_it(tmp_path: Path, world: Path) -> None:
    with make_broker(tmp_path / "b2") as b:
        b.add_root(world / "data", name="data")
        grant = b.allow("data", ops=("read", "write"))
        conn = b.connect("s")
        key = str(world / "data" / "a.txt")
        waiting = threading.Event()
        original = b.locks.hold

        def spying_hold(k: str, mode: str, **kw: object):  # type: ignore[no-untyped-def]
            if kw.get("owner") == conn.id:
                waiting.set()
            return original(k, mode, **kw)  # type: ignore[arg-type]

        b.locks.hold = spying_hold  # type: ignore[method-assign]
        blocker = original(
            key, "exclusive", owner="someone-else", owner_label="other", path="data/a.txt", wait=5
        )
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(conn.handle("files/write", {"path": "data/a.txt", "content": "CHANGED"}))
            except FilesError as exc:
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert waiting.wait(5), "the write never reached its lock"
        b.grants.revoke(grant.id)
        blocker.release()
        worker.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], FilesError)
        assert outcome[0].reason == "not_granted"
        assert (world / "data" / "a.txt").read_text() == "A"


def test_fifo_in_listing_and_stat_does_not_hang(conn: Connection) -> None:
    assert error_of(conn, "files/stat", {"path": "data/fifo"}).reason == "special_file"
    assert error_of(conn, "files/write", {"path": "data/fifo", "content": "x"}).reason == "special_file"
