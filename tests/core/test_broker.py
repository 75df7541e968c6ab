"""The ``files/*`` methods through the broker's one entry point, as PROTOCOL.md specifies them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.errors import ConfigError, FilesError, to_jsonrpc_error
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.core.watch import ChangeEvent

from .conftest import ALL_OPS, error_of, make_broker


class Waiting:
    """A consenter whose prompts wait until the test answers them (or they are withdrawn)."""

    def __init__(self, pending: list[Future[ConsentDecision]]) -> None:
        self.pending = pending

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        self.pending.append(future)
        return future


# -- read ------------------------------------------------------------------------------------------


def test_read_result_shape(data: Path, conn: Connection) -> None:
    (data / "t.csv").write_text("a,b\n1,2\n")
    result = conn.handle("files/read", {"path": "data/t.csv"})
    assert set(result) == {"content", "encoding", "size", "offset", "bytesRead", "eof", "mimeType", "etag"}
    assert result["content"] == "a,b\n1,2\n" and result["size"] == 8 and result["eof"] is True
    assert result["mimeType"] == "text/csv" and result["encoding"] == "utf-8" and result["offset"] == 0


def test_read_offsets_and_clamp(data: Path, conn: Connection) -> None:
    (data / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    r = conn.handle("files/read", {"path": "data/big.bin", "encoding": "base64", "length": 10**9})
    assert r["bytesRead"] == 2 * 1024 * 1024 and r["eof"] is False
    r = conn.handle("files/read", {"path": "data/big.bin", "encoding": "base64", "offset": 3 * 1024 * 1024})
    assert (r["bytesRead"], r["eof"], r["content"]) == (0, True, "")
    err = error_of(conn, "files/read", {"path": "data/big.bin", "offset": 3 * 1024 * 1024 + 1})
    assert err.code == -32602


def test_other_text_codecs_and_bad_ones(data: Path, conn: Connection) -> None:
    (data / "latin.txt").write_bytes("café".encode("latin-1"))
    assert conn.handle("files/read", {"path": "data/latin.txt", "encoding": "latin-1"})["content"] == "café"
    assert error_of(conn, "files/read", {"path": "data/latin.txt"}).name == "ENCODING_ERROR"
    assert error_of(conn, "files/read", {"path": "data/latin.txt", "encoding": "rot13"}).code == -32602
    assert error_of(conn, "files/read", {"path": "data/latin.txt", "encoding": "nope"}).code == -32602


# -- write -----------------------------------------------------------------------------------------


def test_write_create_exclusive_and_etags(data: Path, conn: Connection) -> None:
    r = conn.handle("files/write", {"path": "data/w.txt", "content": "one"})
    assert r["bytesWritten"] == 3 and r["size"] == 3
    first = r["etag"]
    assert (
        error_of(conn, "files/write", {"path": "data/w.txt", "content": "x", "exclusive": True}).name
        == "ALREADY_EXISTS"
    )
    assert (
        error_of(conn, "files/write", {"path": "data/none.txt", "content": "x", "create": False}).name
        == "NOT_FOUND"
    )
    second = conn.handle("files/write", {"path": "data/w.txt", "content": "two", "ifMatch": first})["etag"]
    assert second != first
    err = error_of(conn, "files/write", {"path": "data/w.txt", "content": "three", "ifMatch": first})
    assert (err.name, err.code) == ("PRECONDITION_FAILED", -32104)
    assert (data / "w.txt").read_text() == "two"
    assert conn.handle("files/stat", {"path": "data/w.txt"})["etag"] == second


def test_write_keeps_mode_and_binary(data: Path, conn: Connection) -> None:
    target = data / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    payload = bytes(range(256))
    conn.handle(
        "files/write",
        {"path": "data/script.sh", "content": base64.b64encode(payload).decode(), "encoding": "base64"},
    )
    assert target.read_bytes() == payload
    assert target.stat().st_mode & 0o777 == 0o750
    assert (
        error_of(conn, "files/write", {"path": "data/x", "content": "!!", "encoding": "base64"}).code
        == -32602
    )
    assert error_of(conn, "files/write", {"path": "data/x", "content": "\udc80"}).name == "ENCODING_ERROR"


def test_write_through_in_root_link_replaces_the_target(data: Path, conn: Connection) -> None:
    (data / "real.txt").write_text("old")
    (data / "link.txt").symlink_to("real.txt")
    conn.handle("files/write", {"path": "data/link.txt", "content": "new"})
    assert (data / "link.txt").is_symlink() and (data / "real.txt").read_text() == "new"


def test_write_to_a_directory_is_wrong_type(data: Path, conn: Connection) -> None:
    (data / "d").mkdir()
    assert error_of(conn, "files/write", {"path": "data/d", "content": "x"}).name == "WRONG_TYPE"
    assert error_of(conn, "files/write", {"path": "data", "content": "x"}).name == "WRONG_TYPE"


def test_no_temp_files_left_after_writes(data: Path, conn: Connection) -> None:
    for i in range(20):
        conn.handle("files/write", {"path": f"data/f{i % 3}.txt", "content": str(i)})
    error_of(conn, "files/write", {"path": "data/f0.txt", "content": "x", "ifMatch": "stale"})
    assert sorted(os.listdir(data)) == ["f0.txt", "f1.txt", "f2.txt"]


# -- list, stat, create ----------------------------------------------------------------------------


def test_list_pagination_walks_everything_once(data: Path, conn: Connection) -> None:
    for d in ("a", "b", "b/c"):
        (data / d).mkdir()
    for f in ("1", "a/2", "a/3", "b/4", "b/c/5", "b/c/6", "z"):
        (data / f).write_text(f)
    expected = [e["path"] for e in conn.handle("files/list", {"path": "data", "recursive": True})["entries"]]
    assert expected == sorted(expected, key=lambda p: p.split("/"))
    assert len(expected) == 10
    for page in (1, 2, 3, 7):
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, object] = {"path": "data", "recursive": True, "maxEntries": page}
            if cursor:
                params["cursor"] = cursor
            r = conn.handle("files/list", params)
            seen += [e["path"] for e in r["entries"]]
            cursor = r.get("nextCursor")
            if not cursor:
                break
        assert seen == expected, page
    err = error_of(conn, "files/list", {"path": "data/a", "recursive": True, "cursor": cursor or "e30="})
    assert err.code == -32602


def test_list_entry_shape_and_errors(data: Path, conn: Connection) -> None:
    (data / "f.txt").write_text("12345")
    [entry] = conn.handle("files/list", {"path": "data"})["entries"]
    assert set(entry) == {"name", "path", "type", "size", "mtime"}
    assert (entry["name"], entry["path"], entry["type"], entry["size"]) == ("f.txt", "data/f.txt", "file", 5)
    assert entry["mtime"].endswith("Z")
    assert error_of(conn, "files/list", {"path": "data/f.txt"}).name == "WRONG_TYPE"
    assert error_of(conn, "files/list", {"path": "data", "maxEntries": 0}).code == -32602


def test_stat_and_create(data: Path, conn: Connection) -> None:
    r = conn.handle("files/create", {"path": "data/new.txt", "type": "file", "content": "hi"})
    assert r == {"path": "data/new.txt", "type": "file"}
    assert error_of(conn, "files/create", {"path": "data/new.txt", "type": "file"}).name == "ALREADY_EXISTS"
    st = conn.handle("files/stat", {"path": "data/new.txt"})
    assert (st["type"], st["size"], st["locked"], st["mimeType"]) == ("file", 2, False, "text/plain")
    assert conn.handle("files/create", {"path": "data/dir", "type": "directory"})["type"] == "directory"
    assert conn.handle("files/stat", {"path": "data/dir"})["type"] == "directory"
    assert error_of(conn, "files/create", {"path": "data/x", "type": "socket"}).code == -32602


# -- delete and rename -----------------------------------------------------------------------------


def test_delete_goes_to_a_recoverable_trash(data: Path, broker: Broker, conn: Connection) -> None:
    (data / "keep.txt").write_text("precious")
    assert conn.handle("files/delete", {"path": "data/keep.txt"}) == {
        "path": "data/keep.txt",
        "trashed": True,
    }
    assert not (data / "keep.txt").exists()
    [item] = broker.trash.list()
    assert (item.path, item.root, item.server, item.connection_id) == (
        "data/keep.txt",
        "data",
        "test-server",
        conn.id,
    )
    broker.trash.restore(item.id)
    assert (data / "keep.txt").read_text() == "precious"


def test_delete_directories_need_recursive(data: Path, conn: Connection) -> None:
    (data / "d" / "e").mkdir(parents=True)
    (data / "d" / "e" / "f").write_text("x")
    assert error_of(conn, "files/delete", {"path": "data/d"}).name == "WRONG_TYPE"
    assert conn.handle("files/delete", {"path": "data/d", "recursive": True})["trashed"] is True
    assert error_of(conn, "files/delete", {"path": "data"}).reason == "root_itself"
    assert error_of(conn, "files/delete", {"path": "data/d"}).name == "NOT_FOUND"


def test_permanent_delete_and_if_match(tmp_path: Path, data: Path) -> None:
    with make_broker(tmp_path, permanent_delete=True) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        c = b.connect("s")
        (data / "f").write_text("x")
        assert (
            error_of(c, "files/delete", {"path": "data/f", "ifMatch": "nope"}).name == "PRECONDITION_FAILED"
        )
        etag = c.handle("files/stat", {"path": "data/f"})["etag"]
        assert c.handle("files/delete", {"path": "data/f", "ifMatch": etag}) == {
            "path": "data/f",
            "trashed": False,
        }
        assert not (data / "f").exists()
        assert not (tmp_path / ".trash").exists() or not any((tmp_path / ".trash").iterdir())


def test_delete_a_link_deletes_the_link_only(tmp_path: Path, data: Path, conn: Connection) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (data / "link").symlink_to(outside)
    conn.handle("files/delete", {"path": "data/link"})
    assert not (data / "link").is_symlink() and outside.read_text() == "keep me"


def test_rename_overwrite_and_errors(data: Path, conn: Connection) -> None:
    (data / "a").write_text("A")
    (data / "b").write_text("B")
    assert error_of(conn, "files/rename", {"path": "data/a", "newPath": "data/b"}).name == "ALREADY_EXISTS"
    assert conn.handle("files/rename", {"path": "data/a", "newPath": "data/b", "overwrite": True}) == {
        "path": "data/b"
    }
    assert (data / "b").read_text() == "A" and not (data / "a").exists()
    assert error_of(conn, "files/rename", {"path": "data/a", "newPath": "data/c"}).name == "NOT_FOUND"
    (data / "sub").mkdir()
    assert conn.handle("files/rename", {"path": "data/b", "newPath": "data/sub/b"}) == {"path": "data/sub/b"}
    assert error_of(conn, "files/rename", {"path": "data/sub", "newPath": "data/sub/inner"}).code == -32602
    assert (data / "sub" / "b").read_text() == "A"


# -- locks ------------------------------------------------------------------------------------------


def test_keep_locked_excludes_others_until_unlock(data: Path, broker: Broker, conn: Connection) -> None:
    (data / "f").write_text("v1")
    other = broker.connect("other-server")
    lock_id = conn.handle("files/read", {"path": "data/f", "keepLocked": True})["lockId"]
    assert lock_id.startswith("lock_") and len(lock_id) == 5 + 32
    err = error_of(other, "files/write", {"path": "data/f", "content": "x"})
    assert (err.name, err.code, err.data["lockedBy"]) == ("FILE_LOCKED", -32100, "test-server")
    assert lock_id not in json.dumps(to_jsonrpc_error(err))
    assert error_of(other, "files/read", {"path": "data/f"}).name == "FILE_LOCKED"
    assert other.handle("files/stat", {"path": "data/f"})["locked"] is True
    # The owner keeps working, with or without the lockId.
    conn.handle("files/write", {"path": "data/f", "content": "v2"})
    conn.handle("files/write", {"path": "data/f", "content": "v3", "lockId": lock_id})
    assert error_of(other, "files/unlock", {"lockId": lock_id}).name == "NOT_FOUND"
    assert error_of(conn, "files/unlock", {"lockId": "lock_" + "0" * 32}).name == "NOT_FOUND"
    assert conn.handle("files/unlock", {"lockId": lock_id}) == {"unlocked": True}
    other.handle("files/write", {"path": "data/f", "content": "v4"})
    assert (data / "f").read_text() == "v4"


def test_closing_a_connection_releases_its_locks_and_grants(
    data: Path, broker: Broker, conn: Connection
) -> None:
    (data / "f").write_text("x")
    lock_id = conn.handle("files/write", {"path": "data/f", "content": "y", "keepLocked": True})["lockId"]
    other = broker.connect("other")
    assert error_of(other, "files/write", {"path": "data/f", "content": "z"}).name == "FILE_LOCKED"
    conn.close()
    assert lock_id not in {info.lock_id for info in broker.locks.held()}
    other.handle("files/write", {"path": "data/f", "content": "z"})
    assert error_of(conn, "files/read", {"path": "data/f"}).reason == "connection_closed"
    assert conn not in broker.connections()


def test_user_can_force_release(data: Path, broker: Broker, conn: Connection) -> None:
    (data / "f").write_text("x")
    lock_id = conn.handle("files/read", {"path": "data/f", "keepLocked": True})["lockId"]
    broker.force_unlock(lock_id)
    broker.connect("other").handle("files/write", {"path": "data/f", "content": "z"})
    assert error_of(conn, "files/unlock", {"lockId": lock_id}).name == "NOT_FOUND"


def test_directory_with_locked_file_below_cannot_be_deleted(
    data: Path, broker: Broker, conn: Connection
) -> None:
    (data / "d").mkdir()
    (data / "d" / "f").write_text("x")
    conn.handle("files/read", {"path": "data/d/f", "keepLocked": True})
    other = broker.connect("other")
    assert error_of(other, "files/delete", {"path": "data/d", "recursive": True}).name == "FILE_LOCKED"
    assert error_of(other, "files/rename", {"path": "data/d", "newPath": "data/e"}).name == "FILE_LOCKED"
    assert (data / "d" / "f").exists()


# -- watch ------------------------------------------------------------------------------------------


def test_watch_delivers_granted_changes_only(data: Path, broker: Broker) -> None:
    (data / "pub").mkdir()
    (data / "priv").mkdir()
    broker.allow("data", ops=("read", "write"))
    grant = broker.allow("data/pub", ops=("watch",))
    events: queue.Queue[ChangeEvent] = queue.Queue()
    conn = broker.connect("w", notify=events.put)
    assert error_of(conn, "files/watch", {"path": "data/priv"}).reason == "not_granted"
    watch_id = conn.handle("files/watch", {"path": "data/pub", "recursive": True})["watchId"]
    assert watch_id.startswith("w_")
    conn.handle("files/write", {"path": "data/pub/x.csv", "content": "1"})
    (data / "pub" / ".env").write_text("SECRET=1")
    # Then a new ordinary file: its "created" is held for the coalescing window, like the
    # sensitive file's would be, and delivered after it. Once it is here, .env would be too.
    os.close(os.open(data / "pub" / "after.csv", os.O_CREAT | os.O_WRONLY))
    got = []
    while not got or got[-1].path != "data/pub/after.csv":
        got.append(events.get(timeout=30))
    assert [(e.path, e.event) for e in got] == [
        ("data/pub/x.csv", "created"),
        ("data/pub/after.csv", "created"),
    ]
    params = got[0].to_params()
    assert (params["watchId"], params["path"], params["event"]) == (watch_id, "data/pub/x.csv", "created")
    assert params["timestamp"].endswith("Z")
    broker.grants.revoke(grant.id)
    (data / "pub" / "y.csv").write_text("2")
    conn.handle("files/write", {"path": "data/pub/x.csv", "content": "3"})
    assert conn.handle("files/unwatch", {"watchId": watch_id}) == {}
    assert error_of(conn, "files/unwatch", {"watchId": watch_id}).name == "NOT_FOUND"
    leftovers = []
    while not events.empty():
        leftovers.append(events.get_nowait())
    assert all(e.path == "data/pub/x.csv" and e.event == "created" for e in leftovers)


def test_watch_reports_an_atomic_rewrite_as_modified(data: Path, broker: Broker, conn: Connection) -> None:
    (data / "f.txt").write_text("a")
    events: queue.Queue[ChangeEvent] = queue.Queue()
    c = broker.connect("w", notify=events.put)
    c.handle("files/watch", {"path": "data"})
    conn.handle("files/write", {"path": "data/f.txt", "content": "b"})
    event = events.get(timeout=30)
    assert (event.path, event.event) == ("data/f.txt", "modified")


# -- consent ---------------------------------------------------------------------------------------


def test_consent_grants_only_what_was_asked_and_approved(tmp_path: Path, data: Path) -> None:
    (data / "sales").mkdir()
    (data / "sales" / "q1.csv").write_text("x")
    (data / "other.txt").write_text("y")
    asked: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        # The user tries to approve more than asked: the broker keeps only the subset.
        return ConsentDecision(
            (*request.approvable_paths, "data/other.txt", "/etc"), ("read", "write", "delete"), 60
        )

    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        c = b.connect("analysis", consenter=CallbackConsenter(decide))
        assert error_of(c, "files/read", {"path": "data/sales/q1.csv"}).reason == "not_granted"
        r = c.handle(
            "files/consent",
            {
                "message": "Profile sales",
                "requestedPaths": ["data/sales", "/etc/passwd", "data/.env"],
                "operations": ["read", "write"],
            },
        )
        assert (
            r["granted"] is True
            and r["approvedPaths"] == ["data/sales"]
            and r["operations"] == ["read", "write"]
        )
        assert r["expiresAt"].endswith("Z")
        [request] = asked
        assert request.server == "analysis" and request.message == "Profile sales"
        assert [(i.path, i.approvable, i.reason) for i in request.items] == [
            ("data/sales", True, None),
            ("/etc/passwd", False, "outside_roots"),
            ("data/.env", False, "sensitive"),
        ]
        assert c.handle("files/read", {"path": "data/sales/q1.csv"})["content"] == "x"
        assert error_of(c, "files/read", {"path": "data/other.txt"}).reason == "not_granted"
        assert error_of(c, "files/delete", {"path": "data/sales/q1.csv"}).reason == "not_granted"
        # Another connection does not share the grant.
        assert error_of(b.connect("x"), "files/read", {"path": "data/sales/q1.csv"}).reason == "not_granted"


def test_consent_refused_timed_out_or_cancelled_is_a_plain_refusal(tmp_path: Path, data: Path) -> None:
    pending: list[Future[ConsentDecision]] = []

    with make_broker(tmp_path, limits=Limits(consent_timeout=0.2)) as b:
        b.add_root(data, name="data")
        c = b.connect("s", consenter=Waiting(pending))
        refusal = {"granted": False, "approvedPaths": [], "operations": []}
        assert c.handle("files/consent", {"requestedPaths": ["data"]}) == refusal
        assert pending[0].cancelled()
        assert b.audit.records()[-1].decision == "deny"
        assert c.handle("files/consent", {"requestedPaths": ["/etc"]}) == refusal
        assert len(pending) == 1  # nothing approvable: the user is not asked
    with make_broker(tmp_path / "2") as b:
        b.add_root(data, name="data")
        c = b.connect("s", consenter=Waiting(pending))
        result: list[object] = []
        worker = threading.Thread(
            target=lambda: result.append(c.handle("files/consent", {"requestedPaths": ["data"]}))
        )
        worker.start()
        while not pending[1:]:
            threading.Event().wait(0.01)
        c.close()  # the kill switch answers a pending consent too
        worker.join(5)
        assert result == [refusal]


def test_consent_params_are_checked(conn: Connection) -> None:
    assert error_of(conn, "files/consent", {"requestedPaths": []}).code == -32602
    assert error_of(conn, "files/consent", {"requestedPaths": "data"}).code == -32602
    assert error_of(conn, "files/consent", {"requestedPaths": ["data"], "operations": ["fly"]}).code == -32602


# -- limits, params, audit, errors ---------------------------------------------------------------


def test_rate_limits(tmp_path: Path, data: Path) -> None:
    with make_broker(tmp_path, limits=Limits(ops_per_second=1, ops_burst=3)) as b:
        b.add_root(data, name="data")
        b.allow("data")
        c = b.connect("s")
        (data / "f").write_text("x")
        for _ in range(3):
            c.handle("files/stat", {"path": "data/f"})
        err = error_of(c, "files/stat", {"path": "data/f"})
        assert (err.name, err.code) == ("RATE_LIMITED", -32107) and err.data["retryAfterMs"] > 0
        b.connect("fresh").handle("files/stat", {"path": "data/f"})  # per connection


def test_malformed_requests_are_invalid_params(conn: Connection) -> None:
    for method, params in (
        ("files/read", {}),
        ("files/read", {"path": 3}),
        ("files/read", {"path": "data/x", "offset": -1}),
        ("files/read", {"path": "data/x", "offset": "0"}),
        ("files/read", {"path": "data/x", "keepLocked": "yes"}),
        ("files/read", {"path": "data/x", "length": True}),
        ("files/read", {"path": ""}),
        ("files/write", {"path": "data/x"}),
        ("files/read", ["data/x"]),
        ("files/watch", {"path": "data", "events": ["exploded"]}),
        ("files/unwatch", {}),
        ("files/unlock", {"lockId": 1}),
    ):
        err = error_of(conn, method, params)  # type: ignore[arg-type]
        assert err.code == -32602, (method, params, err)
    err = error_of(conn, "files/teleport", {"path": "data"})
    assert err.code == -32601


def test_audit_records_every_request_without_content(data: Path, broker: Broker, conn: Connection) -> None:
    (data / "f").write_text("CONTENT-MARKER")
    conn.handle("files/read", {"path": "data/f"})
    error_of(conn, "files/read", {"path": "/etc/passwd"})
    ok, denied = broker.audit.records()[-2:]
    assert (ok.method, ok.path, ok.canonical, ok.root, ok.decision, ok.bytes) == (
        "files/read",
        "data/f",
        "data/f",
        "data",
        "allow",
        14,
    )
    assert (denied.decision, denied.error, denied.reason) == ("deny", "PERMISSION_DENIED", "outside_roots")
    assert ok.server == "test-server" and ok.connection_id == conn.id and ok.duration_ms >= 0
    assert "CONTENT-MARKER" not in json.dumps([r.to_json() for r in broker.audit.records()])


def test_jsonrpc_error_shape(conn: Connection) -> None:
    err = error_of(conn, "files/read", {"path": "/etc/passwd"})
    assert to_jsonrpc_error(err) == {
        "code": -32101,
        "message": err.message,
        "data": {"error": "PERMISSION_DENIED", "reason": "outside_roots", "path": "/etc/passwd"},
    }


def test_ahandle_runs_off_the_event_loop(data: Path, conn: Connection) -> None:
    (data / "f").write_text("async")

    async def main() -> dict[str, object]:
        return await conn.ahandle("files/read", {"path": "data/f"})

    assert asyncio.run(main())["content"] == "async"


def test_close_leaves_no_threads(tmp_path: Path, data: Path) -> None:
    before = set(threading.enumerate())
    b = make_broker(tmp_path)
    b.add_root(data, name="data")
    b.allow("data", ops=ALL_OPS)
    c = b.connect("s")
    c.handle("files/watch", {"path": "data"})
    asyncio.run(c.ahandle("files/stat", {"path": "data"}))
    c.handle("files/write", {"path": "data/f", "content": "x", "keepLocked": True})
    b.close()
    b.close()
    assert set(threading.enumerate()) <= before
    assert not any(name.endswith(".lock") for name in os.listdir(tmp_path / ".locks"))
    with pytest.raises(FilesError):
        c.handle("files/stat", {"path": "data"})


def test_async_consent_holds_no_worker_thread(tmp_path: Path, data: Path) -> None:
    """Many prompts waiting for the user must not starve file I/O of threads."""
    pending: list[Future[ConsentDecision]] = []
    (data / "f").write_text("still served")
    with make_broker(tmp_path, workers=2) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=("read",))
        c = b.connect("s", consenter=Waiting(pending))

        async def main() -> tuple[list[dict[str, object]], dict[str, object]]:
            prompts = [
                asyncio.ensure_future(c.ahandle("files/consent", {"requestedPaths": ["data"]}))
                for _ in range(8)
            ]
            while len(pending) < 8:
                await asyncio.sleep(0)
            # Eight prompts are open on a pool of two threads, and a read still goes through.
            read = await asyncio.wait_for(c.ahandle("files/read", {"path": "data/f"}), 10)
            for i, future in enumerate(pending):
                future.set_result(ConsentDecision(("data",), ("read",)) if i % 2 else ConsentDecision.deny())
            return list(await asyncio.gather(*prompts)), read

        answers, read = asyncio.run(main())
        assert read["content"] == "still served"
        # The requests are prepared on worker threads, so they reach the consenter in any order:
        # each answer reaches exactly one prompt.
        assert sorted(bool(a["granted"]) for a in answers) == [False] * 4 + [True] * 4


def test_async_consent_timeout_and_close_withdraw_the_prompt(tmp_path: Path, data: Path) -> None:
    pending: list[Future[ConsentDecision]] = []
    refusal = {"granted": False, "approvedPaths": [], "operations": []}
    with make_broker(tmp_path, limits=Limits(consent_timeout=0.2)) as b:
        b.add_root(data, name="data")
        c = b.connect("s", consenter=Waiting(pending))
        assert asyncio.run(c.ahandle("files/consent", {"requestedPaths": ["data"]})) == refusal
        assert pending[-1].cancelled()

        async def closed_meanwhile() -> dict[str, object]:
            task = asyncio.ensure_future(c.ahandle("files/consent", {"requestedPaths": ["data"]}))
            while len(pending) < 2:
                await asyncio.sleep(0)
            c.close()
            return await task

        assert asyncio.run(closed_meanwhile()) == refusal
        assert pending[-1].cancelled()


def test_transfers_report_chunk_progress(data: Path, broker: Broker, conn: Connection) -> None:
    from jupyter_fsbroker.core.broker import Transfer

    seen: list[Transfer] = []
    broker.on_transfer(seen.append)
    (data / "f.bin").write_bytes(b"x" * 10)
    for offset in (0, 4, 8):
        conn.handle("files/read", {"path": "data/f.bin", "encoding": "base64", "offset": offset, "length": 4})
    conn.handle("files/write", {"path": "data/up.bin", "content": "eHh4", "encoding": "base64", "offset": 0})
    conn.handle(
        "files/write",
        {"path": "data/up.bin", "content": "eHh4", "encoding": "base64", "offset": 3, "final": True},
    )
    assert [(t.path, t.direction, t.done, t.total, t.finished) for t in seen] == [
        ("data/f.bin", "read", 4, 10, False),
        ("data/f.bin", "read", 8, 10, False),
        ("data/f.bin", "read", 10, 10, True),
        ("data/up.bin", "write", 3, None, False),
        ("data/up.bin", "write", 6, None, False),
        ("data/up.bin", "write", 6, 6, True),
    ]


def test_allowing_a_change_in_a_read_only_root_says_it_cannot_take_effect(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    with Broker() as broker:
        broker.add_root(tmp_path / "ref", name="ref", read_only=True)
        with pytest.raises(ConfigError, match=r"ref is shared read-only, so write on ref cannot take effect"):
            broker.allow("ref", ops=("read", "write"))
        with pytest.raises(ConfigError, match=r"write and delete on ref/x .* share it read-write"):
            broker.allow("ref/x", ops=("write", "delete"))
        assert broker.grants.grants() == ()  # nothing approved
        assert broker.allow("ref", ops=("read", "watch")).operations == ("read", "watch")
