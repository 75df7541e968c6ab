"""The sidebar from the first cell: one cell loads the extension, connects and blocks on a consent.

The page learns of the broker from the kernel's announcement on IOPub (display
id ``jupyter_fsbroker.announce``), not from the end of a cell that mentions the
broker: so while that very cell still blocks in ``call_tool``, the status item
shows the broker and its pending request, and the consent dialog appears;
answering it there completes the cell. In JupyterLab and in Notebook 7.
"""

from __future__ import annotations

from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import Notebook
from .notebook7 import new_notebook, prompt, type_and_run, wait_finished
from .test_sidebar import SERVER, SHOW_TIMEOUT_MS, share_data

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

#: Everything in one cell: nothing before it has run, and it blocks until its consent is answered.
FIRST_CELL = (
    "%load_ext jupyter_fsbroker\n"
    "import sys, jupyter_fsbroker as fsb\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    f"analysis = broker.connect('analysis', {SERVER})\n"
    'stats = analysis.call_tool("profile_csv", {"path": "data/sales.csv"})\n'
    'print("profiled rows:", stats.data["rows"])'
)


def consent_while_blocked(page: Any, prompt: Any) -> None:
    """While the first cell blocks (*prompt* reads its prompt), the status item and the dialog show the
    request; Approve there answers it."""
    from playwright.sync_api import expect

    status = page.locator("#fsbroker-status")
    dialog = page.locator("#fsbroker-consent-dialog")
    expect(dialog).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    expect(dialog).to_contain_text("analysis asks for access to your files")
    expect(dialog.locator(".fsbroker-consent-path")).to_contain_text("data/sales.csv")
    expect(status).to_contain_text("File broker: 1 server", timeout=SHOW_TIMEOUT_MS)
    expect(status.locator(".fsbroker-status-badge")).to_have_text("1")
    assert prompt() == "[*]:", "the first cell should still block on its consent"
    dialog.locator(".fsbroker-dialog-approve").click()
    expect(dialog).to_have_count(0, timeout=SHOW_TIMEOUT_MS)
    expect(status.locator(".fsbroker-status-badge")).to_have_count(0)


def test_jupyterlab_shows_the_consent_of_the_first_cell_while_it_blocks(
    jupyterlab: JupyterLab, page: Any
) -> None:
    share_data(jupyterlab)
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("first-cell.ipynb", [FIRST_CELL]))
    notebook.open()
    notebook.run(0)
    consent_while_blocked(page, lambda: notebook.prompt(0))
    output = notebook.wait_done(0)
    assert "profiled rows: 4" in output, output


@pytest.mark.parametrize("jupyterlab", [{"app": "notebook"}], indirect=True)
def test_notebook7_shows_the_consent_of_the_first_cell_while_it_blocks(
    jupyterlab: JupyterLab, page: Any
) -> None:
    share_data(jupyterlab)
    tab = new_notebook(page, jupyterlab)
    cell = tab.locator(".jp-Notebook .jp-Cell").first
    type_and_run(tab, cell, FIRST_CELL)
    consent_while_blocked(tab, lambda: prompt(cell))
    output = wait_finished(cell)
    assert "profiled rows: 4" in output, output
    tab.close()
