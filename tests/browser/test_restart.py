"""After Kernel → Restart (or reopened from a save), the views say they are stale and take no click.

JupyterLab's widget manager keeps the old views on the page when the kernel
restarts and marks each one ``jupyter-widgets-disconnected`` (with a red
broken-chain icon before it). A dashboard that still says "open" beside a
Disconnect that looks alive, and a consent prompt with Approve, would lie: their
kernel is gone. The test opens the dashboard and a cell waiting for consent,
restarts the kernel from the Kernel menu as a user does, and checks that the
dashboard, the connection card and the prompt are greyed with one line saying
what to run, that no broken-chain icon is drawn inside them, and that a click
on Disconnect or Approve reaches nothing. A notebook saved with its widget state
and reopened draws the same views from that state, with no kernel behind them:
they say the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import LOAD_TIMEOUT_MS, Notebook, wait_kernel_ready
from .test_sidebar import SERVER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CELLS = [
    "%load_ext jupyter_fsbroker\n"
    "import jupyter_fsbroker as fsb, sys\n"
    'broker = fsb.get_broker()\nbroker.add_root("data", name="data")',
    f"conn = broker.connect('analysis', {SERVER})",
    "%fsbroker status",
    'conn.call_tool("profile_csv", {"path": "data/sales.csv"})',
]
SETUP, CONNECT, STATUS, CALL = range(len(CELLS))

#: Milliseconds for the consent prompt to appear once the call started.
CONSENT_TIMEOUT_MS = 60_000

#: The line a stale view shows: its ``::before`` content, as the page draws it.
_LINE = "(el) => getComputedStyle(el, '::before').content"

#: How *el* is drawn: its opacity with its ancestors', and whether it takes pointer events.
_DRAWN = """(el) => {
  let opacity = 1;
  for (let node = el; node instanceof Element; node = node.parentElement) {
    opacity *= Number(getComputedStyle(node).opacity);
  }
  return { opacity, events: getComputedStyle(el).pointerEvents };
}"""

#: How many broken-chain icons (the manager's ``::before``) are drawn inside *el*.
_ICONS = """(el) => [...el.querySelectorAll('.jupyter-widgets-disconnected')]
  .filter((node) => {
    const before = getComputedStyle(node, '::before');
    return before.content !== 'none' && before.display !== 'none' && before.content.includes('\\uf127');
  }).length"""

#: The element a click at the centre of *el* lands on is *el* or inside it.
_HIT = """(el) => {
  el.scrollIntoView({ block: 'center' });
  const box = el.getBoundingClientRect();
  const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
  return !!hit && (hit === el || el.contains(hit));
}"""


def _restart_from_the_menu(page: Any) -> None:
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel…").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("button", has_text="Restart").click()
    expect(dialog).to_have_count(0)


def test_a_restart_leaves_the_views_grey_with_one_line_and_nothing_to_click(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    from playwright.sync_api import expect

    data = jupyterlab.root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n", encoding="utf-8")
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("restart.ipynb", CELLS))
    notebook.open()
    notebook.run_and_wait(SETUP)
    notebook.run_and_wait(CONNECT)
    notebook.run_and_wait(STATUS)
    card = notebook.output(CONNECT).locator(".fsbroker-connection")
    dashboard = notebook.output(STATUS).locator(".fsbroker-dashboard")
    disconnect = dashboard.locator(".fsbroker-disconnect")
    expect(disconnect).to_be_enabled()
    notebook.run(CALL)
    consent = notebook.cell(CALL).locator(".fsbroker-consent")
    consent.wait_for(state="visible", timeout=CONSENT_TIMEOUT_MS)
    approve = consent.locator(".fsbroker-approve")
    expect(approve).to_be_enabled()
    # Alive, nothing is marked: no line, and the buttons take clicks.
    assert dashboard.evaluate(_LINE) == "none" and approve.evaluate(_DRAWN)["opacity"] == 1
    assert disconnect.evaluate(_HIT) and approve.evaluate(_HIT)

    _restart_from_the_menu(page)
    wait_kernel_ready(page, LOAD_TIMEOUT_MS / 1000)

    expect(dashboard).to_have_class(_has("jupyter-widgets-disconnected"))
    views = (
        (
            dashboard,
            disconnect,
            "The kernel restarted or stopped: this dashboard is stale and its buttons do nothing. "
            "For a live one, run %load_ext jupyter_fsbroker and %fsbroker status again.",
        ),
        (
            card,
            card.locator(".widget-html").first,
            "The kernel restarted or stopped: this connection ended with it.",
        ),
        (
            consent,
            approve,
            "The kernel restarted or stopped: this request ended with it and its buttons do nothing.",
        ),
    )
    for view, part, words in views:
        expect(view).to_have_class(_has("jupyter-widgets-disconnected"))
        assert words in view.evaluate(_LINE)
        drawn = part.evaluate(_DRAWN)
        assert drawn["opacity"] < 0.5 and drawn["events"] == "none", drawn
        assert view.evaluate(_ICONS) == 0, "a broken-chain icon is drawn inside the stale view"
    # Nothing to click: a click on Disconnect or Approve lands on the stale view around them.
    assert not disconnect.evaluate(_HIT)
    assert not approve.evaluate(_HIT)
    dashboard.scroll_into_view_if_needed()
    shot = screenshot_dir / "restarted-dashboard.png"
    dashboard.screenshot(path=str(shot), animations="disabled")
    consent.screenshot(path=str(screenshot_dir / "restarted-consent.png"), animations="disabled")
    assert shot.stat().st_size > 5_000
    print(f"screenshots: {screenshot_dir}")


def _has(name: str) -> Any:
    import re

    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def test_a_saved_dashboard_reopened_with_its_widget_state_says_it_is_not_live(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    from playwright.sync_api import expect

    # JupyterLab's "Save Widget State Automatically": the notebook keeps the views' last state.
    setting = Path(jupyterlab.env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyter-widgets/jupyterlab-manager"
    setting.mkdir(parents=True, exist_ok=True)
    (setting / "plugin.jupyterlab-settings").write_text('{"saveState": true}', encoding="utf-8")
    (jupyterlab.root / "data").mkdir()
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("saved.ipynb", CELLS[: STATUS + 1]))
    notebook.open()
    for index in (SETUP, CONNECT, STATUS):
        notebook.run_and_wait(index)
    expect(notebook.output(STATUS).locator(".fsbroker-disconnect")).to_be_enabled()
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    saved = jupyterlab.api("GET", "api/contents/saved.ipynb")
    assert saved["content"]["metadata"]["widgets"], "the widget state was not saved"
    for session in jupyterlab.api("GET", "api/sessions"):
        jupyterlab.api("DELETE", f"api/sessions/{session['id']}")

    # Reopened: the views are drawn from the saved state, with no kernel behind them.
    notebook.open()
    dashboard = notebook.output(STATUS).locator(".fsbroker-dashboard")
    expect(dashboard).to_have_class(_has("jupyter-widgets-disconnected"))
    assert "this dashboard is stale and its buttons do nothing" in dashboard.evaluate(_LINE)
    assert dashboard.evaluate(_ICONS) == 0
    disconnect = dashboard.locator(".fsbroker-disconnect")
    drawn = disconnect.evaluate(_DRAWN)
    assert drawn["opacity"] < 0.5 and drawn["events"] == "none", drawn
    assert not disconnect.evaluate(_HIT)
    dashboard.screenshot(path=str(screenshot_dir / "reopened-dashboard.png"), animations="disabled")
