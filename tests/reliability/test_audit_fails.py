"""The audit file stops taking writes in the middle of a run: with ``audit_required`` writes are refused.

A brokering process of its own answers a real server over stdio. After a first write, the
test lowers that process's file size limit (``RLIMIT_FSIZE``, with ``prlimit``) to the size its
audit file has then, so the file can grow no more, as on a full disk: an append fails with
EFBIG (or is cut short at the limit), while a small file elsewhere can still be written.
With ``audit_required`` the next write is refused (PERMISSION_DENIED ``audit_unavailable``)
and the file it names is unchanged; without it the write is done and a warning is logged,
as before. Once the limit is lifted, both work again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.brokerproc import BrokerProcess

resource = pytest.importorskip("resource")
if not hasattr(resource, "prlimit"):  # pragma: no cover - not Linux
    pytest.skip("no prlimit here", allow_module_level=True)


def write(proc: BrokerProcess, content: str) -> dict[str, object]:
    answer: dict[str, object] = proc.call(
        "writer", "request", method="files/write", params={"path": "data/target.txt", "content": content}
    )
    return answer


@pytest.mark.parametrize("required", [True, False], ids=["required", "not-required"])
def test_the_audit_file_fails_in_the_middle_of_a_run(tmp_path: Path, required: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = data / "target.txt"
    target.write_text("old")
    audit = tmp_path / "audit.jsonl"
    proc = BrokerProcess(
        tmp_path,
        {"data": data},
        allow=["data:read,write"],
        label=f"audit-{'required' if required else 'optional'}",
        audit_path=audit,
        audit_required=required,
    )
    try:
        proc.connect("writer")
        assert write(proc, "one")["result"]["size"] == 3  # type: ignore[index]
        assert target.read_text() == "one"
        size = audit.stat().st_size
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

        answer = write(proc, "two")
        if required:
            error = answer["error"]
            assert isinstance(error, dict)
            assert (error["name"], error["code"], error["reason"]) == (
                "PERMISSION_DENIED",
                -32101,
                "audit_unavailable",
            )
            assert target.read_text() == "one"
        else:
            assert "result" in answer, answer
            assert target.read_text() == "two"
        assert "cannot write to the audit file" in proc.stderr()
        assert audit.stat().st_size == size  # not even part of a line was left

        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        assert "result" in write(proc, "three")
        assert target.read_text() == "three"
        # The in-memory log has every request's record, the refused one's too.
        assert proc.stats()["audit"]["writer"]["denied"] == (1 if required else 0)
    finally:
        proc.exit()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]  # every line whole
    intents = {line["auditId"] for line in lines if line.get("phase") == "intent"}
    records = [line for line in lines if "phase" not in line and line["method"] == "files/write"]
    # The second write's record could not be written, whether it ran or not: the file has two.
    assert [r["decision"] for r in records] == ["allow", "allow"]
    if required:  # each announced first, and only those that ran
        assert intents == {r["auditId"] for r in records}
    else:
        assert intents == set() and all("auditId" not in r for r in records)
