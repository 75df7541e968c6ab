"""The 2026-07-28 era's shapes (PROTOCOL.md, "The 2026-07-28 era") and its error codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_fsbroker.wire import catalogue
from jupyter_fsbroker.wire.modern import (
    EXTENSION_ID,
    RESULT_TYPE,
    Answer,
    Operation,
    batch_result,
    continuation_meta,
    lists_extension,
    read_batch,
    read_continuation,
    routed,
    split_route,
)

PROTOCOL = Path(__file__).resolve().parents[2] / "PROTOCOL.md"


def test_the_modern_code_table_of_protocol_md_is_the_catalogues() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([A-Z_]+) \| [^|]+ \| (-\d+) \|$", text, re.M)
    documented = {name: int(code) for name, code in rows}
    kinds = [kind for kind in (*catalogue.KINDS, *catalogue.CALL_KINDS) if kind.name is not None]
    assert documented == {kind.name: kind.modern_code for kind in kinds}
    for code in documented.values():
        assert not -32768 <= code <= -32000, f"{code} is in JSON-RPC's reserved range"


def test_modern_codes_read_back_as_their_kinds_and_plain_errors_keep_theirs() -> None:
    for kind in catalogue.KINDS:
        assert catalogue.kind_of(kind.modern_code, "m", None) is kind
    assert catalogue.INVALID_PARAMS.modern_code == -32602
    legacy = catalogue.error_object(catalogue.NOT_FOUND, "gone", path="data/x")
    modern = catalogue.to_modern(legacy)
    assert modern == {**legacy, "code": -31102} and legacy["code"] == -32102
    assert catalogue.to_modern(modern) == modern
    assert catalogue.to_modern({"code": -32602, "message": "bad"})["code"] == -32602


def test_a_batch_and_its_continuation_round_trip() -> None:
    ops = [Operation("0", "files/stat", {"path": "data/a"}), Operation("1", "files/read", {"path": "data/a"})]
    result = batch_result(ops, "v1.token")
    assert result["resultType"] == RESULT_TYPE
    assert read_batch(result) == (tuple(ops), "v1.token")
    answers = [Answer("0", result={"size": 1}), Answer("1", error={"code": -31102, "message": "gone"})]
    meta = {EXTENSION_ID: continuation_meta("c_1", "v1.token", answers)}
    read = read_continuation(meta)
    assert read is not None and (read.connection, read.token, read.answers) == (
        "c_1",
        "v1.token",
        tuple(answers),
    )
    assert read_continuation({EXTENSION_ID: continuation_meta("c_1")}) == read_continuation(
        {EXTENSION_ID: {"connection": "c_1"}}
    )
    assert read_continuation({}) is None
    assert read.cancel is False
    cancelling = read_continuation(
        {EXTENSION_ID: continuation_meta("c_1", "v1.token", answers[:1], cancel=True)}
    )
    assert cancelling is not None and cancelling.cancel and cancelling.answers == tuple(answers[:1])


@pytest.mark.parametrize(
    "member",
    [
        "not an object",
        {"connection": 3},
        {"connection": "c", "continuation": "t"},
        {"connection": "c", "continuation": "t", "answers": [{"id": "0"}]},
        {"connection": "c", "continuation": "t", "answers": [{"id": "0", "result": {}, "error": {}}]},
        {
            "connection": "c",
            "continuation": "t",
            "answers": [{"id": "0", "error": {"code": True, "message": ""}}],
        },
        {"connection": "c", "continuation": "x" * (2 * 1024 * 1024), "answers": []},
        {"connection": "c", "continuation": "t", "answers": [], "cancel": "yes"},
    ],
)
def test_a_malformed_continuation_member_is_refused(member: object) -> None:
    with pytest.raises(ValueError):
        read_continuation({EXTENSION_ID: member})


def test_a_batch_must_name_its_operations_once() -> None:
    op = {"id": "0", "method": "files/stat", "params": {}}
    with pytest.raises(ValueError, match="repeat"):
        read_batch({"resultType": RESULT_TYPE, "operations": [op, op], "continuation": "t"})
    with pytest.raises(ValueError):
        read_batch({"resultType": "complete", "operations": [op], "continuation": "t"})


def test_the_extension_is_read_from_the_client_capabilities_of_a_request() -> None:
    caps = "io.modelcontextprotocol/clientCapabilities"
    assert lists_extension({caps: {"extensions": {EXTENSION_ID: {}}}})
    assert not lists_extension({caps: {"extensions": {}}})
    assert not lists_extension(None)


def test_a_continuation_names_its_instance_before_a_tilde() -> None:
    assert routed("r1", "v1.AbC-_") == "r1~v1.AbC-_"
    assert split_route("r1~v1.AbC-_") == ("r1", "v1.AbC-_")
    assert routed(None, "v1.AbC") == "v1.AbC"
    assert split_route("v1.AbC") == (None, "v1.AbC")  # base64url holds no tilde: names none
    assert split_route("bad name~v1.x") == (None, "bad name~v1.x")  # left to the seal to refuse
    for bad in ("", "r 1", "a" * 65, "r~1"):
        with pytest.raises(ValueError):
            routed(bad, "v1.x")
