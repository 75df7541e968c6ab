"""The kit acts on what the client's core really answers: the reasons and the cap it reads.

A core with a small cap answers requests; each answer goes through the core's encoder
(:func:`~jupyter_fsbroker.core.errors.to_jsonrpc_error`) and the kit's reader
(:func:`~jupyter_fsbroker.serverkit.error_from_jsonrpc`), as on the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker import serverkit as kit
from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.core import errors as core_errors
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.serverkit.requester import consent_may_cure
from jupyter_fsbroker.serverkit.writing import ContentCap


@pytest.fixture
def core_connection(tmp_path: Path) -> Iterator[Any]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "granted").mkdir()
    (data / "ungranted.txt").write_text("not granted")
    limits = Limits(max_chunk_bytes=1024, default_read_bytes=1024)
    config = BrokerConfig(
        lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"), limits=limits
    )
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data/granted", ops=("read", "write"))
        yield broker.connect("answers")


def _answer(conn: Any, method: str, params: dict[str, Any]) -> kit.FilesRequestError:
    with pytest.raises(core_errors.FilesError) as info:
        conn.handle(method, params)
    wire = core_errors.to_jsonrpc_error(info.value)
    return kit.error_from_jsonrpc(wire["code"], wire["message"], wire["data"], method=method)


def test_a_missing_grant_reads_as_one_consent_may_cure(core_connection: Any) -> None:
    mine = _answer(core_connection, "files/read", {"path": "data/ungranted.txt"})
    assert isinstance(mine, kit.PermissionDeniedError)
    assert mine.reason == "not_granted"
    assert consent_may_cure(mine)


def test_the_kit_learns_the_cores_cap_from_its_too_large_answer(core_connection: Any) -> None:
    params = {"path": "data/granted/big.bin", "content": "x" * 2000, "encoding": "utf-8"}
    mine = _answer(core_connection, "files/write", params)
    assert isinstance(mine, kit.TooLargeError)
    assert mine.reason == "request_too_large"
    cap = ContentCap()
    assert cap.learn(mine) and cap.limit == 1024, f"the kit did not learn the core's cap from {mine.data}"
