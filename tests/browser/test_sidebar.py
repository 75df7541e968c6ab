"""The File Broker sidebar, status item and consent dialog in a real JupyterLab page.

A data scientist opens a notebook whose kernel has no broker yet: the sidebar
says how to start one. After ``%load_ext`` it lists the connected server and a
kept lock, the status item counts them, and **Disconnect in the sidebar ends
the connection while a synchronous cell is blocked in ``call_tool``**: the
cell returns with a clear error. A consent request also appears as a dialog,
whose Approve unblocks the waiting cell; when the cell's own prompt answers
first, the dialog closes and says how the request ended.

The screenshots (light and dark) are the README's (``FSBROKER_SCREENSHOT_DIR=docs/images``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from .lab import JupyterLab
from .notebook import CELL_TIMEOUT_MS, Notebook, wait_kernel_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"
#: The arguments of `broker.connect` for the example server over stdio. It gets the kernel's
#: PYTHONPATH (stdio servers start with a bare environment), so it runs the same checkout as the
#: kernel, not whatever jupyter_fsbroker the environment has installed. The command is `python`
#: as a user types it, found first in the kernel's own environment: the sidebar shows the command
#: line, and its screenshots for the docs should not show this machine's interpreter path.
SERVER = (
    'command=["python", "-m", "jupyter_fsbroker.examples.analysis_server"],'
    ' env={"PYTHONPATH": __import__("os").environ.get("PYTHONPATH", ""),'
    ' "PATH": __import__("os").pathsep.join([__import__("os").path.dirname(sys.executable),'
    ' __import__("os").environ.get("PATH", "")])}'
)

#: Milliseconds for the sidebar to show what the kernel did.
SHOW_TIMEOUT_MS = 30_000


def screenshot(locator: Any, path: Path) -> None:
    locator.page.mouse.move(0, 0)  # no hover highlight where the last click left the pointer
    locator.screenshot(path=str(path), animations="disabled")
    assert path.stat().st_size > 2_000, f"{path} is suspiciously small: a blank screenshot?"


def run_command(page: Any, command: str, args: dict[str, Any] | None = None) -> None:
    """Run a JupyterLab command the way a menu item or the palette would."""
    page.evaluate("([id, args]) => window.jupyterapp.commands.execute(id, args)", [command, args or {}])


def use_theme(page: Any, theme: str) -> None:
    run_command(page, "apputils:change-theme", {"theme": theme})
    page.wait_for_function(
        "(light) => document.body.dataset.jpThemeLight === light",
        arg="true" if theme == "JupyterLab Light" else "false",
    )


def wait_failed(notebook: Notebook, index: int, timeout_ms: float = CELL_TIMEOUT_MS) -> str:
    """Wait until cell *index* has finished (with an error) and shows it; return its output's text.

    The prompt shows the execution count once the reply is in; the error's output may be
    rendered a moment later.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while not (re.match(r"^\[\d+\]:$", notebook.prompt(index)) and notebook.output_text(index)):
        assert time.monotonic() < deadline, f"cell {index} did not finish: {notebook.output_text(index)}"
        time.sleep(0.1)
    return notebook.output_text(index)


def share_data(lab: JupyterLab) -> None:
    data = lab.data_folder()
    (data / "sales.csv").write_text(SALES_CSV, encoding="utf-8")


def open_with_data(lab: JupyterLab, page: Any, name: str, cells: list[str]) -> Notebook:
    """:func:`share_data`, then a new notebook *name* of *cells*, open in *page*."""
    share_data(lab)
    notebook = Notebook(page, lab, lab.create_notebook(name, cells))
    notebook.open()
    return notebook


KILL_SWITCH = [
    "%load_ext jupyter_fsbroker",
    "import jupyter_fsbroker as fsb, sys\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    'broker.allow("data", ("read", "watch"))',
    f"analysis = broker.connect('analysis', {SERVER})\n"
    'kept = analysis.connection.handle("files/read", {"path": "data/sales.csv", "keepLocked": True})',
    'analysis.call_tool("watch_changes", {"path": "data", "seconds": 300})',
]


def test_the_sidebar_lists_the_server_and_lock_and_disconnects_a_blocked_call(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    from playwright.sync_api import expect

    notebook = open_with_data(jupyterlab, page, "kill-switch.ipynb", KILL_SWITCH)
    sidebar = page.locator("#fsbroker-sidebar")
    status = page.locator("#fsbroker-status")

    # The kernel has no broker yet: the sidebar says how to start one, the status item says "off".
    status.click()
    expect(sidebar).to_be_visible()
    expect(sidebar).to_contain_text("%load_ext jupyter_fsbroker")
    expect(status).to_contain_text("File broker: off")

    for index in range(3):
        notebook.run_and_wait(index)
    connection = sidebar.locator(".fsbroker-connection")
    expect(connection).to_contain_text(re.compile(r"analysis.*stdio · open"), timeout=SHOW_TIMEOUT_MS)
    lock = sidebar.locator(".fsbroker-lock")
    expect(lock).to_contain_text("data/sales.csv")
    expect(lock).to_contain_text("analysis · exclusive")
    expect(sidebar.locator(".fsbroker-grant")).to_contain_text("every server")
    expect(status).to_have_text("File broker: 1 server · 1 lock")
    screenshot(sidebar.locator(".fsbroker-sidebar-body"), screenshot_dir / "sidebar.png")
    statusbar = page.locator("#jp-main-statusbar")
    screenshot(statusbar, screenshot_dir / "status.png")
    use_theme(page, "JupyterLab Dark")
    screenshot(sidebar.locator(".fsbroker-sidebar-body"), screenshot_dir / "sidebar-dark.png")
    screenshot(statusbar, screenshot_dir / "status-dark.png")
    use_theme(page, "JupyterLab Light")

    # The call blocks the main shell; Disconnect in the sidebar ends it all the same.
    notebook.run(3)
    expect(sidebar.locator(".fsbroker-sidebar-activity")).to_contain_text("files/watch")
    assert notebook.prompt(3) == "[*]:", "the call should still block"
    sidebar.locator(".fsbroker-sidebar-disconnect").click()
    output = wait_failed(notebook, 3)
    assert "ConnectionClosedError" in output, output
    expect(connection).to_contain_text("closed", timeout=SHOW_TIMEOUT_MS)
    expect(connection.locator(".fsbroker-sidebar-disconnect")).to_be_disabled()
    expect(sidebar.locator(".fsbroker-message")).to_contain_text("Disconnected analysis.")
    expect(sidebar.locator(".fsbroker-lock")).to_have_count(0)  # its locks ended with it
    expect(status).to_have_text("File broker: 0 servers · 0 locks")


CONSENT = [
    "%load_ext jupyter_fsbroker",
    "import jupyter_fsbroker as fsb, sys\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    f"analysis = broker.connect('analysis', {SERVER})",
    "analysis.revoke()\n"
    'result = analysis.call_tool("write_report", {"path": "data/sales.csv"})\n'
    'result.data["report"]',
]


def test_a_consent_dialog_unblocks_a_sync_cell_and_yields_to_the_cell_prompt(
    jupyterlab: JupyterLab, page: Any, screenshot_dir: Path
) -> None:
    from playwright.sync_api import expect

    notebook = open_with_data(jupyterlab, page, "consent.ipynb", CONSENT)
    notebook.run_and_wait(0)
    notebook.run_and_wait(1)
    status = page.locator("#fsbroker-status")
    expect(status).to_have_text("File broker: 1 server · 0 locks", timeout=SHOW_TIMEOUT_MS)

    # The blocked call's consent request appears as a dialog too; Approve there unblocks the cell.
    notebook.run(2)
    dialog = page.locator("#fsbroker-consent-dialog")
    expect(dialog).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    expect(dialog).to_contain_text("analysis asks for access to your files")
    # Per path, what the server asked for it: read on the data, write on the report only.
    rows = dialog.locator(".fsbroker-consent-path")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("data/sales.csv")
    expect(rows.nth(0).locator(".fsbroker-consent-op-read")).to_be_checked()
    expect(rows.nth(0).locator(".fsbroker-consent-op-write")).to_have_count(0)
    expect(rows.nth(1)).to_contain_text("data/sales.report.md")
    expect(rows.nth(1).locator(".fsbroker-consent-op-write")).to_be_checked()
    expect(status.locator(".fsbroker-status-badge")).to_have_text("1")
    screenshot(dialog, screenshot_dir / "consent-dialog.png")
    assert notebook.prompt(2) == "[*]:"
    prompt = notebook.cell(2).locator(".fsbroker-consent")
    expect(prompt).to_be_visible(timeout=SHOW_TIMEOUT_MS)  # the cell shows the same request
    dialog.locator(".fsbroker-dialog-approve").click()
    output = notebook.wait_done(2)
    assert output.rstrip().endswith("'data/sales.report.md'"), output
    expect(prompt.locator(".fsbroker-consent-outcome")).to_contain_text(
        "Approved read on data/sales.csv; write on data/sales.report.md"
    )
    expect(status.locator(".fsbroker-status-badge")).to_have_count(0)

    # Again in the dark theme; this time the cell's own prompt answers first and the dialog yields.
    use_theme(page, "JupyterLab Dark")
    notebook.run(2)
    expect(dialog).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    screenshot(dialog, screenshot_dir / "consent-dialog-dark.png")
    # The report exists now: a write replaces it, so write is destructive and starts unticked.
    expect(rows.nth(1)).to_contain_text("write: replaces a")
    expect(rows.nth(1).locator(".fsbroker-consent-op-write")).not_to_be_checked()
    cell_prompt = notebook.cell(2).locator(".fsbroker-consent")
    write = cell_prompt.locator(".fsbroker-consent-row").nth(1).locator(".fsbroker-op-write input")
    expect(write).not_to_be_checked()
    write.dispatch_event("click")  # the panel may float over the cell: click the elements themselves
    expect(write).to_be_checked()
    cell_prompt.locator(".fsbroker-approve").dispatch_event("click")
    expect(dialog).to_have_count(0, timeout=SHOW_TIMEOUT_MS)
    # The toast closes itself after 8 s, which a loaded machine may take to get here; JupyterLab's
    # notification center keeps what it said.
    center = page.locator(".jp-Notification-Status")
    center.click()
    said = page.locator(".jp-Notification-Center .jp-Notification-List-Item")
    expect(said.filter(has_text="answered in the notebook")).to_contain_text(
        "analysis: Approved read on data/sales.csv"
    )
    center.click()
    assert notebook.wait_done(2).rstrip().endswith("'data/sales.report.md'")


def test_the_sidebar_follows_the_current_notebook_and_recovers_from_reload_and_restart(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    share_data(jupyterlab)
    first = Notebook(
        page,
        jupyterlab,
        jupyterlab.create_notebook(
            "first.ipynb",
            [
                "%load_ext jupyter_fsbroker\n"
                "import jupyter_fsbroker as fsb\n"
                'fsb.get_broker().add_root("data", name="data")',
                '%reload_ext jupyter_fsbroker\nfsb.get_broker().add_root("out", name="out")',
            ],
        ),
    )
    jupyterlab.create_notebook("second.ipynb", ["1 + 1"])
    first.open()
    run_command(page, "fsbroker:open-sidebar")
    sidebar = page.locator("#fsbroker-sidebar")
    roots = sidebar.locator(".fsbroker-section-roots")
    first.run_and_wait(0)
    expect(roots).to_contain_text("data", timeout=SHOW_TIMEOUT_MS)

    # A second notebook, with its own kernel and no broker: the sidebar follows the current one.
    run_command(page, "docmanager:open", {"path": "second.ipynb"})
    expect(sidebar.locator(".fsbroker-sidebar-kernel")).to_have_text("second.ipynb")
    wait_kernel_ready(page, CELL_TIMEOUT_MS / 1000)
    expect(sidebar).to_contain_text("%load_ext jupyter_fsbroker", timeout=SHOW_TIMEOUT_MS)
    run_command(page, "docmanager:open", {"path": "first.ipynb"})
    expect(sidebar.locator(".fsbroker-sidebar-kernel")).to_have_text("first.ipynb")
    expect(roots).to_contain_text("data")

    # %reload_ext: a new broker, which the sidebar picks up by itself.
    (jupyterlab.root / "out").mkdir()
    first.run_and_wait(1)
    expect(roots).to_contain_text("out", timeout=SHOW_TIMEOUT_MS)

    # A kernel restart: the new kernel has no broker, and the sidebar says so.
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    expect(sidebar).to_contain_text("%load_ext jupyter_fsbroker", timeout=SHOW_TIMEOUT_MS)
    first.run_and_wait(0)
    expect(roots).to_contain_text("data", timeout=SHOW_TIMEOUT_MS)


DENIED = [
    "%load_ext jupyter_fsbroker",
    "import jupyter_fsbroker as fsb, sys\n"
    "broker = fsb.get_broker()\n"
    'broker.add_root("data", name="data")\n'
    f"analysis = broker.connect('analysis', {SERVER})",
    'analysis.call_tool("write_report", {"path": "data/sales.csv"})',
]

#: The colour JupyterLab gives a destructive button (its dialogs' ``jp-mod-warn``), which the
#: dashboard's Disconnect wears too.
DESTRUCTIVE = """() => {
  const probe = document.createElement('div');
  probe.style.background = 'var(--jp-warn-color-normal, var(--jp-error-color1))';
  document.body.appendChild(probe);
  const colour = getComputedStyle(probe).backgroundColor;
  probe.remove();
  return colour;
}"""


def test_the_activity_reads_as_the_notebook_says_and_the_server_is_named_whole(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    notebook = open_with_data(jupyterlab, page, "denied.ipynb", DENIED)
    notebook.run_and_wait(0)
    notebook.run_and_wait(1)
    run_command(page, "fsbroker:open-sidebar")
    sidebar = page.locator("#fsbroker-sidebar")
    connection = sidebar.locator(".fsbroker-connection")
    expect(connection).to_contain_text(re.compile(r"analysis.*stdio · open"), timeout=SHOW_TIMEOUT_MS)

    # The server's own name, whole: it wraps instead of being cut, and names itself on hover.
    name = connection.locator(".fsbroker-server-name")
    expect(name).to_have_text("jupyter-fsbroker-analysis")
    expect(name).to_have_attribute("title", "jupyter-fsbroker-analysis")
    assert name.evaluate(
        "e => getComputedStyle(e).textOverflow !== 'ellipsis' && e.scrollWidth <= e.clientWidth"
    )
    # Disconnect is red and destructive, as in the dashboard.
    disconnect = connection.locator(".fsbroker-sidebar-disconnect")
    expect(disconnect).to_have_css("background-color", page.evaluate(DESTRUCTIVE))

    # The server reads before it asks, the user denies: the refusal that opened the flow is grey
    # "asked for consent" (notebook 01's words), the user's denial red "refused".
    notebook.run(2)
    dialog = page.locator("#fsbroker-consent-dialog")
    expect(dialog).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    dialog.locator(".fsbroker-dialog-deny").click()
    output = wait_failed(notebook, 2)
    assert "analysis · write_report was refused: you denied" in output, output
    activity = sidebar.locator(".fsbroker-sidebar-activity li")
    consent = activity.filter(has_text="files/consent")
    expect(consent).to_have_count(1, timeout=SHOW_TIMEOUT_MS)
    expect(consent).to_have_class(re.compile(r"\bfsbroker-tone-red\b"))
    expect(consent.locator(".fsbroker-outcome")).to_have_text("refused")
    first = activity.filter(has_text="data/sales.csv").filter(has_text="asked for consent").last
    expect(first).to_have_class(re.compile(r"\bfsbroker-tone-grey\b"))
    reads = activity.filter(has_text="files/read").evaluate_all("rows => rows.map(row => row.className)")
    assert reads and not any("fsbroker-tone-red" in row for row in reads), reads
    # One 24-hour clock: every row's time is HH:MM:SS, never "2:05:09 PM".
    times = activity.locator(".fsbroker-muted").all_inner_texts()
    assert times and all(re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d", t) for t in times), times
