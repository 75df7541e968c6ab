"""The client under test for the MCP conformance suite: the product's CLI, driven per scenario.

The suite runs ``driver.py URL`` (it appends its server's URL to the command), with the
scenario's name in ``MCP_CONFORMANCE_SCENARIO``. This script turns the scenario into the
options a user would give ``jupyter-fsbroker connect --url URL`` and replaces itself with
that command, so the suite judges the CLI's own exit status. The suite never reads a
client's output: it judges what the client did against its own servers.
"""

from __future__ import annotations

import os
import sys

#: What the CLI is asked to do in each scenario (the tools the suite's servers offer).
ACTIONS: dict[str, list[str]] = {
    "initialize": ["--list-tools"],
    "tools_call": ["--call", "add_numbers", "--args", '{"a": 2, "b": 3}'],
    "sse-retry": ["--call", "test_reconnection"],
}


def command(scenario: str, url: str) -> list[str]:
    """The CLI's command line for *scenario* against the suite's server at *url*."""
    if scenario not in ACTIONS:
        raise SystemExit(f"driver.py: no options for the scenario {scenario!r}")
    return [sys.executable, "-m", "jupyter_fsbroker", "connect", "--url", url, *ACTIONS[scenario]]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: driver.py URL (with MCP_CONFORMANCE_SCENARIO set)")
    argv = command(os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), sys.argv[1])
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
