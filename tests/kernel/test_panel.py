"""The JupyterLab panel's comm target in a real kernel: snapshots, actions, versions, a blocked cell.

A test plays the panel: it opens a comm to ``jupyter_fsbroker.panel`` the way
the extension does (on a kernel subshell, as JupyterLab 4.6 sends comms), reads
the snapshots the kernel sends, and sends actions. The hard case is the point:
while the main shell is blocked in ``call_tool``, Disconnect and a consent
answer sent on the subshell must take effect at once, and the blocked cell
must return because of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.panel_comm import Panel

from .conftest import STDIO_COMMAND, connect_stdio, load
from .harness import Kernel, Result

pytestmark = pytest.mark.slow


@pytest.fixture
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    kernel = start_kernel()
    yield kernel


def consent_on_the_panel(kernel: Kernel, call: str) -> tuple[Panel, Result, dict[str, Any]]:
    """A cell that runs *call* of ``analysis`` (connected here), blocked on a consent: the panel (on a
    subshell) that shows it, the cell, and the consent as the panel's snapshot has it."""
    load(kernel)
    connect_stdio(kernel)
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    cell = kernel.submit(call)
    consent: dict[str, Any] = panel.state(lambda s: s["consents"])["consents"][0]
    return panel, cell, consent


def approve_read(panel: Panel, consent: dict[str, Any]) -> None:
    """Approve reading the one path of *consent* on *panel*; the result must say so."""
    (item,) = consent["items"]
    result = panel.act(
        "answer_consent",
        consent=consent["id"],
        approved=[{"path": item["path"], "operations": ["read"]}],
        duration=None,
    )
    assert result["ok"] and result["message"].startswith("Approved read on data/sales.csv"), result


def test_a_kernel_without_the_extension_closes_the_panel_and_nothing_breaks(kernel: Kernel) -> None:
    panel = Panel(kernel)
    kernel.wait_for(lambda: panel.closed() is not None, 30, "the kernel to close a comm without a target")
    assert panel.messages() == []
    assert kernel.run("print(1 + 1)").stdout.strip() == "2"


def test_the_snapshot_lists_roots_connections_grants_and_kept_locks(kernel: Kernel) -> None:
    load(kernel)
    kernel.run(
        f"analysis = broker.connect('analysis', command={STDIO_COMMAND})\n"
        'broker.allow("data", ("read", "write"))\n'
        'kept = analysis.connection.handle("files/read", {"path": "data/sales.csv", "keepLocked": True})'
    )
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    state = panel.state(lambda s: s["locks"])
    assert [m["version"] for m in panel.messages()] == [1] * len(panel.messages())
    assert [r["name"] for r in state["roots"]] == ["data"]
    (conn,) = state["connections"]
    assert (conn["name"], conn["transport"], conn["state"]) == ("analysis", "stdio", "open")
    (grant,) = state["grants"]
    assert (grant["path"], grant["operations"], grant["connectionId"]) == ("data", ["read", "write"], None)
    (lock,) = state["locks"]
    assert (lock["path"], lock["server"], lock["connectionId"]) == ("data/sales.csv", "analysis", conn["id"])
    assert [(a["method"], a["outcome"]) for a in state["activity"]] == [
        ("files/read", {"word": "allowed", "tone": "green"})
    ]
    assert state["subshells"] == {"supported": True, "used": True}
    assert state["consents"] == [] and state["closed"] is False

    # Revoke and Force release, from the panel: the next snapshot shows them gone.
    assert panel.act("force_unlock", lock=lock["id"])["ok"]
    assert panel.act("revoke", grant=grant["id"])["ok"]
    state = panel.state(lambda s: not s["locks"] and not s["grants"])
    again = panel.act("force_unlock", lock=lock["id"])
    assert not again["ok"] and "already released" in again["message"]
    assert kernel.value("analysis.grants()") == ()


def test_disconnect_on_a_subshell_ends_a_call_that_blocks_the_main_shell(kernel: Kernel) -> None:
    load(kernel)
    kernel.run(
        f"analysis = broker.connect('analysis', command={STDIO_COMMAND})\n"
        'broker.allow("data", ("read", "watch"))'
    )
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    conn = panel.state(lambda s: s["connections"])["connections"][0]
    cell = kernel.submit('analysis.call_tool("watch_changes", {"path": "data", "seconds": 300})')
    watching = panel.state(lambda s: any(a["method"] == "files/watch" for a in s["activity"]))
    assert watching["connections"][0]["state"] == "open"
    assert not cell.done

    result = panel.act("disconnect", connection=conn["id"])
    assert result["ok"] and result["message"] == "Disconnected analysis."
    kernel.wait(cell, 30)
    failure = cell.failure
    assert failure is not None and failure["ename"] == "ConnectionClosedError", cell
    assert "closed by the user" in failure["evalue"] or "cancelled" in failure["evalue"], failure
    state = panel.state(lambda s: s["connections"][0]["state"] == "closed")
    assert state["connections"][0]["closeReason"] == "closed by the user"


def test_a_disconnect_shows_closing_at_once_and_closed_once_done_while_the_loop_is_busy(
    kernel: Kernel,
) -> None:
    load(kernel)
    connect_stdio(kernel)
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    conn = panel.state(lambda s: s["connections"])["connections"][0]
    # The broker's loop busy for a while (a large transfer, a loaded machine): the kill switch ends
    # the connection's grants at once, but the transport is torn down only when the loop gets to it.
    kernel.run("import time\nanalysis.server._life._loop.call_soon_threadsafe(time.sleep, 3)")

    result = panel.act("disconnect", connection=conn["id"])
    assert result["ok"], result

    def next_snapshot() -> dict[str, Any] | None:
        messages = panel.messages()
        return next((m for m in messages[messages.index(result) :] if m.get("type") == "snapshot"), None)

    after = kernel.wait_for(next_snapshot, 30, "the snapshot that follows the result")
    assert after["state"]["connections"][0]["state"] in ("closing", "closed"), after["state"]["connections"]
    # Nothing else happens in the kernel: the panel still learns that the connection ended.
    state = panel.state(lambda s: s["connections"][0]["state"] == "closed", timeout=20)
    assert state["connections"][0]["closeReason"] == "closed by the user"
    assert kernel.value("analysis.state") == "closed"


def test_a_consent_answered_on_the_panel_unblocks_a_sync_cell(kernel: Kernel) -> None:
    call = 'analysis.call_tool("profile_csv", {"path": "data/sales.csv"})["isError"]'
    panel, cell, consent = consent_on_the_panel(kernel, call)
    assert consent["server"] == "analysis"
    (item,) = consent["items"]
    assert (item["rel"], item["approvable"], item["grantable"]) == ("data/sales.csv", True, ["read"])
    assert not cell.done

    approve_read(panel, consent)
    assert kernel.wait(cell, 60).check().text == "False"
    state = panel.state(lambda s: s["outcomes"])
    assert (state["outcomes"][-1]["outcome"], state["outcomes"][-1]["answeredBy"]) == ("approved", "panel")
    # Too late: the request no longer waits, and the panel is told how it ended.
    late = panel.act("answer_consent", consent=consent["id"], approved=[], duration=None)
    assert not late["ok"] and "no longer waits: Approved read" in late["message"]


def test_an_answer_the_views_thread_has_not_seen_yet_says_how_the_request_ended(kernel: Kernel) -> None:
    # The order a loaded machine may take: the views' thread (busy here until the gate opens) has
    # not told the panel's state of the request yet when the panel, which lists it, answers it.
    load(kernel)
    connect_stdio(kernel)
    kernel.run(
        "%config FSBroker.show_progress = False\n"  # the progress widget is built on the views' thread
        "import threading\n"
        "views_gate = threading.Event()\n"
        "broker.views_thread.post(views_gate.wait)"
    )
    subshell = kernel.create_subshell()
    panel = Panel(kernel, subshell_id=subshell)
    panel.state()
    cell = kernel.submit('analysis.call_tool("profile_csv", {"path": "data/sales.csv"})["isError"]')

    def listed() -> dict[str, Any] | None:
        # The views' thread sends nothing now: ask for each snapshot, one at a time, on the subshell.
        snapshots = [m["state"] for m in panel.messages() if m.get("type") == "snapshot"]
        if snapshots[-1]["consents"]:
            return dict(snapshots[-1]["consents"][0])
        if len(snapshots) > asked[0]:
            asked[0] = len(snapshots)
            panel.send({"version": 1, "type": "refresh"})
        return None

    asked = [0]
    consent = kernel.wait_for(listed, 30, "a snapshot that lists the request")
    approve_read(panel, consent)
    # Let the views' thread catch up (it tells the panel's state of the request only now), then ask.
    release = "views_gate.set()\nbroker.views_thread.call(lambda: None)"
    kernel.wait(kernel.submit(release, subshell_id=subshell), 30).check()
    assert kernel.wait(cell, 60).check().text == "False"
    seen = len(panel.messages())
    panel.send({"version": 1, "type": "refresh"})
    state = panel.state(lambda s: len(panel.messages()) > seen)
    assert [(o["outcome"], o["answeredBy"]) for o in state["outcomes"]] == [("approved", "panel")]


def test_another_protocol_version_is_refused_in_words_the_panel_can_read(kernel: Kernel) -> None:
    load(kernel)
    future = Panel(kernel, version=2)
    closed = kernel.wait_for(future.closed, 30, "the kernel to refuse a panel of another version")
    assert closed["code"] == "version_mismatch" and closed["supported"] == [1]
    assert closed["version"] == 1 and "panel protocol 1" in closed["message"]

    panel = Panel(kernel)  # on the main shell: the kernel says its messages could wait for a cell
    assert panel.state()["subshells"] == {"supported": True, "used": False}
    panel.send({"version": 7, "type": "refresh"})
    error = kernel.wait_for(
        lambda: next((m for m in panel.messages() if m.get("type") == "error"), None), 30, "an error"
    )
    assert error["code"] == "version_mismatch"
    panel.send({"version": 1, "type": "action", "id": "x", "action": "format_disk", "target": "/"})
    kernel.wait_for(
        lambda: any(m.get("code") == "bad_message" for m in panel.messages()), 30, "a bad_message error"
    )


def test_reload_ext_closes_the_panels_with_a_reason_and_a_new_panel_attaches(kernel: Kernel) -> None:
    load(kernel)
    panel = Panel(kernel)
    panel.state()
    kernel.run("%reload_ext jupyter_fsbroker")
    closed = kernel.wait_for(panel.closed, 30, "the panel's comm to close at %reload_ext")
    assert closed["type"] == "closing" and "unloaded" in closed["reason"]
    again = Panel(kernel)  # the new broker's panel
    kernel.run('import os\nos.makedirs("extra")\nfsb.get_broker().add_root("extra", name="extra")')
    # %reload_ext may keep the shared folders, so wait for the snapshot that shows the new one
    again.state(lambda s: "extra" in [root["name"] for root in s["roots"]])
    kernel.run("%unload_ext jupyter_fsbroker")
    kernel.wait_for(again.closed, 30, "the panel's comm to close at %unload_ext")
    gone = Panel(kernel)
    kernel.wait_for(gone.closed, 30, "no target once unloaded")


def test_a_per_path_answer_grants_each_path_only_what_was_chosen(kernel: Kernel) -> None:
    call = 'analysis.call_tool("write_report", {"path": "data/sales.csv"}).data["report"]'
    panel, cell, consent = consent_on_the_panel(kernel, call)
    asked = {item["rel"]: item["operations"] for item in consent["items"]}
    assert asked == {"data/sales.csv": ["read"], "data/sales.report.md": ["write"]}

    by_rel = {item["rel"]: item["path"] for item in consent["items"]}
    result = panel.act(
        "answer_consent",
        consent=consent["id"],
        approved=[
            {"path": by_rel["data/sales.csv"], "operations": ["read"]},
            {"path": by_rel["data/sales.report.md"], "operations": ["write"]},
        ],
        duration=None,
    )
    assert result["ok"], result
    message = result["message"]
    assert "read on data/sales.csv" in message and "write on data/sales.report.md" in message, message
    assert kernel.wait(cell, 60).check().text == "'data/sales.report.md'"
    grants = {g["path"]: g["operations"] for g in panel.state(lambda s: len(s["grants"]) == 2)["grants"]}
    assert grants == {"data/sales.csv": ["read"], "data/sales.report.md": ["write"]}
