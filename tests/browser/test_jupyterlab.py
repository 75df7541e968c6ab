"""The whole story in a real browser: JupyterLab, a blocking tool call, consent clicked in the page.

A data scientist opens a notebook, loads the extension, shares ``data/``,
connects the example analysis server over stdio and calls ``profile_csv``
synchronously. While that cell blocks, the server asks for consent: the prompt
must appear in the cell's output, name the server and the file, and take a
click on Approve (JupyterLab sends it on a kernel subshell, which the blocked
main shell does not hold up). Then the call returns its result, and the
dashboard lists the connection, the grant and the activity.

The screenshots of the consent prompt and of the dashboard are the README's
(``FSBROKER_SCREENSHOT_DIR=docs/images`` refreshes them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import Notebook
from .test_sidebar import SERVER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"

CELLS = [
    "%load_ext jupyter_fsbroker",
    'import jupyter_fsbroker as fsb, sys\nbroker = fsb.get_broker()\nbroker.add_root("data", name="data")',
    f"conn = broker.connect('analysis', {SERVER})",
    'result = conn.call_tool("profile_csv", {"path": "data/sales.csv"})\nresult["isError"]',
    'stats = result.data\nprint("rows:", stats["rows"])\n'
    'print("columns:", *(column["name"] for column in stats["columns"]))',
    "broker.dashboard()",
]
LOAD, ROOT, CONNECT, CALL, STATS, DASHBOARD = range(len(CELLS))

#: Milliseconds for a consent prompt to appear once the call started, and for the call to end.
CONSENT_TIMEOUT_MS = 60_000


def _screenshot(locator: Any, path: Path) -> None:
    locator.scroll_into_view_if_needed()
    locator.page.mouse.move(0, 0)  # no hover highlight where the last click left the pointer
    locator.screenshot(path=str(path), animations="disabled")
    assert path.stat().st_size > 5_000, f"{path} is suspiciously small: a blank screenshot?"


def test_consent_clicked_in_jupyterlab_while_a_sync_cell_blocks(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    data = jupyterlab.data_folder()
    (data / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("fsbroker-demo.ipynb", CELLS))
    notebook.open()

    # Load quietly, share data/, connect: the connecting cell shows a card naming the connection.
    notebook.run_and_wait(LOAD)
    assert "name='data'" in notebook.run_and_wait(ROOT)
    notebook.run_and_wait(CONNECT)
    card = notebook.output(CONNECT).locator(".fsbroker-connection")
    expect(card).to_contain_text("Connected analysis")

    # The blocking call: the server asks for consent while the cell is still running.
    notebook.run(CALL)
    cell = notebook.cell(CALL)
    consent = cell.locator(".fsbroker-consent")
    consent.wait_for(state="visible", timeout=CONSENT_TIMEOUT_MS)
    assert notebook.prompt(CALL) == "[*]:", "the call should still block while consent is asked"
    expect(consent).to_contain_text("analysis asks for access to your files")
    expect(consent).to_contain_text("data/sales.csv")
    expect(consent.locator(".fsbroker-consent-path input[type=checkbox]")).to_be_checked()
    expect(consent.locator(".fsbroker-countdown")).to_contain_text("refused automatically in")
    # Clicks reach the kernel in JupyterLab: no text prompt on stdin besides the widget.
    expect(cell.locator(".jp-Stdin")).to_have_count(0)
    approve = consent.locator(".fsbroker-approve")
    expect(approve).to_be_enabled()
    expect(consent.locator(".fsbroker-deny")).to_be_enabled()
    _screenshot(consent, screenshot_dir / "consent.png")

    # Approve in the page: the click reaches the kernel although the main shell is blocked.
    approve.click()
    output = notebook.wait_done(CALL, CONSENT_TIMEOUT_MS)
    expect(consent.locator(".fsbroker-consent-outcome")).to_contain_text("Approved read on data/sales.csv")
    expect(approve).to_be_disabled()
    assert output.rstrip().endswith("False"), f"the tool should have succeeded: {output}"

    # The result is there for the next cell.
    stats = notebook.run_and_wait(STATS)
    assert "rows: 4" in stats and "columns: region amount" in stats, stats

    # The dashboard: the shared folder, the connection with its kill switch, the grant, the activity.
    notebook.run_and_wait(DASHBOARD)
    dashboard = notebook.output(DASHBOARD).locator(".fsbroker-dashboard")
    expect(dashboard).to_be_visible()
    expect(dashboard).to_contain_text(str(data.resolve()))  # where the folder is, links resolved
    rows = dashboard.locator(".widget-hbox")
    connection = rows.filter(has=page.locator(".fsbroker-disconnect"))
    expect(connection).to_have_count(1)
    expect(connection).to_contain_text(re.compile(r"analysis.*stdio.*open"))
    grant = rows.filter(has=page.locator(".fsbroker-revoke"))
    expect(grant).to_have_count(1)
    expect(grant).to_contain_text(re.compile(r"analysis.*data/sales\.csv.*read"))
    activity = dashboard.locator(".fsbroker-activity")
    expect(activity).to_contain_text("files/consent")
    expect(activity).to_contain_text("files/read")
    _screenshot(dashboard, screenshot_dir / "dashboard.png")

    # Nothing went wrong on the side: no warning or error in any cell, no traceback through the
    # extension in the kernel's or the server's output.
    stderr = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    assert stderr.count() == 0, "\n".join(stderr.all_inner_texts())
    log = jupyterlab.log_tail(1_000_000)
    assert "jupyter_fsbroker/" not in log, log
    print(f"the browser story took {time.monotonic() - started:.1f} s")
