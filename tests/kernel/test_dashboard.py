"""The dashboard's kill switch, revocation, and the live change feed, in a real kernel."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from .conftest import (
    ASK_BETWEEN_CELLS,
    PROFILE,
    PROFILE_RAW,
    STDIO_COMMAND,
    held_lock_files,
    load,
    shown_prompt,
)
from .harness import Kernel, Widget


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    kernel = start_kernel()
    load(kernel)
    kernel.run(f"analysis = broker.connect('analysis', command={STDIO_COMMAND})")
    kernel.run("%fsbroker status")  # the dashboard, shown once like a user would
    yield kernel


def dashboard(kernel: Kernel) -> Widget:
    return kernel.wait_widget("fsbroker-dashboard")


def disconnect_button(kernel: Kernel, name: str, timeout: float = 15.0) -> Widget:
    """The enabled Disconnect button of the dashboard row that names connection *name*."""

    def find() -> Widget | None:
        for row in kernel.descendants(dashboard(kernel)):
            parts = [
                kernel.widgets.get(ref.removeprefix("IPY_MODEL_")) for ref in row.state.get("children", [])
            ]
            buttons = [w for w in parts if w is not None and "fsbroker-disconnect" in w.classes]
            texts = [str(w.state.get("value", "")) for w in parts if w is not None]
            if (
                buttons
                and any(f"<b>{name}</b>" in text for text in texts)
                and not buttons[0].state.get("disabled")
            ):
                return buttons[0]
        return None

    button: Widget = kernel.wait_for(find, timeout, f"the dashboard's Disconnect button for {name}")
    return button


def test_disconnect_ends_the_connection_and_releases_its_locks(kernel: Kernel) -> None:
    kernel.run(
        f"victim = broker.connect('victim', command={STDIO_COMMAND})\nbroker.allow('data/raw', ops=('read',))"
    )
    kernel.run("victim.connection.handle('files/read', {'path': 'data/raw/one.csv', 'keepLocked': True})")
    assert kernel.value("[(l.path, l.owner_label) for l in broker.locks() if l.kept]") == [
        ("data/raw/one.csv", "victim")
    ]
    (lock_file,) = held_lock_files(kernel)
    assert lock_file.exists()
    kernel.click(disconnect_button(kernel, "victim"))
    assert kernel.value("victim.wait_closed(10)") is True
    assert kernel.value("(victim.state, victim.close_reason)") == ("closed", "closed by the user")
    assert kernel.value("broker.locks()") == ()
    assert not lock_file.exists()
    assert kernel.value("analysis.state") == "open"


def test_disconnect_works_while_a_cell_blocks_on_the_same_connection(kernel: Kernel) -> None:
    kernel.run(f"doomed = broker.connect('doomed', command={STDIO_COMMAND})")
    subshell = kernel.create_subshell()
    cell = kernel.submit("doomed.call_tool('profile_csv', {'path': 'data/sales.csv'})")
    shown_prompt(kernel)  # the call waits for consent: the main shell is blocked
    kernel.click(disconnect_button(kernel, "doomed"), subshell_id=subshell)
    kernel.wait(cell, 30)
    assert cell.failure is not None and cell.failure["ename"] == "ConnectionClosedError", cell.failure
    assert kernel.value("doomed.state") == "closed"


def test_revoke_takes_effect_for_the_next_operation(kernel: Kernel) -> None:
    subshell = kernel.create_subshell()
    cell = kernel.submit(f"print({PROFILE}.data['rows'])")
    kernel.click(kernel.child(shown_prompt(kernel), "fsbroker-approve"), subshell_id=subshell)
    kernel.wait(cell, 30).check()
    assert cell.stdout.strip() == "4"
    assert kernel.value("[g.path for g in analysis.grants() if g.connection_id]") == ["data/sales.csv"]

    assert (
        "Revoked 1 grant of analysis on data/sales.csv"
        in kernel.run("%fsbroker revoke analysis data/sales.csv").stdout
    )
    error = kernel.run_fail("analysis.connection.handle('files/stat', {'path': 'data/sales.csv'})")
    assert error["ename"] == "PermissionDenied" and "no read access" in error["evalue"]
    cell = kernel.submit(f"print({PROFILE_RAW}.is_error)")  # the server is refused and asks again
    kernel.click(kernel.child(shown_prompt(kernel), "fsbroker-deny"), subshell_id=subshell)
    kernel.wait(cell, 30).check()
    assert cell.stdout.strip() == "True"


def test_change_feed_shows_an_external_edit(kernel: Kernel) -> None:
    kernel.run("%fsbroker allow data read,watch")
    kernel.run(
        "import asyncio\n"
        "watching = asyncio.ensure_future(\n"
        "    analysis.acall_tool('watch_changes', {'path': 'data', 'seconds': 120})\n"
        ")"
    )
    feed = kernel.child(dashboard(kernel), "fsbroker-changes")
    target = kernel.cwd / "data" / "sales.csv"
    deadline = time.monotonic() + 60
    edits = 0
    while "data/sales.csv" not in str(feed.state.get("value", "")):
        assert time.monotonic() < deadline, "the change feed never showed the edit"
        with target.open("a", encoding="utf-8") as f:  # an edit made outside the notebook
            f.write(f"edit,{edits}\n")
        edits += 1
        kernel.drain(0.3)
    assert "modified" in str(feed.state["value"]) and "analysis" in str(feed.state["value"])
    kernel.run("watching.cancel()")
    kernel.wait_for(lambda: kernel.value("watching.done()"), 60, "the watch to stop")
    assert kernel.value("analysis.state") == "open"


def test_consent_outside_a_call_appears_in_the_dashboard(kernel: Kernel) -> None:
    kernel.run(ASK_BETWEEN_CELLS)
    area = kernel.child(dashboard(kernel), "fsbroker-consent-area")

    def prompt() -> Widget | None:
        found = [w for w in kernel.descendants(area) if "fsbroker-consent" in w.classes]
        return next((w for w in found if w.comm_id not in kernel.seen), None)

    shown: Widget = kernel.wait_for(prompt, 30, "a consent prompt in the dashboard")
    kernel.seen.add(shown.comm_id)
    kernel.click(kernel.child(shown, "fsbroker-approve"))
    assert kernel.value("asker.join(60) or answers[0]['approvedPaths']") == ["data/raw"]
