"""A ``BROWSER`` command that signs in, stops at the redirect back to the client, and replays it altered.

``page.route`` sees only the first request of a redirect chain, and the redirect to the
client's loopback receiver ends one (consent form POST → the authorization server's resume
endpoint → the redirect URI). So the consent POST is routed: its chain is followed by hand,
without following the last hop (the context's cookies go along), and the page is given a
stand-in. The redirect's address, altered as ``FSBROKER_REPLAY`` says, is then opened:

* ``state``: another ``state``; then the genuine address (the sign-in must still be waiting);
* ``iss``: another ``iss`` (the genuine ``state``).

Each address opened is one JSON line of ``FSBROKER_REPLAY_LOG``: which one, the HTTP status
and the page's text.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from playwright.sync_api import Page, Route
from sign_in_browser import complete_pages, signed_in_browser

STOPPED = "stopped at the redirect"


def altered(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


def stop_at_the_redirect(page: Page) -> str:
    """Allow the consent page; return the address it redirects the browser to, not opened."""
    caught: list[str] = []

    def follow_by_hand(route: Route) -> None:
        response = route.fetch(max_redirects=0)
        location = urljoin(route.request.url, response.headers["location"])
        while urlsplit(location).path != "/callback":
            response = page.context.request.get(location, max_redirects=0)
            location = urljoin(location, response.headers["location"])
        caught.append(location)
        route.fulfill(status=200, content_type="text/html", body=f"<p>{STOPPED}</p>")

    page.route("**/interaction/**", follow_by_hand)
    page.click("#allow")
    page.wait_for_selector(f"text={STOPPED}")
    page.unroute("**/interaction/**")
    return caught[0]


def main(url: str) -> None:
    mode = os.environ["FSBROKER_REPLAY"]
    with signed_in_browser() as page, open(os.environ["FSBROKER_REPLAY_LOG"], "a", encoding="utf-8") as log:
        complete_pages(page, url)
        redirect = stop_at_the_redirect(page)
        if mode == "state":
            replays = [("tampered", altered(redirect, state="not-the-state-sent")), ("genuine", redirect)]
        else:
            replays = [("tampered", altered(redirect, iss="http://127.0.0.1:1"))]
        for which, address in replays:
            response = page.goto(address)
            status = response.status if response is not None else None
            log.write(
                json.dumps({"address": which, "status": status, "text": page.inner_text("body")}) + "\n"
            )
            log.flush()


if __name__ == "__main__":
    main(sys.argv[1])
