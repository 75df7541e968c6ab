"""The consent panel in a real JupyterLab page: destructive operations start unticked, nothing traps.

A server asks for read and delete on the whole shared folder. The panel says
what the folder covers, marks delete and leaves it unticked, and does not put
the focus on Approve (Enter approves nothing); with nothing ticked Approve is
disabled and grants nothing. The panel is not modal (the Kernel menu opens
while it waits); Esc puts it off for later: it hides, the status badge and the
cell's prompt stay, the sidebar's "Answer…" shows it again, and the cell's
prompt still answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import Notebook
from .test_sidebar import SHOW_TIMEOUT_MS, run_command, share_data

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

#: The test server whose ``request`` tool sends any server→client request (here: files/consent).
FS_SERVER = Path(__file__).resolve().parents[1] / "protocol" / "servers" / "fs_server.py"

CELLS = [
    "%load_ext jupyter_fsbroker",
    "import jupyter_fsbroker as fsb, os, sys\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    f"tidy = broker.connect('tidy', command=[sys.executable, {str(FS_SERVER)!r}],"
    ' env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})',
    'asked = tidy.call_tool("request", {"method": "files/consent", "timeout": 200, "params": {'
    '"message": "Tidy the data", "requestedPaths": ["data"], "operations": ["read", "delete"]}})\n'
    'asked.data["result"]',
]


def test_delete_starts_unticked_and_answer_later_leaves_the_cell_prompt(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    share_data(jupyterlab)
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("tidy.ipynb", CELLS))
    notebook.open()
    notebook.run_and_wait(0)
    notebook.run_and_wait(1)
    status = page.locator("#fsbroker-status")
    expect(status).to_contain_text("1 server", timeout=SHOW_TIMEOUT_MS)

    notebook.run(2)
    panel = page.locator("#fsbroker-consent-dialog")
    expect(panel).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    expect(panel).to_contain_text("tidy")
    expect(panel).to_contain_text("tidy asks for access to your files")
    expect(panel.locator(".fsbroker-consent-who")).to_contain_text("local program · not sandboxed")
    row = panel.locator(".fsbroker-consent-path")
    expect(row).to_contain_text("the whole shared folder: 1 file, subfolders included")
    expect(row).to_contain_text("delete: can delete 1 file — destructive, starts unticked")
    location = str((jupyterlab.root / "data").resolve())  # where the shared folder really is
    expect(row.locator("label[title]").first).to_have_attribute("title", location)
    expect(row.locator(".fsbroker-consent-op-read")).to_be_checked()
    expect(row.locator(".fsbroker-consent-op-delete")).not_to_be_checked()
    expect(panel.locator(".fsbroker-consent-duration")).to_contain_text("until you disconnect tidy")
    approve = panel.locator(".fsbroker-dialog-approve")
    # The focus is on the panel, not on Approve: Enter approves nothing.
    assert not page.evaluate("document.activeElement.classList.contains('fsbroker-dialog-approve')")
    page.keyboard.press("Enter")
    expect(panel).to_be_visible()
    assert notebook.prompt(2) == "[*]:"

    # Nothing ticked: Approve is disabled, and a click that gets through grants nothing.
    row.locator(".fsbroker-consent-op-read").uncheck()
    expect(approve).to_be_disabled()
    approve.dispatch_event("click")
    expect(panel).to_be_visible()
    assert notebook.prompt(2) == "[*]:"

    # Not modal: the Kernel menu (Interrupt) opens while the panel waits.
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    expect(page.locator(".lm-Menu-itemLabel", has_text="Interrupt Kernel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(".lm-Menu-itemLabel", has_text="Interrupt Kernel")).to_be_hidden()

    # Esc in the panel: answer later. It hides; the badge and the cell's prompt stay.
    panel.focus()
    page.keyboard.press("Escape")
    expect(panel).to_have_count(0)
    expect(status.locator(".fsbroker-status-badge")).to_have_text("1")
    prompt = notebook.cell(2).locator(".fsbroker-consent")
    expect(prompt).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    cell_row = prompt.locator(".fsbroker-consent-row")
    expect(cell_row.locator(".fsbroker-op-delete input")).not_to_be_checked()
    expect(cell_row.locator(".fsbroker-op-read input")).to_be_checked()
    expect(cell_row).to_contain_text("the whole shared folder: 1 file, subfolders included")
    expect(cell_row.locator(f'[title="{location}"]')).to_have_count(1)  # the real location on hover

    # The sidebar shows it again; the close button puts it off once more.
    run_command(page, "fsbroker:open-sidebar")
    page.locator("#fsbroker-sidebar .fsbroker-sidebar-answer").click()
    expect(panel).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    panel.locator(".fsbroker-dialog-later").click()
    expect(panel).to_have_count(0)

    # The cell's prompt still answers: read only, as it was ticked.
    prompt.locator(".fsbroker-approve").click()
    output = notebook.wait_done(2)
    assert "'granted': True" in output and "'operations': ['read']" in output, output
    expect(status.locator(".fsbroker-status-badge")).to_have_count(0)
