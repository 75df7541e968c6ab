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

from .lab import JupyterLab
from .notebook import CELL_TIMEOUT_MS, LOAD_TIMEOUT_MS, Notebook, wait_kernel_ready

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

    data = jupyterlab.root / "data"
    data.mkdir()
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
get_ipython().run_line_magic("load_ext", "jupyter_fsbroker")
broker = fsb.get_broker()
broker.add_root("data", name="data")
conn = broker.connect("analysis", command=[sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"],
                      env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
display(broker.dashboard())
"""
CHECK = 'print("state:", conn.state)\n'


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


@pytest.mark.parametrize("jupyterlab", [{"app": "notebook"}], indirect=True, ids=["notebook7"])
def test_kill_switch_in_a_notebook_made_with_files_new(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    """The dashboard's Disconnect either works, or the user is told it cannot and what does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import expect

    data = jupyterlab.root / "data"
    data.mkdir()
    (data / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    (jupyterlab.root / "story.py").write_text(STORY, encoding="utf-8")
    (jupyterlab.root / "check.py").write_text(CHECK, encoding="utf-8")
    tab = _new_notebook_from_the_file_browser(page, jupyterlab)  # the file browser tab stays open
    wait_kernel_ready(tab)
    notebook = Notebook(tab, jupyterlab, "Untitled.ipynb")
    notebook.cells.first.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)

    def run(index: int, code: str) -> str:
        editor = notebook.cell(index).locator(".jp-InputArea-editor")
        editor.click()
        tab.keyboard.insert_text(code)
        return notebook.run_and_wait(index)

    run(0, "%run -i story.py")
    dashboard = notebook.output(0).locator(".fsbroker-dashboard")
    expect(dashboard).to_be_visible(timeout=CELL_TIMEOUT_MS)
    disconnect = dashboard.locator(".fsbroker-disconnect")
    expect(disconnect).to_be_visible()
    try:  # not yet known to be cut off: the user clicks
        disconnect.click(timeout=10_000)
    except PlaywrightTimeoutError:  # known (maybe only now): the kernel disabled it, marked it stale
        expect(disconnect).to_be_disabled()
        expect(dashboard).to_contain_text("Stale")
    # Either the click reached the kernel (the connection closes), or the kernel noticed that a
    # frontend closed the dashboard's comm and says so after the next cell, with what always works.
    deadline = time.monotonic() + 30
    index = 1
    while True:
        text = run(index, "%run -i check.py")
        index += 1
        if "state: closed" in text or "a frontend closed the widgets of the dashboard" in text:
            break
        assert time.monotonic() < deadline, f"Disconnect did nothing and nobody said so:\n{text}"
    if "state: closed" not in text:
        assert "%fsbroker disconnect NAME" in text
        run(index, "%fsbroker disconnect analysis")
        assert "state: closed" in run(index + 1, "%run -i check.py")
    tab.screenshot(path=str(screenshot_dir / "notebook7-files-new.png"))
