"""A ``BROWSER`` command for the conformance suite: fetch the authorization page, follow its redirects.

The suite's mock authorization servers answer ``GET /authorize`` with an immediate redirect to
the client's redirect URI (no login page), so a browser only has to follow it to the CLI's
loopback listener. :mod:`webbrowser` runs ``BROWSER`` with ``%s`` replaced by the URL and waits
for it to exit.
"""

from __future__ import annotations

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=30) as response:
    response.read()
