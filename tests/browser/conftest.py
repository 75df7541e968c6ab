"""Fixtures for the browser tests: JupyterLab on 127.0.0.1 and Debian's Chromium driven by playwright.

Needs ``apt-get install -y chromium`` (``playwright install`` cannot download
browsers everywhere; the system Chromium is used instead) and the test extra
(``jupyterlab``, ``playwright``). Without ``/usr/bin/chromium`` the tests are
skipped — except under CI (``CI=true``), where that is a failure.

Set ``FSBROKER_SCREENSHOT_DIR`` (e.g. ``docs/images``) to keep the screenshots
the tests take; otherwise they go to the test's temporary folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ci import cannot_run
from tests.support.env import REPO
from tests.support.processes import Proc, descendants

from .lab import LABEXTENSION, JupyterLab

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Milliseconds playwright waits for an action (click, screenshot) or an ``expect`` before failing.
ACTION_TIMEOUT_MS = 30_000


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember each phase's report on the test item, so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "report_call", None)
    return report is None or report.failed


@pytest.fixture(autouse=True)
def _browser_tools() -> None:
    """Skip (locally) or fail (CI) without Chromium; fail without the Python packages."""
    if not os.access(CHROMIUM, os.X_OK):
        cannot_run(
            f"{CHROMIUM} is missing: install Debian's Chromium with `apt-get install -y chromium`",
            "the browser tests",
        )
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            pytest.fail(f"{module} is not installed: python -m pip install -e '.[test]'")


@pytest.fixture
def screenshot_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$FSBROKER_SCREENSHOT_DIR`` (relative to the checkout), else a temporary
    folder."""
    wanted = os.environ.get("FSBROKER_SCREENSHOT_DIR")
    path = (REPO / wanted) if wanted else (tmp_path / "screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def labextension() -> Path:
    """This checkout's built JupyterLab extension; skipped (locally) or failed (CI) when it is not built."""
    if not (LABEXTENSION / "package.json").is_file():
        message = (
            "the JupyterLab extension is not built: python -m pip install -e . "
            "(or npm run build in labextension/)"
        )
        cannot_run(message, "the browser tests")
    return LABEXTENSION


@pytest.fixture
def jupyterlab(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[JupyterLab]:
    """A running JupyterLab in its own home; stopped afterwards, with a check that no process outlives it.

    Parametrize it indirectly with ``{"app": "notebook"}`` for Notebook 7, or ``{"theme": ...}``.
    It serves the JupyterLab extension to the tests that use the ``labextension`` fixture only.
    """
    lab = JupyterLab(
        tmp_path_factory.mktemp("jupyterlab"),
        labextension="labextension" in request.fixturenames,
        **getattr(request, "param", {}),
    )
    lab.start()
    try:
        yield lab
    finally:
        left = lab.stop()
    if left:
        listed = "\n".join(f"  {p.pid}: {p.command}" for p in left)
        pytest.fail(f"processes outlived JupyterLab (killed now):\n{listed}\n{lab.log_tail()}")


def _new_processes(before: set[tuple[int, int]], lab: JupyterLab) -> list[Proc]:
    """Processes this test process started since *before* was taken, except JupyterLab's."""
    lab_pids = {lab.proc.pid} if lab.proc is not None else set()
    lab_pids.update(p.pid for p in lab.remember_processes())
    return [p for p in descendants(os.getpid()) if (p.pid, p.started) not in before and p.pid not in lab_pids]


@pytest.fixture
def page(jupyterlab: JupyterLab, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A Chromium page (playwright's sync API); on failure, a screenshot and JupyterLab's log are kept."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=ACTION_TIMEOUT_MS)  # its default, 5 s, is short for a loaded CI machine
    before = {(p.pid, p.started) for p in descendants(os.getpid())}
    started: list[Proc] = []
    console: list[str] = []
    env: dict[str, str | float | bool] = dict(jupyterlab.env)  # the browser's home is a temporary one too
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            env=env,
            timeout=ACTION_TIMEOUT_MS * 2,
        )
        started = _new_processes(before, jupyterlab)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            page = context.new_page()
            page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
            page.on("pageerror", lambda error: console.append(f"page error: {error}"))
            yield page
            if _failed(request):
                shot = tmp_path / "failure.png"
                try:
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"screenshot of the page at the failure: {shot}")
                except Exception as exc:
                    print(f"no screenshot at the failure: {exc!r}")
                print("browser console:\n" + "\n".join(console[-50:]))
                print("JupyterLab's log:\n" + jupyterlab.log_tail())
        finally:
            started += _new_processes(before, jupyterlab)
            browser.close()
    # The browser and playwright's driver must be gone with it.
    deadline = time.monotonic() + 10.0
    left = [p for p in started if p.alive()]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if p.alive()]
    for proc in left:
        proc.kill()
    if left:
        listed = "\n".join(f"  {p.pid}: {p.command}" for p in left)
        pytest.fail(f"browser processes outlived the test (killed now):\n{listed}")
