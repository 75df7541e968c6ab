"""What a consent request tells about each asked path, and who asks: the facts a prompt shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.consent_facts import (
    COUNT_CAP,
    Asker,
    asker_text,
    covers_text,
    path_facts,
    size_text,
)
from jupyter_fsbroker.core.paths import parse


@pytest.fixture
def tree(data: Path) -> Path:
    (data / "report.md").write_bytes(b"x" * 12_000)
    (data / "raw").mkdir()
    for name in ("a.csv", "b.csv", "c.csv"):
        (data / "raw" / name).write_text("a\n")
    (data / "raw" / "deeper").mkdir()
    (data / "raw" / "deeper" / "d.csv").write_text("d\n")
    return data


def _asked(broker: Broker, params: dict[str, object], asker: Asker | None = None) -> ConsentRequest:
    """The request the user is shown for *params* (denied, so nothing is granted)."""
    seen: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        seen.append(request)
        return ConsentDecision.deny()

    conn = broker.connect("analysis", consenter=CallbackConsenter(decide))
    if asker is not None:
        conn.access.asker = asker
    try:
        assert conn.handle("files/consent", params)["granted"] is False
    finally:
        conn.close()
    (request,) = seen
    return request


def test_the_whole_root_says_it_is_the_shared_folder_and_how_many_files(broker: Broker, tree: Path) -> None:
    request = _asked(broker, {"requestedPaths": ["data"], "operations": ["read", "delete"]})
    (item,) = request.items
    assert item.facts.kind == "folder" and item.facts.whole_root
    assert item.facts.files == 5 and not item.facts.more
    assert covers_text(item.facts) == "the whole shared folder: 5 files, subfolders included"
    assert item.facts.location == str(tree)
    # Delete is destructive: marked, and the prompts start it unticked; read keeps its default.
    assert item.destructive(("read", "delete")) == ("delete",)
    assert item.ticked(("read", "delete")) == ("read",)
    shown = request.to_json()["items"][0]
    assert shown["destructive"] == ["delete"] and shown["ticked"] == ["read"]
    assert shown["covers"] == "the whole shared folder: 5 files, subfolders included"
    assert shown["effects"] == {"delete": "can delete 5 files"}
    assert shown["location"] == str(tree)


def test_a_subfolder_is_a_folder_not_the_shared_one(broker: Broker, tree: Path) -> None:
    request = _asked(broker, {"requestedPaths": ["data/raw"], "operations": ["read"]})
    assert covers_text(request.items[0].facts) == "a folder: 4 files, subfolders included"


def test_counting_stops_at_the_cap(broker: Broker, tree: Path) -> None:
    facts = path_facts(parse("data/raw", broker.roots), cap=2)
    assert (facts.files, facts.more) == (2, True)
    assert covers_text(facts) == "a folder: more than 2 files, subfolders included"
    assert COUNT_CAP == 10_000


def test_a_write_says_whether_it_creates_or_replaces(broker: Broker, tree: Path) -> None:
    request = _asked(
        broker, {"requestedPaths": ["data/report.md", "data/new.md"], "operations": ["read", "write"]}
    )
    existing, missing = request.items
    assert (existing.facts.kind, existing.facts.size) == ("file", 12_000)
    assert missing.facts.kind == "missing"
    items = request.to_json()["items"]
    assert items[0]["effects"] == {"write": "replaces a 12 kB file"}
    assert items[0]["destructive"] == ["write"] and items[0]["ticked"] == ["read"]
    assert items[1]["effects"] == {"write": "creates data/new.md"}
    assert items[1]["destructive"] == [] and items[1]["ticked"] == ["read", "write"]
    assert items[0]["covers"] == "a 12 kB file" and items[1]["covers"] == "does not exist yet"


def test_who_asks_names_the_server_where_it_runs_and_the_sandbox(broker: Broker, tree: Path) -> None:
    local = Asker("Sales Analysis", "local", "", True)
    request = _asked(broker, {"requestedPaths": ["data"], "operations": ["read"]}, local)
    assert request.who == 'the server calls itself "Sales Analysis" · local program · sandboxed'
    assert request.to_json()["asker"]["text"] == request.who
    assert request.until_disconnect == "until you disconnect analysis"
    remote = Asker("analysis", "remote", "mcp.example.org", None)
    assert asker_text(remote, "analysis") == "remote, at mcp.example.org"
    assert asker_text(Asker(), "analysis") == ""
    assert asker_text(Asker("", "local", "", False), "a") == "local program · not sandboxed"


@pytest.mark.parametrize(
    ("size", "text"),
    [(1, "1 byte"), (999, "999 bytes"), (1000, "1.0 kB"), (12_000, "12 kB"), (3_400_000, "3.4 MB")],
)
def test_sizes_read_as_file_managers_show_them(size: int, text: str) -> None:
    assert size_text(size) == text
