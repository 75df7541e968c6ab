"""A long tool call in a real page: the kernel stays Busy, the call shows it runs, and Cancel stops it.

While ``watch_changes`` blocks a cell, the page's own traffic with the kernel
(the sidebar's actions, sent on a kernel subshell) makes ipykernel publish an
``idle`` for each message; the kernel then says ``busy`` again for the running
cell, so the notebook's kernel status reads Busy for the whole call — the
toolbar's status indicator and the status bar in JupyterLab, the tab's
favicon in Notebook 7. Under the cell, ``running: analysis · watch_changes ·
N s`` ticks with a Cancel button; the sidebar's Running section lists the
call with its seconds and its own Cancel, which ends the call with
``CallCancelled``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import Notebook
from .test_sidebar import SERVER, SHOW_TIMEOUT_MS, run_command, share_data, wait_failed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

CELLS = [
    "%load_ext jupyter_fsbroker",
    "import sys, jupyter_fsbroker as fsb\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    'broker.allow("data", ("read", "watch"))\n'
    'broker.allow("data/sales.csv", ("read",))',
    f"analysis = broker.connect('analysis', {SERVER})",
    'analysis.call_tool("watch_changes", {"path": "data", "seconds": 300})',
]

#: Records every kernel status the current notebook's page reads, from now on.
RECORD_STATUSES = """() => {
  const context = window.jupyterapp.shell.currentWidget.sessionContext;
  window.fsbrokerStatuses = [];
  context.statusChanged.connect((_, status) => window.fsbrokerStatuses.push(status));
}"""
#: Whether the page read an idle since the statuses were last cleared, and then the cell's busy again.
BUSY_AGAIN = """() => {
  const seen = window.fsbrokerStatuses;
  const now = window.jupyterapp.shell.currentWidget.sessionContext.kernelDisplayStatus;
  return seen.includes('idle') && seen[seen.length - 1] === 'busy' && now === 'busy';
}"""


def _seconds(text: str) -> int:
    found = re.search(r"· (\d+) s", text)
    assert found is not None, text
    return int(found[1])


def _stays_busy(page: Any) -> None:
    """The sidebar's request (Revoke, after :func:`_revoke_one_grant`) ends with an idle, which the page
    reads; then the running cell's busy again, so the page says Busy once more."""
    page.wait_for_function(BUSY_AGAIN, timeout=SHOW_TIMEOUT_MS)


def _revoke_one_grant(sidebar: Any) -> None:
    """Panel traffic while the call runs: Revoke a grant the call does not use, in the sidebar."""
    from playwright.sync_api import expect

    grant = sidebar.locator(".fsbroker-grant").filter(has_text="data/sales.csv")
    sidebar.page.evaluate("() => { window.fsbrokerStatuses = []; }")  # from this request on
    grant.locator(".fsbroker-sidebar-revoke").click()
    expect(sidebar.locator(".fsbroker-message")).to_contain_text("Revoked read on data/sales.csv")


def _start_the_long_call(jupyterlab: JupyterLab, page: Any, open_sidebar: Callable[[], object]) -> Any:
    """Connect in a new notebook, open the sidebar (*open_sidebar*), start the long call: the notebook,
    the sidebar, and the running line under the call's cell once it shows its seconds."""
    from playwright.sync_api import expect

    share_data(jupyterlab)
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("running.ipynb", CELLS))
    notebook.open()
    for index in range(3):
        notebook.run_and_wait(index)
    open_sidebar()
    sidebar = page.locator("#fsbroker-sidebar")
    expect(sidebar.locator(".fsbroker-connection")).to_contain_text("stdio · open", timeout=SHOW_TIMEOUT_MS)

    page.evaluate(RECORD_STATUSES)
    notebook.run(3)
    # Under the cell: the running line, its seconds ticking.
    line = notebook.output(3).locator(".fsbroker-running")
    expect(line).to_contain_text(
        re.compile(r"running: analysis · watch_changes · \d+ s"), timeout=SHOW_TIMEOUT_MS
    )
    return notebook, sidebar, line


def test_jupyterlab_stays_busy_for_a_long_call_and_the_sidebar_cancels_it(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    notebook, sidebar, line = _start_the_long_call(
        jupyterlab, page, lambda: page.locator("#fsbroker-status").click()
    )
    expect(line.locator(".fsbroker-cancel-call")).to_be_visible()
    # In the sidebar: the Running row, its seconds ticking too.
    row = sidebar.locator(".fsbroker-running-call")
    expect(row).to_contain_text(re.compile(r"analysis · watch_changes · \d+ s"), timeout=SHOW_TIMEOUT_MS)
    first = _seconds(row.inner_text())
    expect(row).not_to_contain_text(f"· {first} s", timeout=SHOW_TIMEOUT_MS)

    _revoke_one_grant(sidebar)
    _stays_busy(page)
    expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute("data-status", "busy")
    expect(page.locator("#jp-main-statusbar")).to_contain_text(re.compile(r"\| Busy"))
    assert notebook.prompt(3) == "[*]:", "the call should still run"

    row.locator(".fsbroker-sidebar-cancel-call").click()
    output = wait_failed(notebook, 3)
    assert re.search(r"CallCancelled: analysis · watch_changes was cancelled after \d+ s", output), output
    assert "Traceback" not in output, output
    expect(sidebar.locator(".fsbroker-running-call")).to_have_count(0, timeout=SHOW_TIMEOUT_MS)
    expect(line).to_have_count(0, timeout=SHOW_TIMEOUT_MS)
    expect(page.locator("#jp-main-statusbar")).to_contain_text(
        re.compile(r"\| Idle"), timeout=SHOW_TIMEOUT_MS
    )


@pytest.mark.parametrize("jupyterlab", [{"app": "notebook"}], indirect=True)
def test_notebook7_stays_busy_for_a_long_call_and_the_cells_cancel_stops_it(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    notebook, sidebar, line = _start_the_long_call(
        jupyterlab, page, lambda: run_command(page, "fsbroker:open-sidebar")
    )
    expect(sidebar.locator(".fsbroker-running-call")).to_contain_text("analysis · watch_changes")

    _revoke_one_grant(sidebar)
    _stays_busy(page)
    expect(page.locator("link[rel*='icon']")).to_have_attribute("href", re.compile(r"favicon-busy"))
    expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute("data-status", "busy")

    line.locator(".fsbroker-cancel-call").click()
    output = wait_failed(notebook, 3)
    assert re.search(r"CallCancelled: analysis · watch_changes was cancelled after \d+ s", output), output
    expect(page.locator("link[rel*='icon']")).to_have_attribute(
        "href", re.compile(r"favicon-notebook"), timeout=SHOW_TIMEOUT_MS
    )
