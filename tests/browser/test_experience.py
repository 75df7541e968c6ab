"""What a data scientist sees in the browser: per-path consent, the result, the dashboard (light and
dark), and the kill switch in a Notebook 7 notebook made with *Files → New*.

The screenshots ``consent-light.png``, ``result-light.png``, ``dashboard-light.png`` and their
``-dark`` twins are the README's (``FSBROKER_SCREENSHOT_DIR=docs/images`` refreshes them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import Proc, descendants

from .lab import JupyterLab
from .notebook import CELL_TIMEOUT_MS, LOAD_TIMEOUT_MS, Notebook, wait_kernel_ready
from .test_sidebar import run_command, wait_failed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"

#: The example server over stdio; it gets the kernel's PYTHONPATH (stdio servers start with a bare
#: environment), so it runs the same checkout as the kernel.
CONNECT = (
    "server = [sys.executable, '-m', 'jupyter_fsbroker.examples.analysis_server']\n"
    "conn = broker.connect('analysis', command=server, env={'PYTHONPATH': os.environ.get('PYTHONPATH', '')})"
)
CELLS = [
    "%load_ext jupyter_fsbroker",
    "import jupyter_fsbroker as fsb, os, sys\nbroker = fsb.get_broker()\n"
    "broker.add_root('data', name='data')",
    CONNECT,
    'conn.call_tool("write_report", {"path": "data/sales.csv"})',
    "broker.dashboard()",
]
LOAD, ROOT, CONNECT_CELL, REPORT, DASHBOARD = range(len(CELLS))

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def _screenshot(locator: Any, path: Path) -> None:
    locator.scroll_into_view_if_needed()
    locator.page.mouse.move(0, 0)  # no hover highlight where the last click left the pointer
    locator.screenshot(path=str(path), animations="disabled")
    assert path.stat().st_size > 3_000, f"{path} is suspiciously small: a blank screenshot?"


@pytest.mark.parametrize(
    ("jupyterlab", "theme"),
    [({"theme": THEMES[name]}, name) for name in THEMES],
    indirect=["jupyterlab"],
    ids=list(THEMES),
)
def test_write_granted_on_the_report_only(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path, theme: str
) -> None:
    from playwright.sync_api import expect

    data = jupyterlab.data_folder()
    (data / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("report.ipynb", CELLS))
    notebook.open()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", THEMES[theme])
    for index in (LOAD, ROOT, CONNECT_CELL):
        notebook.run_and_wait(index)

    # The report tool asks read on the data and write on the report: each path shows its own.
    notebook.run(REPORT)
    consent = notebook.cell(REPORT).locator(".fsbroker-consent")
    consent.wait_for(state="visible", timeout=CELL_TIMEOUT_MS)
    rows = consent.locator(".fsbroker-consent-row")
    expect(rows).to_have_count(2)
    data_row = rows.filter(has_text="data/sales.csv")
    report_row = rows.filter(has_text="sales.report.md")
    expect(data_row.locator(".fsbroker-op-read input")).to_be_checked()
    expect(data_row.locator(".fsbroker-op-write")).to_have_count(0)  # never asked: never grantable
    expect(report_row.locator(".fsbroker-op-write input")).to_be_checked()
    expect(report_row.locator(".fsbroker-op-read")).to_have_count(0)
    _screenshot(consent, screenshot_dir / f"consent-{theme}.png")
    consent.locator(".fsbroker-approve").click()

    output = notebook.wait_done(REPORT, CELL_TIMEOUT_MS)
    expect(consent.locator(".fsbroker-consent-outcome")).to_contain_text(
        "Approved read on data/sales.csv; write on data/sales.report.md"
    )
    expect(consent.locator(".fsbroker-approve")).to_be_hidden()  # shrunk to its outcome
    result = notebook.output(REPORT).locator(".fsbroker-result")
    expect(result).to_contain_text("sales.report.md")
    assert "'rows': 4" in output, output
    assert (data / "sales.report.md").read_text(encoding="utf-8").startswith("#")
    assert (data / "sales.csv").read_text(encoding="utf-8") == SALES_CSV
    _screenshot(notebook.output(REPORT), screenshot_dir / f"result-{theme}.png")

    notebook.run_and_wait(DASHBOARD)
    dashboard = notebook.output(DASHBOARD).locator(".fsbroker-dashboard")
    grants = dashboard.locator(".widget-hbox").filter(has=page.locator(".fsbroker-revoke"))
    expect(grants).to_have_count(2)
    expect(grants.filter(has_text="data/sales.csv")).to_contain_text(re.compile(r"sales\.csv · read ·"))
    expect(grants.filter(has_text="report")).to_contain_text(re.compile(r"report\.md · write ·"))
    expect(dashboard.locator(".fsbroker-activity")).to_contain_text("asked for consent")
    _screenshot(dashboard, screenshot_dir / f"dashboard-{theme}.png")


# -- Notebook 7, a notebook made with Files → New -----------------------------------------------------

#: What the new notebook runs, from a file: typing code into the editor would fight its auto-closing
#: brackets, and `%run -i story.py` has none.
STORY = """
import os, sys
import jupyter_fsbroker as fsb
broker = fsb.get_broker()
broker.add_root("data", name="data")
broker.allow("data", ("read", "watch"))
conn = broker.connect("analysis", command=[sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"],
                      env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
display(broker.dashboard())
"""
CHECK = 'print("state:", conn.state)\n'
#: A call that blocks the notebook until the connection ends.
BLOCK = 'conn.call_tool("watch_changes", {"path": "data", "seconds": 300})\n'
SERVER_MODULE = "jupyter_fsbroker.examples.analysis_server"


def _new_notebook_from_the_file_browser(page: Any, lab: JupyterLab) -> Any:
    """Files → New → Python 3 in Notebook 7's file browser; the notebook's own tab, once it is open."""
    page.goto(lab.tree_url(), timeout=LOAD_TIMEOUT_MS)
    new = page.locator('[data-jp-item-name="new-dropdown"] .lm-MenuBar-item')
    new.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)
    with page.context.expect_page(timeout=LOAD_TIMEOUT_MS) as opened:
        new.click()
        page.locator(".lm-Menu-itemLabel", has_text="Python 3").first.click()
    tab = opened.value
    tab.wait_for_load_state()
    dialog = tab.locator(".jp-Dialog .jp-mod-accept")
    try:  # a kernel choice, where Notebook asks for one
        dialog.first.wait_for(state="visible", timeout=5_000)
        dialog.first.click()
    except Exception:
        pass
    return tab


def _servers(lab: JupyterLab) -> list[Proc]:
    """The example server processes below this JupyterLab (its kernel's stdio servers)."""
    assert lab.proc is not None
    return [proc for proc in descendants(lab.proc.pid) if SERVER_MODULE in proc.command]


@pytest.mark.usefixtures("labextension")
@pytest.mark.parametrize("jupyterlab", [{"app": "notebook"}], indirect=True, ids=["notebook7"])
def test_kill_switch_in_a_notebook_made_with_files_new(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    """Whether or not the file browser tab cut the dashboard's widgets off (docs/design.md,
    "Facts found by trying the first release", Notebook 7.6; in some runs only), the sidebar's
    Disconnect ends the connection, its server and the call it blocked."""
    from playwright.sync_api import expect

    data = jupyterlab.root / "data"
    data.mkdir()
    (data / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    for name, code in (("story.py", STORY), ("check.py", CHECK), ("block.py", BLOCK)):
        (jupyterlab.root / name).write_text(code, encoding="utf-8")
    tab = _new_notebook_from_the_file_browser(page, jupyterlab)  # the file browser tab stays open
    wait_kernel_ready(tab)
    notebook = Notebook(tab, jupyterlab, "Untitled.ipynb")
    notebook.cells.first.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)

    def type_in(index: int, code: str) -> None:
        notebook.cell(index).locator(".jp-InputArea-editor").click()
        tab.keyboard.insert_text(code)

    type_in(0, "%load_ext jupyter_fsbroker")  # the sidebar asks the kernel again after this cell
    notebook.run_and_wait(0)
    type_in(1, "%run -i story.py")
    notebook.run_and_wait(1)
    expect(notebook.output(1).locator(".fsbroker-dashboard")).to_be_visible(timeout=CELL_TIMEOUT_MS)
    type_in(2, "%run -i check.py")
    assert "state: open" in notebook.run_and_wait(2)
    [server] = _servers(jupyterlab)

    # A call blocks the notebook; the sidebar's Disconnect ends the connection, and with it the call.
    type_in(3, "%run -i block.py")
    notebook.run(3)
    run_command(tab, "fsbroker:open-sidebar")
    sidebar = tab.locator("#fsbroker-sidebar")
    connection = sidebar.locator(".fsbroker-connection")
    expect(connection).to_contain_text("stdio · open", timeout=CELL_TIMEOUT_MS)
    expect(sidebar.locator(".fsbroker-sidebar-activity")).to_contain_text(
        "files/watch", timeout=CELL_TIMEOUT_MS
    )
    assert notebook.prompt(3) == "[*]:"
    sidebar.locator(".fsbroker-sidebar-disconnect").click()
    expect(connection).to_contain_text("stdio · closed", timeout=CELL_TIMEOUT_MS)
    ended = wait_failed(notebook, 3)
    assert "ConnectionClosedError" in ended and "closed by the user" in ended, ended
    deadline = time.monotonic() + CELL_TIMEOUT_MS / 1000
    while server.alive():
        assert time.monotonic() < deadline, f"the server process {server.pid} outlived its connection"
        time.sleep(0.1)
    type_in(4, "%run -i check.py")
    assert "state: closed" in notebook.run_and_wait(4)
    tab.screenshot(path=str(screenshot_dir / "notebook7-files-new.png"))
