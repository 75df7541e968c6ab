"""A long tool call shows it is alive, in a real kernel: the running line under its cell with Cancel,
the panel's list of calls in flight with ``cancel_call``, and the kernel's status kept Busy.

A call that Cancel stops ends with ``CallCancelled``, one short styled message (no frames of the
package), and the kernel goes on: the same connection answers the next call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from tests.support.panel_comm import Panel

from .conftest import STDIO_COMMAND, analysis_kernel
from .harness import Kernel, Result, Widget

pytestmark = pytest.mark.slow

#: A call that runs until something stops it.
WATCH = 'analysis.call_tool("watch_changes", {"path": "data", "seconds": 300})'
AWATCH = 'await analysis.acall_tool("watch_changes", {"path": "data", "seconds": 300})'
VIEW = "application/vnd.jupyter.widget-view+json"
RUNNING = re.compile(r"running: analysis · watch_changes · (\d+) s")


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    kernel = analysis_kernel(start_kernel, pythonpath=True)
    kernel.run('broker.allow("data", ("read", "watch"))')
    yield kernel


def _plain(lines: list[str]) -> list[str]:
    return [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]


def _seconds(kernel: Kernel, line: Widget) -> int:
    found = RUNNING.search(kernel.text_of(line))
    assert found is not None, kernel.text_of(line)
    return int(found[1])


def _cancelled(cell: Result) -> list[str]:
    """The cell's error: a CallCancelled, shown as a few plain lines with no frames of the package."""
    failure = cell.failure
    assert failure is not None and failure["ename"] == "CallCancelled", cell
    lines = _plain(failure["traceback"])
    assert len(lines) <= 3, lines
    assert not any("jupyter_fsbroker" in line or "File " in line for line in lines), lines
    return lines


def _statuses(kernel: Kernel, since: int) -> list[tuple[str, str, str]]:
    """``(state, parent msg_type, parent msg_id)`` of each status message read since *since*."""
    return [
        (
            m["content"]["execution_state"],
            m["parent_header"].get("msg_type", ""),
            m["parent_header"].get("msg_id"),
        )
        for m in kernel.iopub_log[since:]
        if m["msg_type"] == "status"
    ]


def test_a_long_call_shows_its_running_line_and_cancel_ends_it_with_call_cancelled(kernel: Kernel) -> None:
    subshell = kernel.create_subshell()
    cell = kernel.submit(WATCH)
    line = kernel.wait_widget("fsbroker-running", 30)

    # Under the calling cell: in the panel that cell displayed.
    def under_the_cell() -> bool:
        shown = {d["data"].get(VIEW, {}).get("model_id") for d in cell.displays}
        panels = [p for p in kernel.find_widgets("fsbroker-call") if p.comm_id in shown]
        return any(line.comm_id in {w.comm_id for w in kernel.descendants(p)} for p in panels)

    kernel.wait_for(under_the_cell, 30, "the running line in the panel the calling cell displayed")
    first = _seconds(kernel, line)
    assert first >= 1  # after the grace only
    kernel.wait_for(lambda: _seconds(kernel, line) > first, 30, "the running line's seconds to tick")

    kernel.click(kernel.child(line, "fsbroker-cancel-call"), subshell_id=subshell)
    kernel.wait(cell, 30)
    (message, hint) = _cancelled(cell)
    assert re.fullmatch(r"CallCancelled: analysis · watch_changes was cancelled after \d+ s", message), (
        message
    )
    assert hint == "(the full traceback: %fsbroker why)"
    kernel.wait_for(lambda: line.closed, 30, "the running line to go when its call ended")
    assert kernel.value("broker.running_calls.running()") == ()
    # The kernel and the connection go on.
    done = kernel.run(
        'r = analysis.call_tool("watch_changes", {"path": "data", "seconds": 0.1})\nprint(r.is_error)'
    )
    assert done.stdout.strip() == "False"


def test_the_panel_lists_a_call_in_flight_and_its_cancel_call_stops_an_async_cell(kernel: Kernel) -> None:
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    assert panel.state()["calls"] == []
    cell = kernel.submit(AWATCH)
    state = panel.state(lambda s: s["calls"])
    (call,) = state["calls"]
    conn = state["connections"][0]
    assert (call["server"], call["tool"], call["connectionId"]) == ("analysis", "watch_changes", conn["id"])
    assert call["startedAt"].endswith("Z") and call["elapsed"] >= 0

    result = panel.act("cancel_call", call=call["id"])
    assert result["ok"] and result["message"] == "Cancelling analysis · watch_changes.", result
    kernel.wait(cell, 30)
    _cancelled(cell)
    panel.state(lambda s: s["calls"] == [])
    again = panel.act("cancel_call", call=call["id"])
    assert not again["ok"] and again["message"] == "That call already ended."
    assert kernel.value("1 + 1") == 2


#: One cell loads the extension, connects and blocks in a call (the README's "In a notebook").
FIRST_CELL = (
    "%load_ext jupyter_fsbroker\n"
    "import os, jupyter_fsbroker as fsb\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("./data", name="data")\n'
    'broker.allow("data", ("read", "watch"))\n'
    "env = {'PYTHONPATH': os.environ['PYTHONPATH']}\n"
    f"analysis = broker.connect('analysis', command={STDIO_COMMAND}, env=env)\n"
    f"{WATCH}"
)


def test_the_status_stays_busy_while_a_cell_runs_and_is_left_alone_after_it(
    start_kernel: Callable[..., Kernel],
) -> None:
    kernel = start_kernel()
    cell = kernel.submit(FIRST_CELL)
    kernel.wait_widget("fsbroker-running", 60)
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    panel.state(lambda s: s["calls"])
    mark = len(kernel.iopub_log)
    panel.send({"version": 1, "type": "refresh"})

    def republished() -> list[tuple[str, str, str]] | None:
        seen = _statuses(kernel, mark)
        ends = [i for i, s in enumerate(seen) if s[:2] == ("idle", "comm_msg")]
        return seen if ends and ("busy", "execute_request", cell.msg_id) in seen[ends[0] :] else None

    seen = kernel.wait_for(republished, 30, "the cell's busy again after the panel's idle")
    # The panel's own request still ends with its idle; the cell's busy is what a frontend reads last.
    assert seen[-1] == ("busy", "execute_request", cell.msg_id), seen
    assert not cell.done

    # A cell run on a subshell meanwhile ends with its own idle; the blocked cell's busy follows it.
    side = len(kernel.iopub_log)
    other = kernel.wait(kernel.submit("print('beside')", subshell_id=panel.subshell_id), 30).check()
    kernel.wait_for(
        lambda: _statuses(kernel, side)[-1:] == [("busy", "execute_request", cell.msg_id)],
        30,
        "the blocked cell's busy after the subshell cell's idle",
    )
    assert ("idle", "execute_request", other.msg_id) in _statuses(kernel, side)
    assert not cell.done

    panel.act("cancel_call", call=panel.state(lambda s: s["calls"])["calls"][0]["id"])
    kernel.wait(cell, 30)
    assert _statuses(kernel, mark)[-1] == ("idle", "execute_request", cell.msg_id)

    # No cell runs: the panel's idle is the last word until the next cell starts.
    after = len(kernel.iopub_log)
    panel.send({"version": 1, "type": "refresh"})
    kernel.wait_for(
        lambda: ("idle", "comm_msg") in [s[:2] for s in _statuses(kernel, after)], 30, "the panel's idle"
    )
    nxt = kernel.run("print('next')")
    between = [s for s in _statuses(kernel, after) if s[2] != nxt.msg_id]
    assert [s[0] for s in between if s[1] == "comm_msg"][-1] == "idle"
    assert all(s[1] != "execute_request" for s in between), between

    # Unloading removes the hook from the kernel: the class's own method answers again.
    kernel.run("%unload_ext jupyter_fsbroker")
    assert kernel.value("'_publish_status' in vars(get_ipython().kernel)") is False
