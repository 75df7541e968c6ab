"""What the cell's consent prompt says about each path and who asks; destructive operations start unticked."""

from __future__ import annotations

from concurrent.futures import Future

from jupyter_fsbroker.core.consent import ConsentDecision, ConsentItem, ConsentRequest
from jupyter_fsbroker.core.consent_facts import Asker, PathFacts
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.consent_rows import DESTRUCTIVE_CLASS

ROOT = PathFacts("folder", True, "data", "/srv/share/data", files=1204)
REPORT = PathFacts("file", False, "data", "/srv/share/data/report.md", size=12_000)
NEW = PathFacts("missing", False, "data", "/srv/share/data/x.md")


def _request(*items: ConsentItem, operations: tuple[str, ...]) -> ConsentRequest:
    return ConsentRequest(
        server="analysis",
        connection_id="c0",
        message="Tidy up",
        items=items,
        operations=operations,
        timeout=120.0,
        asker=Asker("Sales Analysis", "remote", "mcp.example.org", None),
    )


def _prompt(request: ConsentRequest) -> tuple[ConsentPrompt, Future[ConsentDecision]]:
    future: Future[ConsentDecision] = Future()
    return ConsentPrompt(request, future), future


def test_delete_on_the_whole_folder_starts_unticked_and_says_what_it_covers() -> None:
    prompt, _ = _prompt(
        _request(ConsentItem("data", "data", True, facts=ROOT), operations=("read", "delete"))
    )
    try:
        ops = prompt.path_ops[0]
        assert (ops["read"].value, ops["delete"].value) == (True, False)
        assert DESTRUCTIVE_CLASS in ops["delete"]._dom_classes
        assert DESTRUCTIVE_CLASS not in ops["read"]._dom_classes
        note = prompt.children[1].children[1].value
        assert "the whole shared folder: 1,204 files, subfolders included" in note
        assert "delete: can delete 1,204 files — destructive, starts unticked" in note
        # The real location on hover.
        assert 'title="/srv/share/data"' in note
        # Who asks: the user's label, the server's own name, where it runs.
        header = prompt.header.value.replace("&quot;", '"')
        assert "<b>analysis</b> asks for access to your files" in header
        assert 'the server calls itself "Sales Analysis" · remote, at mcp.example.org' in header
        assert prompt.duration.options[0] == ("until you disconnect analysis", 0)
        # Approve grants what is ticked: read only.
        assert prompt.selected_decision() == ConsentDecision(("data",), ("read",))
    finally:
        prompt.close()


def test_approve_with_nothing_ticked_cannot_grant() -> None:
    prompt, future = _prompt(_request(ConsentItem("data", "data", True, facts=ROOT), operations=("delete",)))
    try:
        assert prompt.path_ops[0]["delete"].value is False
        assert prompt.approve_button.disabled
        prompt.approve_button.click()
        assert not future.done()
        prompt.path_ops[0]["delete"].value = True  # ticked on purpose: now it can be granted
        assert not prompt.approve_button.disabled
        prompt.approve_button.click()
        assert future.result(timeout=0) == ConsentDecision(("data",), ("delete",))
    finally:
        prompt.close()


def test_a_write_says_whether_it_creates_or_replaces() -> None:
    prompt, _ = _prompt(
        _request(
            ConsentItem("data/report.md", "data/report.md", True, facts=REPORT),
            ConsentItem("data/x.md", "data/x.md", True, facts=NEW),
            operations=("write",),
        )
    )
    try:
        replace_note = prompt.children[1].children[1].value
        create_note = prompt.children[2].children[1].value
        assert "write: replaces a 12 kB file — destructive, starts unticked" in replace_note
        assert "write: creates data/x.md" in create_note and "destructive" not in create_note
        assert [ops["write"].value for ops in prompt.path_ops] == [False, True]
        chosen = prompt.selected_decision()
        assert chosen.operations_for("data/x.md") == ("write",)
        assert chosen.operations_for("data/report.md") == ()
    finally:
        prompt.close()
