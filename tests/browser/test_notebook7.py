"""The File Broker sidebar in Notebook 7, in a notebook created from *Files → New*.

In Notebook 7 the file browser opens a new notebook in a new tab and keeps its
own connection to the new kernel; that connection fails to open every widget
comm the kernel opens, so no dashboard button of that notebook receives a
click (docs/design.md, "Facts found by trying the first release"). The
sidebar's comm is opened by the notebook's own page, so its kill switch works
there all the same: the sidebar opens from the command that shows it, lists
the connection, and Disconnect ends a call that blocks the notebook and shows
the connection closing, then closed, within seconds of the click.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook7 import new_notebook, prompt, type_and_run, wait_finished
from .test_sidebar import SERVER, SHOW_TIMEOUT_MS, run_command, share_data

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

#: Milliseconds from the click on Disconnect until the sidebar shows the connection closing, and closed
#: (the server process stopped): a few seconds, where a stale snapshot stayed for half a minute.
CLOSING_SHOWN_MS = 5_000
CLOSED_SHOWN_MS = 10_000

CELLS = [
    "%load_ext jupyter_fsbroker",
    'import sys, jupyter_fsbroker as fsb; broker = fsb.get_broker(); broker.add_root("data", name="data");'
    ' broker.allow("data", ("read", "watch"))',
    f"analysis = broker.connect('analysis', {SERVER})",
    'analysis.call_tool("watch_changes", {"path": "data", "seconds": 300})',
]


@pytest.mark.parametrize("jupyterlab", [{"app": "notebook"}], indirect=True)
def test_disconnect_works_in_a_notebook_created_from_files_new(jupyterlab: JupyterLab, page: Any) -> None:
    from playwright.sync_api import expect

    share_data(jupyterlab)
    notebook = new_notebook(page, jupyterlab)
    cells = notebook.locator(".jp-Notebook .jp-Cell")
    for index, code in enumerate(CELLS[:3]):
        cell = cells.nth(index)
        type_and_run(notebook, cell, code)
        output = wait_finished(cell)
        assert "Traceback" not in output, output

    # The sidebar opens in Notebook 7's right panel and lists the connection.
    run_command(notebook, "fsbroker:open-sidebar")
    sidebar = notebook.locator("#fsbroker-sidebar")
    expect(sidebar).to_be_visible()
    connection = sidebar.locator(".fsbroker-connection")
    expect(connection).to_contain_text(re.compile(r"analysis.*stdio · open"), timeout=SHOW_TIMEOUT_MS)
    expect(notebook.locator("#fsbroker-status")).to_contain_text("File broker: 1 server")

    # A call blocks the notebook; the sidebar's Disconnect ends it.
    blocked = cells.nth(3)
    type_and_run(notebook, blocked, CELLS[3])
    activity = sidebar.locator(".fsbroker-sidebar-activity")
    expect(activity).to_contain_text("files/watch", timeout=SHOW_TIMEOUT_MS)
    assert prompt(blocked) == "[*]:"
    sidebar.locator(".fsbroker-sidebar-disconnect").click()
    # The sidebar follows the kill switch by itself, the moment it acts and once the server is gone:
    # no other change in the kernel is needed to bring it up to date.
    expect(connection).to_contain_text(re.compile(r"stdio · clos(ing|ed)"), timeout=CLOSING_SHOWN_MS)
    expect(connection).to_contain_text("stdio · closed", timeout=CLOSED_SHOWN_MS)
    expect(notebook.locator("#fsbroker-status")).to_contain_text("File broker: 0 servers")
    output = wait_finished(blocked)
    assert "ConnectionClosedError" in output, output
    notebook.close()
