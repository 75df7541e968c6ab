"""A ``BROWSER`` command that signs in as a person would: Chromium completes the authorization pages.

:mod:`webbrowser` runs it with the authorization URL; it fills the login form
(``FSBROKER_TEST_USER``/``FSBROKER_TEST_PASSWORD``), allows the consent page and waits until the
browser lands on the CLI's loopback page. Each run appends a line to ``FSBROKER_SIGN_IN_LOG``, so
a test can count the sign-ins a person was asked for. :func:`signed_in_browser` and
:func:`complete_pages` are the steps, for the commands that do more (``replay_browser.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Page, sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@contextmanager
def signed_in_browser() -> Iterator[Page]:
    """A page of a fresh headless Chromium, for the block; counts one sign-in a person was asked for."""
    with open(os.environ["FSBROKER_SIGN_IN_LOG"], "a", encoding="utf-8") as log:
        log.write("sign-in\n")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def complete_pages(page: Page, url: str) -> None:
    """Open *url* and fill the login form; stop at the consent page's Allow button."""
    page.goto(url)
    page.fill("#login", os.environ.get("FSBROKER_TEST_USER", "ada"))
    page.fill("#password", os.environ.get("FSBROKER_TEST_PASSWORD", "lovelace-1815"))
    page.click("#submit")
    page.wait_for_selector("#allow")


def main(url: str) -> None:
    with signed_in_browser() as page:
        complete_pages(page, url)
        page.click("#allow")
        page.wait_for_selector("text=Signed in", timeout=30_000)


if __name__ == "__main__":
    main(sys.argv[1])
