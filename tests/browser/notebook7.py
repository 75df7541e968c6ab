"""Driving Notebook 7 with playwright: a notebook made with *Files → New*, cells typed and run.

Notebook 7 opens that notebook in a new tab; its cells are typed into and run
with Shift+Enter as a user would, and every wait has a deadline that fails with
what did not happen.
"""

from __future__ import annotations

import re
import time
from typing import Any

from .lab import JupyterLab
from .notebook import wait_kernel_ready

#: Milliseconds for a page, its kernel or a cell.
LOAD_TIMEOUT_MS = 60_000

_DONE = re.compile(r"^\[\d+\]:$")


def new_notebook(page: Any, lab: JupyterLab) -> Any:
    """Files → New → Notebook in the file browser of *page*; the new notebook's own tab, its first
    cell visible and its kernel connected and idle."""
    page.goto(lab.tree_url(), timeout=LOAD_TIMEOUT_MS)
    page.locator(".jp-FileBrowser-toolbar").get_by_text("New", exact=True).click()
    with page.context.expect_page(timeout=LOAD_TIMEOUT_MS) as opened:
        page.locator(".lm-Menu-item").filter(has_text=re.compile("Notebook|Python 3")).first.click()
    tab = opened.value
    tab.wait_for_load_state()
    tab.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)
    wait_kernel_ready(tab)
    return tab


def prompt(cell: Any) -> str:
    """The input prompt of *cell* without spaces: ``[ ]:``, ``[*]:`` or ``[3]:``."""
    return "".join(cell.locator(".jp-InputPrompt").inner_text().split())


def type_and_run(page: Any, cell: Any, code: str) -> None:
    """Type *code* into *cell* as a user would and run it (Shift+Enter, again if ignored at first)."""
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.insert_text(code)
    before = prompt(cell)
    for _attempt in range(5):
        page.keyboard.press("Shift+Enter")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            if prompt(cell) != before:
                return
            time.sleep(0.05)
        cell.locator(".jp-InputArea-editor").click()
    raise AssertionError(f"the cell did not start: {code!r}")


def wait_finished(cell: Any, timeout_ms: float = LOAD_TIMEOUT_MS) -> str:
    """Wait until *cell* has run (its prompt numbered); the text of its output area."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not _DONE.match(prompt(cell)):
        assert time.monotonic() < deadline, f"the cell did not finish: {cell.inner_text()}"
        time.sleep(0.1)
    output = cell.locator(".jp-OutputArea")
    return output.inner_text() if output.count() else ""
