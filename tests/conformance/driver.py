"""The client under test for the MCP conformance suite: the product's CLI, driven per scenario.

The suite runs ``driver.py URL`` (it appends its server's URL to the command), with the
scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for some, data in
``MCP_CONFORMANCE_CONTEXT`` (a pre-registered client's id and secret). This script turns the
scenario into the options a user would give ``jupyter-fsbroker connect --url URL`` and
replaces itself with that command, so the suite judges the CLI's own exit status. The suite
never reads a client's output: it judges what the client did against its own servers.

In the ``auth/*`` scenarios the CLI signs in as it does for a person: it opens the
authorization URL with :mod:`webbrowser`, whose ``BROWSER`` is :mod:`.headless_browser`
(set by the test), and takes the redirect on its loopback listener.
"""

from __future__ import annotations

import json
import os
import sys

#: What the CLI is asked to do in each scenario (the tools the suite's servers offer).
ACTIONS: dict[str, list[str]] = {
    "initialize": ["--list-tools"],
    "tools_call": ["--call", "add_numbers", "--args", '{"a": 2, "b": 3}'],
    "sse-retry": ["--call", "test_reconnection"],
}


#: The client metadata document the suite's authorization servers accept (``auth/basic-cimd``).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def command(scenario: str, url: str, context: dict[str, str]) -> list[str]:
    """The CLI's command line for *scenario* against the suite's server at *url*."""
    if scenario.startswith("auth/"):
        options = ["--call", "test-tool", "--oauth-client-metadata-url", CLIENT_METADATA_URL]
        if context.get("client_id"):
            options += ["--oauth-client-id", context["client_id"]]
        # The secret goes by the environment, as the CLI's help advises.
    elif scenario in ACTIONS:
        options = ACTIONS[scenario]
    else:
        raise SystemExit(f"driver.py: no options for the scenario {scenario!r}")
    return [sys.executable, "-m", "jupyter_fsbroker", "connect", "--url", url, *options]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: driver.py URL (with MCP_CONFORMANCE_SCENARIO set)")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    argv = command(os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), sys.argv[1], context)
    env = dict(os.environ)
    if context.get("client_secret"):
        env["JUPYTER_FSBROKER_OAUTH_CLIENT_SECRET"] = context["client_secret"]
    os.execve(argv[0], argv, env)


if __name__ == "__main__":
    main()
