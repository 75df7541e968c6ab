"""A ``BROWSER`` command that signs in as a person would: Chromium completes the authorization pages.

:mod:`webbrowser` runs it with the authorization URL; it fills the login form
(``FSBROKER_TEST_USER``/``FSBROKER_TEST_PASSWORD``), allows the consent page and waits until the
browser lands on the CLI's loopback page. Each run appends a line to ``FSBROKER_SIGN_IN_LOG``, so
a test can count the sign-ins a person was asked for.
"""

from __future__ import annotations

import os
import sys

from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def main(url: str) -> None:
    with open(os.environ["FSBROKER_SIGN_IN_LOG"], "a", encoding="utf-8") as log:
        log.write("sign-in\n")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        try:
            page = browser.new_page()
            page.goto(url)
            page.fill("#login", os.environ.get("FSBROKER_TEST_USER", "ada"))
            page.fill("#password", os.environ.get("FSBROKER_TEST_PASSWORD", "lovelace-1815"))
            page.click("#submit")
            page.click("#allow")
            page.wait_for_selector("text=Signed in", timeout=30_000)
        finally:
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
