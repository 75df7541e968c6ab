"""The wire, byte for byte: a hand-written JSON-RPC server (no ``mcp``) checks what the client sends.

The server (``servers/raw_server.py``) asserts the capability in ``initialize``,
then issues hand-built requests and records the raw responses; here they are
compared with PROTOCOL.md: result members, error codes and ``data`` members.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import ProtocolVersionError, open_connection
from tests.protocol.servers.harness import RAW_SERVER, approve_all, make_broker, make_tree, temp_files

ERROR_CODES = {
    "FILE_LOCKED": -32100,
    "PERMISSION_DENIED": -32101,
    "NOT_FOUND": -32102,
    "ALREADY_EXISTS": -32103,
    "PRECONDITION_FAILED": -32104,
    "WRONG_TYPE": -32105,
    "TOO_LARGE": -32106,
    "RATE_LIMITED": -32107,
    "ENCODING_ERROR": -32108,
}
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def result_of(responses: dict[str, Any], name: str) -> dict[str, Any]:
    response = responses[name]
    assert set(response) == {"jsonrpc", "id", "result"}, (name, response)
    assert response["jsonrpc"] == "2.0"
    return response["result"]  # type: ignore[no-any-return]


def error_of(
    responses: dict[str, Any], name: str, error: str | None, code: int, path: str | None
) -> dict[str, Any]:
    """The ``error`` member of a failed step, checked against PROTOCOL.md's table."""
    response = responses[name]
    assert set(response) == {"jsonrpc", "id", "error"}, (name, response)
    err = response["error"]
    assert set(err) == {"code", "message", "data"}, (name, err)
    assert err["code"] == code, (name, err)
    if error is not None:
        assert ERROR_CODES[error] == code
        assert err["data"]["error"] == error, (name, err)
    else:
        assert "error" not in err["data"], (name, err)
    assert SNAKE.match(err["data"]["reason"]), (name, err)
    if path is not None:
        assert err["data"]["path"] == path, (name, err)
    assert isinstance(err["message"], str) and err["message"]
    return err  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_the_wire_matches_the_protocol(tmp_path: Path) -> None:
    data = make_tree(tmp_path / "data")
    out = tmp_path / "raw.json"
    limits = Limits(max_watches=2, lock_wait=0.2)
    with make_broker(tmp_path, limits=limits, coalesce=0.01) as broker:
        broker.add_root(data, name="data")
        broker.allow("data/locked.txt", ops=("read",))
        other = broker.connect("someone-else")
        other.handle("files/read", {"path": "data/locked.txt", "keepLocked": True})
        async with open_connection(
            broker, "raw", command=sys.executable, args=[RAW_SERVER, str(out)], consenter=approve_all()
        ) as conn:
            assert conn.server_info == {"name": "raw-wire", "version": "0.0.1"}
            assert conn.protocol_version == "2025-11-25"
            assert [tool["name"] for tool in conn.tools] == ["run", "wait"]
            ran = await conn.call_tool("run", timeout=60)
            assert ran["isError"] is False
            (tmp_path / "more").mkdir()
            broker.add_root(tmp_path / "more", name="more")
            waited = await conn.call_tool("wait", {"method": "notifications/roots/list_changed"}, timeout=30)
        report = json.loads(out.read_text())

    # The capability, as bytes on the wire and as parsed JSON.
    assert report["capability_ok"] is True
    line = report["initialize_line"]
    capability = '"roots":{"listChanged":true,"filesystemBrokering":true,'
    capability += '"filesystemBrokeringFeatures":["perPathConsent"]}'
    assert capability in line.replace(" ", "")
    init = report["initialize"]
    assert init["method"] == "initialize"
    assert init["params"]["protocolVersion"] == "2025-11-25"
    assert init["params"]["clientInfo"]["name"] == "jupyter_fsbroker"

    # The roots change reached the server as a bare notification.
    note = json.loads(waited["content"][0]["text"])["notification"]
    assert note == {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}

    r = report["script"]["responses"]
    assert json.loads(ran["content"][0]["text"])["responses"] == r

    # The roots by name, and (by default) not where they are.
    roots = result_of(r, "roots")
    assert roots == {"roots": [], "_meta": {"filesystemBrokering": {"roots": [{"name": "data"}]}}}

    assert result_of(r, "consent") == {
        "granted": True,
        "approvedPaths": ["data"],
        "operations": ["read", "write", "delete", "watch"],
    }
    assert result_of(r, "consent_outside") == {"granted": False, "approvedPaths": [], "operations": []}

    text = result_of(r, "read_text")
    assert set(text) == {"content", "encoding", "size", "offset", "bytesRead", "eof", "mimeType", "etag"}
    size = len("héllo wörld\n".encode())
    assert text["content"] == "héllo wörld\n"
    assert (text["encoding"], text["size"], text["offset"], text["bytesRead"], text["eof"]) == (
        "utf-8",
        size,
        0,
        size,
        True,
    )
    assert text["mimeType"] == "text/plain"
    assert isinstance(text["etag"], str) and text["etag"]

    # A chunk that would split "é" stops before it.
    chunk = result_of(r, "read_chunk")
    assert (chunk["content"], chunk["bytesRead"], chunk["eof"], chunk["size"]) == ("h", 1, False, size)

    binary = result_of(r, "read_b64")
    assert binary["encoding"] == "base64"
    assert base64.b64decode(binary["content"]) == bytes(range(256))
    assert (binary["size"], binary["bytesRead"], binary["eof"]) == (256, 256, True)

    kept = result_of(r, "read_keep")
    assert re.fullmatch(r"lock_[0-9a-f]{32}", kept["lockId"])
    assert result_of(r, "unlock") == {"unlocked": True}
    error_of(r, "unlock_unknown", "NOT_FOUND", -32102, None)

    st = result_of(r, "stat")
    assert set(st) == {"path", "type", "size", "mtime", "etag", "mimeType", "locked"}
    assert (st["path"], st["type"], st["size"], st["locked"]) == ("data/hello.txt", "file", size, False)

    listing = result_of(r, "list")
    assert set(listing) == {"entries"}
    entries = {entry["name"]: entry for entry in listing["entries"]}
    assert {"hello.txt", "bin.dat", "bad.txt", "locked.txt", "sub"} <= set(entries)
    for entry in listing["entries"]:
        assert set(entry) == {"name", "path", "type", "size", "mtime"}
    assert entries["sub"]["type"] == "directory"
    assert entries["hello.txt"] | {"mtime": 0} == {
        "name": "hello.txt",
        "path": "data/hello.txt",
        "type": "file",
        "size": size,
        "mtime": 0,
    }

    assert result_of(r, "create_file") == {"path": "data/new/made.txt", "type": "file"}
    assert (data / "new" / "made.txt").read_text() == "made"
    assert result_of(r, "create_dir") == {"path": "data/newdir", "type": "directory"}
    error_of(r, "create_exists", "ALREADY_EXISTS", -32103, "data/hello.txt")

    written = result_of(r, "write")
    assert set(written) == {"bytesWritten", "size", "etag"}
    assert (written["bytesWritten"], written["size"]) == (3, 3)
    error_of(r, "write_exclusive", "ALREADY_EXISTS", -32103, "data/out.txt")
    error_of(r, "write_if_match", "PRECONDITION_FAILED", -32104, "data/out.txt")

    started = result_of(r, "upload_start")
    assert (started["bytesWritten"], started["size"]) == (10, 10)
    bad_offset = error_of(r, "upload_bad_offset", None, -32602, "data/up.bin")
    assert bad_offset["data"]["expectedOffset"] == 10
    final = result_of(r, "upload_final")
    assert (final["bytesWritten"], final["size"]) == (5, 15) and final["etag"]
    assert (data / "up.bin").read_bytes() == b"A" * 10 + b"B" * 5

    too_large = error_of(r, "write_too_large", "TOO_LARGE", -32106, "data/big.bin")
    assert too_large["data"]["maxBytes"] == 2 * 1024 * 1024
    error_of(r, "read_directory", "WRONG_TYPE", -32105, "data/sub")
    error_of(r, "read_bad_encoding", "ENCODING_ERROR", -32108, "data/bad.txt")
    outside = error_of(r, "read_outside", "PERMISSION_DENIED", -32101, "/etc/passwd")
    assert "/etc" not in outside["message"].replace("/etc/passwd", "")
    error_of(r, "read_missing", "NOT_FOUND", -32102, "data/missing.txt")
    no_path = error_of(r, "read_no_path", None, -32602, None)
    assert no_path["data"]["reason"] == "missing_param"
    error_of(r, "read_wrong_type", None, -32602, "data/hello.txt")
    error_of(r, "unknown_method", None, -32601, None)
    locked = error_of(r, "write_locked", "FILE_LOCKED", -32100, "data/locked.txt")
    assert locked["data"]["lockedBy"] == "someone-else"
    assert isinstance(locked["data"]["retryAfterMs"], int)

    assert result_of(r, "rename") == {"path": "data/renamed.txt"}
    error_of(r, "rename_exists", "ALREADY_EXISTS", -32103, "data/hello.txt")
    assert result_of(r, "delete") == {"path": "data/renamed.txt", "trashed": True}
    error_of(r, "delete_directory", "WRONG_TYPE", -32105, "data/sub")

    watch_id = result_of(r, "watch")["watchId"]
    assert set(result_of(r, "watch")) == {"watchId"}
    assert result_of(r, "write_watched")["bytesWritten"] == 1
    change = r["change"]
    assert change["jsonrpc"] == "2.0" and "id" not in change
    assert change["method"] == "notifications/files/changed"
    params = change["params"]
    assert {k: params[k] for k in ("watchId", "path")} == {"watchId": watch_id, "path": "data/watched.txt"}
    assert params["event"] in ("created", "modified")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", params["timestamp"])
    assert set(params) == {"watchId", "path", "event", "timestamp"}
    assert "watchId" in result_of(r, "watch_second")
    error_of(r, "watch_too_many", "RATE_LIMITED", -32107, "data/new")
    assert result_of(r, "unwatch") == {}
    error_of(r, "unwatch_unknown", "NOT_FOUND", -32102, None)

    assert temp_files(data) == []


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["--modern-error", "--modern-result"])
async def test_a_server_that_only_speaks_the_modern_era_is_refused_clearly(tmp_path: Path, mode: str) -> None:
    with make_broker(tmp_path) as broker:
        with pytest.raises(ProtocolVersionError) as info:
            async with open_connection(
                broker,
                "modern",
                command=sys.executable,
                args=[RAW_SERVER, str(tmp_path / "out.json"), mode],
                era="legacy",
            ):
                pass
        message = str(info.value)
        assert "2026-07-28" in message
        assert "handshake era" in message
        assert "2025-11-25" in message
        assert info.value.offered == ("2026-07-28",)
        assert broker.connections() == ()


@pytest.mark.anyio
async def test_auto_over_stdio_asks_for_the_handshake_era_and_takes_the_modern_one_when_refused(
    tmp_path: Path,
) -> None:
    # The first request fixes an stdio server's era: auto sends initialize first, and only a
    # refusal that names 2026-07-28 versions makes it ask server/discover on the same pipe.
    out = tmp_path / "out.json"
    with make_broker(tmp_path) as broker:
        async with open_connection(
            broker, "modern", command=sys.executable, args=[RAW_SERVER, str(out), "--modern-only"]
        ) as conn:
            assert (conn.era, conn.protocol_version) == ("modern", "2026-07-28")
            assert [tool["name"] for tool in conn.tools] == ["run", "wait"]
        report = json.loads(out.read_text())
        assert report["initialize"]["method"] == "initialize"
        assert report["then"] == "server/discover"
