"""A folder holding names that are not valid UTF-8 (files from other systems, old archives).

Before: listing such a folder put a surrogate-escaped ``str`` into the reply, which no JSON
encoder can write, and the connection died. Now (PROTOCOL.md, "Names that are not valid UTF-8
on disk"): listings and watch events carry them readable, each undecodable byte as U+FFFD, with
``undecodableName: true``; a request can only spell such a name lossily, so it names nothing
(NOT_FOUND); and nothing is ever created with a name JSON cannot carry.
"""

from __future__ import annotations

import json
import os
import queue
from pathlib import Path
from typing import Any

import pydantic_core
import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.core.names import find_surrogate, readable
from jupyter_fsbroker.core.roots import RootSet
from jupyter_fsbroker.core.watch import ChangeEvent

from .conftest import error_of, tree_snapshot

# Latin-1 "café" (0xE9 alone is not UTF-8), a stray continuation byte, a truncated sequence.
CAFE = b"caf\xe9"
ODD_FILE = b"r\xe9sum\xe9.txt"
TRUNCATED = b"x\xe2\x82.csv"


def wire(value: Any) -> bytes:
    """*value* as JSON the way a transport writes it (strict UTF-8): fails on a lone surrogate."""
    return pydantic_core.to_json(value)


def disk(folder: Path, *names: bytes) -> bytes:
    return os.path.join(os.fsencode(folder), *names)


@pytest.fixture
def odd(data: Path) -> Path:
    """``data`` holding undecodable names: a folder, files, and a file inside the folder."""
    os.mkdir(disk(data, CAFE))
    for name in (ODD_FILE, TRUNCATED):
        with open(disk(data, name), "wb") as f:
            f.write(b"odd")
    with open(disk(data, CAFE, b"menu.txt"), "wb") as f:
        f.write(b"soup")
    (data / "plain.txt").write_text("plain")
    return data


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in entries}


def test_plain_listing_carries_readable_names_with_a_flag(odd: Path, conn: Connection) -> None:
    result = conn.handle("files/list", {"path": "data"})
    wire(result)  # every reply can be sent
    entries = by_name(result["entries"])
    assert set(entries) == {
        "data/caf\ufffd",
        "data/r\ufffdsum\ufffd.txt",
        "data/x\ufffd\ufffd.csv",
        "data/plain.txt",
    }
    assert entries["data/caf\ufffd"] == {
        "name": "caf\ufffd",
        "path": "data/caf\ufffd",
        "type": "directory",
        "size": 0,
        "mtime": entries["data/caf\ufffd"]["mtime"],
        "undecodableName": True,
    }
    # Each undecodable byte is one U+FFFD: the truncated three-byte sequence shows two.
    assert entries["data/x\ufffd\ufffd.csv"]["undecodableName"] is True
    assert entries["data/r\ufffdsum\ufffd.txt"]["size"] == 3
    assert "undecodableName" not in entries["data/plain.txt"]


def test_recursive_listing_flags_everything_below_an_undecodable_folder(odd: Path, conn: Connection) -> None:
    result = conn.handle("files/list", {"path": "data", "recursive": True})
    wire(result)
    entries = by_name(result["entries"])
    inner = entries["data/caf\ufffd/menu.txt"]
    assert inner["name"] == "menu.txt" and inner["undecodableName"] is True  # its path is lossy
    assert len(entries) == 5


def test_paging_through_undecodable_names_sends_each_once(odd: Path, conn: Connection) -> None:
    whole = [e["path"] for e in conn.handle("files/list", {"path": "data", "recursive": True})["entries"]]
    for page in (1, 2, 3):
        seen: list[str] = []
        params: dict[str, Any] = {"path": "data", "recursive": True, "maxEntries": page}
        while True:
            result = conn.handle("files/list", params)
            wire(result)
            seen += [e["path"] for e in result["entries"]]
            if "nextCursor" not in result:
                break
            params["cursor"] = result["nextCursor"]
        assert seen == whole


def test_the_path_a_listing_gave_names_nothing(odd: Path, conn: Connection) -> None:
    before = tree_snapshot(odd)
    for entry in conn.handle("files/list", {"path": "data", "recursive": True})["entries"]:
        if not entry.get("undecodableName"):
            continue
        path = entry["path"]
        method = "files/list" if entry["type"] == "directory" else "files/read"
        for m, params in (
            ("files/stat", {"path": path}),
            (method, {"path": path}),
            ("files/delete", {"path": path, "recursive": True}),
            ("files/rename", {"path": path, "newPath": "data/renamed"}),
        ):
            err = error_of(conn, m, params)
            assert err.name == "NOT_FOUND", (m, path, err)
            wire({"data": err.data, "message": err.message, "path": err.path})
    assert tree_snapshot(odd) == before


def test_a_link_to_an_undecodable_name_is_not_found(odd: Path, conn: Connection) -> None:
    os.symlink(ODD_FILE, disk(odd, b"link.txt"))
    os.symlink(CAFE, disk(odd, b"dirlink"))
    for method, path in (("files/read", "data/link.txt"), ("files/stat", "data/dirlink/menu.txt")):
        err = error_of(conn, method, {"path": path})
        assert (err.name, err.reason) == ("NOT_FOUND", "undecodable_name")
        assert err.path == path
    # Nothing is created below such a name, not even parents with names of their own.
    before = tree_snapshot(odd)
    for params in (
        {"path": "data/dirlink/new.txt", "type": "file", "content": "x"},
        {"path": "data/dirlink/a/b/c.txt", "type": "file", "parents": True},
        {"path": "data/dirlink/a", "type": "directory", "parents": True},
    ):
        assert error_of(conn, "files/create", params).reason == "undecodable_name"
    assert error_of(conn, "files/write", {"path": "data/dirlink/w.txt", "content": "x"}).name == "NOT_FOUND"
    assert tree_snapshot(odd) == before
    # The link itself (not followed) is an ordinary entry.
    entries = by_name(conn.handle("files/list", {"path": "data"})["entries"])
    assert entries["data/link.txt"]["type"] == "symlink"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("files/create", {"path": "data/caf\udce9", "type": "directory"}),
        ("files/create", {"path": "data/new\udce9.txt", "type": "file", "content": "x"}),
        ("files/write", {"path": "data/new\udce9.txt", "content": "x"}),
        ("files/rename", {"path": "data/plain.txt", "newPath": "data/\udcff"}),
        ("files/read", {"path": "data/r\udce9sum\udce9.txt"}),
        ("files/stat", {"path": "data/\ud800"}),
        ("files/list", {"path": "data", "cursor": "\udc80"}),
        ("files/unlock", {"lockId": "lock_\udc80"}),
        ("files/watch", {"path": "data", "events": ["created\udc80"]}),
        ("files/consent", {"requestedPaths": ["data/\udce9"], "message": "please"}),
        ("files/read", {"path": "data/plain.txt", "encoding": "utf-8\udc80"}),
    ],
)
def test_a_request_holding_a_lone_surrogate_is_refused_and_creates_nothing(
    odd: Path, conn: Connection, method: str, params: dict[str, Any]
) -> None:
    before = tree_snapshot(odd)
    err = error_of(conn, method, params)
    assert (err.code, err.reason) == (-32602, "lone_surrogate"), err
    # The answer itself can be sent: the path is echoed readable.
    wire({"message": err.message, "data": err.data, "path": err.path})
    assert tree_snapshot(odd) == before


def test_a_lone_surrogate_in_content_is_the_codecs_business(odd: Path, conn: Connection) -> None:
    assert error_of(conn, "files/write", {"path": "data/w.txt", "content": "\udc80"}).name == "ENCODING_ERROR"
    # A codec that can carry it writes an escape, never a lone surrogate.
    conn.handle("files/write", {"path": "data/w.txt", "content": "\udc80", "encoding": "unicode_escape"})
    assert (odd / "w.txt").read_bytes() == b"\\udc80"


def test_audit_records_are_readable(odd: Path, broker: Broker, conn: Connection) -> None:
    error_of(conn, "files/stat", {"path": "data/\udce9"})
    record = broker.audit.records()[-1]
    assert record.path == "data/\ufffd"
    json.dumps(record.to_json(), ensure_ascii=False).encode("utf-8")


def test_watch_events_carry_undecodable_names(odd: Path, broker: Broker) -> None:
    broker.allow("data", ops=("read", "watch"))
    events: queue.Queue[ChangeEvent] = queue.Queue()
    conn = broker.connect("watcher", notify=events.put)
    conn.handle("files/watch", {"path": "data", "recursive": True})
    with open(disk(odd, b"new\xff.bin"), "wb") as f:
        f.write(b"x")
    os.rename(disk(odd, ODD_FILE), disk(odd, b"renamed.txt"))
    (odd / "sentinel.txt").write_text("s")
    got: list[dict[str, Any]] = []
    while not got or got[-1]["path"] != "data/sentinel.txt":
        got.append(events.get(timeout=30).to_params())
    wire(got)
    created = next(p for p in got if p["path"] == "data/new\ufffd.bin")
    assert created["undecodableName"] is True and created["event"] == "created"
    moved = next(p for p in got if p["event"] == "moved")
    assert (moved["path"], moved["oldPath"], moved["undecodableName"]) == (
        "data/renamed.txt",
        "data/r\ufffdsum\ufffd.txt",
        True,
    )
    assert "undecodableName" not in got[-1]


def test_a_root_needs_a_name_json_can_carry(tmp_path: Path) -> None:
    folder = disk(tmp_path, CAFE)
    os.mkdir(folder)
    with RootSet() as roots:
        with pytest.raises(ConfigError, match="valid UTF-8"):
            roots.add(os.fsdecode(folder))
        root = roots.add(os.fsdecode(folder), name="cafe")
        assert root.uri.endswith("/caf%E9")
        wire({"uri": root.uri, "name": root.name})


def test_names_helpers() -> None:
    assert readable("caf\udce9") == "caf\ufffd"
    assert readable("plain") == "plain"
    assert find_surrogate({"path": "ok", "list": ["a", {"deep": "\ud800"}]}) == "list.1.deep"
    assert find_surrogate({"content": "\udc80"}, skip=frozenset({"content"})) is None
    assert find_surrogate({"k\udc80": 1}) == "k\ufffd"
    nested: Any = "\udc80"
    for _ in range(10_000):  # no recursion limit
        nested = [nested]
    assert find_surrogate({"deep": nested}) is not None
