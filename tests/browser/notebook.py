"""Driving a notebook in JupyterLab with playwright: open it, wait for its kernel, run cells.

Every wait has a deadline and fails with a message that says what did not
happen; nothing sleeps for a fixed time except between Shift+Enter retries.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from .lab import JupyterLab

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

#: Milliseconds for the page, the notebook and its kernel to come up.
LOAD_TIMEOUT_MS = 60_000
#: Milliseconds a cell may run (connecting starts a server process; cold imports are slow on CI).
CELL_TIMEOUT_MS = 60_000
#: Seconds to wait for a cell to start after Shift+Enter before pressing it again.
START_WAIT = 3.0
#: How often Shift+Enter is pressed before giving up.
START_ATTEMPTS = 5

_DONE = re.compile(r"^\[\d+\]:$")

#: True once the current notebook's kernel is idle and its websocket is connected, as the page sees
#: it. The server's own count of connections is not asked: jupyter_server subtracts a websocket that
#: the page closed before it opened (it happens while a new notebook's kernel starts), so its count
#: can stay at 0 with the page connected.
_KERNEL_READY = """() => {
  const widget = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const session = widget && widget.sessionContext && widget.sessionContext.session;
  const kernel = session && session.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""


def wait_kernel_ready(page: Page, timeout: float = LOAD_TIMEOUT_MS / 1000) -> None:
    """Wait until the current notebook of *page* has a connected, idle kernel."""
    page.wait_for_function(_KERNEL_READY, timeout=timeout * 1000)


class Notebook:
    """One notebook open in a JupyterLab page."""

    def __init__(self, page: Page, lab: JupyterLab, path: str) -> None:
        self.page = page
        self.lab = lab
        self.path = path

    # -- loading -------------------------------------------------------------------------------

    def open(self) -> None:
        """Load the notebook in the page and wait until its kernel is connected and idle."""
        self.page.goto(self.lab.lab_url(self.path), timeout=LOAD_TIMEOUT_MS)
        self.cells.first.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)
        self.wait_kernel_idle()

    def wait_kernel_idle(self, timeout: float = LOAD_TIMEOUT_MS / 1000) -> None:
        """Wait until the page is connected to a kernel that is idle."""
        wait_kernel_ready(self.page, timeout)

    # -- cells ---------------------------------------------------------------------------------

    @property
    def cells(self) -> Locator:
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")

    def cell(self, index: int) -> Locator:
        return self.cells.nth(index)

    def prompt(self, index: int) -> str:
        """The cell's input prompt: ``[ ]:`` never run, ``[*]:`` running or queued, ``[3]:`` done."""
        text = self.cell(index).locator(".jp-InputPrompt").inner_text()
        return "".join(text.split())

    def run(self, index: int) -> None:
        """Run cell *index* with Shift+Enter; return as soon as it started (its prompt changed).

        Right after the page loads JupyterLab sometimes ignores the key: press it
        again until the prompt shows that the cell runs (or ran).
        """
        cell = self.cell(index)
        before = self.prompt(index)
        for _attempt in range(START_ATTEMPTS):
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Shift+Enter")
            deadline = time.monotonic() + START_WAIT
            while time.monotonic() < deadline:
                if self.prompt(index) != before:
                    return
                time.sleep(0.05)
        raise AssertionError(
            f"cell {index} did not start after {START_ATTEMPTS} presses of Shift+Enter "
            f"(prompt still {before!r})"
        )

    def wait_done(self, index: int, timeout_ms: float = CELL_TIMEOUT_MS) -> str:
        """Wait until cell *index* has finished; fail on a traceback; return its output's text."""
        deadline = time.monotonic() + timeout_ms / 1000
        prompt = self.prompt(index)
        while not _DONE.match(prompt):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"cell {index} did not finish in {timeout_ms / 1000:g} s (prompt {prompt!r});"
                    f" its output:\n{self.output_text(index)}"
                )
            time.sleep(0.1)
            prompt = self.prompt(index)
        text = self.output_text(index)
        if "Traceback" in text:
            raise AssertionError(f"cell {index} failed:\n{text}")
        return text

    def run_and_wait(self, index: int, timeout_ms: float = CELL_TIMEOUT_MS) -> str:
        self.run(index)
        return self.wait_done(index, timeout_ms)

    def output(self, index: int) -> Locator:
        return self.cell(index).locator(".jp-OutputArea")

    def output_text(self, index: int) -> str:
        area = self.output(index)
        return area.inner_text() if area.count() else ""
