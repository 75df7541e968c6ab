"""Roots: what can be shared, names, generations, and grants that expire."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.core.roots import RootSet

from .conftest import error_of, make_broker


def test_refuses_what_would_share_too_much_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "file.txt").write_text("x")
    with RootSet() as roots:
        for path, words in (
            ("/", "whole filesystem"),
            (str(home), "home directory"),
            ("~", "home directory"),
            (str(tmp_path / "missing"), "no such directory"),
            (str(tmp_path / "file.txt"), "not a directory"),
        ):
            with pytest.raises(ConfigError, match=words):
                roots.add(path)
        (home / "data").mkdir()
        assert roots.add("~/data").name == "data"


def test_names_are_unique_and_usable(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with RootSet() as roots:
        roots.add(tmp_path / "a", name="proj")
        with pytest.raises(ConfigError, match="exists already"):
            roots.add(tmp_path / "b", name="proj")
        for bad in ("", "x/y", "..", ".", "c:d", "a\\b"):
            with pytest.raises(ConfigError, match="not usable"):
                roots.add(tmp_path / "b", name=bad)
        with pytest.raises(ConfigError, match="no root named"):
            roots.remove("nope")


def test_generation_changes_and_listeners_hear_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    heard: list[int] = []
    with RootSet() as roots:
        roots.subscribe(heard.append)
        start = roots.generation
        root = roots.add(tmp_path / "a", read_only=True)
        assert root.read_only and root.uri == f"file://{tmp_path}/a"
        roots.remove("a")
        assert roots.generation == start + 2
        assert heard == [start + 1, start + 2]


def test_a_broken_listener_does_not_break_the_roots(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()

    def broken(generation: int) -> None:
        raise RuntimeError("view crashed")

    with RootSet() as roots:
        roots.subscribe(broken)
        assert roots.add(tmp_path / "a").name == "a"


def test_removed_root_descriptor_is_closed_and_safe_under_threads(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with RootSet() as roots:
        errors: list[BaseException] = []

        def churn() -> None:
            try:
                for _ in range(200):
                    root = roots.add(tmp_path / "a", name="a")
                    roots.remove("a")
                    assert not roots.is_current(root)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=churn)
        worker.start()
        worker.join(30)
        assert errors == []


def test_grants_expire(tmp_path: Path, data: Path) -> None:
    (data / "f").write_text("x")
    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        grant = b.allow("data", ops=("read",), duration=-1)
        assert grant.expired()
        c = b.connect("s")
        assert error_of(c, "files/read", {"path": "data/f"}).reason == "not_granted"
        b.allow("data", ops=("read",), duration=3600)
        assert c.handle("files/read", {"path": "data/f"})["content"] == "x"
        assert grant not in b.grants.grants()


def test_audit_file_gets_one_json_line_per_request(tmp_path: Path, data: Path) -> None:
    log = tmp_path / "audit.jsonl"
    with make_broker(tmp_path, audit_path=str(log)) as b:
        b.add_root(data, name="data")
        b.allow("data")
        c = b.connect("s")
        (data / "f").write_text("SECRET-CONTENT")
        c.handle("files/read", {"path": "data/f"})
        error_of(c, "files/read", {"path": "/etc/shadow"})
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["method"], r["decision"], r["path"]) for r in lines] == [
        ("files/read", "allow", "data/f"),
        ("files/read", "deny", "/etc/shadow"),
    ]
    assert "SECRET-CONTENT" not in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600


def test_allow_refuses_paths_outside_and_unknown_operations(tmp_path: Path, data: Path) -> None:
    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        with pytest.raises(ConfigError, match="not inside a root"):
            b.allow("/etc", ops=("read",))
        with pytest.raises(ConfigError, match="unknown operation"):
            b.allow("data", ops=("read", "fly"))
        assert b.allow("data/raw", ops="read,watch").operations == ("read", "watch")


def test_the_short_spellings_users_type() -> None:
    from jupyter_fsbroker.core.specs import split_allow, split_header, split_root

    assert split_root("data=~/x") == ("data", "~/x")
    assert split_root("~/x") == (None, "~/x")
    assert split_root("./a=b/c") == (None, "./a=b/c")
    assert split_allow("data/raw") == ("data/raw", ("read",))
    assert split_allow("data/raw:read,watch") == ("data/raw", ("read", "watch"))
    assert split_allow("/abs/a:b/c") == ("/abs/a:b/c", ("read",))
    with pytest.raises(ConfigError, match="unknown operation"):
        split_allow("data:raed")
    assert split_header("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    with pytest.raises(ConfigError, match="NAME: VALUE"):
        split_header("no colon")
