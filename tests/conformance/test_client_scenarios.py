"""The product's CLI as the client under the official MCP conformance suite (0.1.16), scenario by scenario.

No expected-failures list: a scenario passes when the suite's exit status is 0, it
recorded no failure and no warning, and the checks that say the scenario's point was
reached are among its successes. The last part is not optional: the suite judges a client
that does nothing at all a pass ("Passed: 0/0", exit 0), since a scenario that never got a
request records no checks rather than failed ones.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.conformance import driver
from tests.conformance.suite import Outcome, Suite, install
from tests.support.env import server_env

DRIVER = Path(driver.__file__).resolve()

#: The ``auth`` suite of 0.1.16 (``--suite auth``): every scenario of the 2025-06-18 and 2025-11-25
#: revisions; the draft, extension and 2025-03-26 ones are not in it.
AUTH_SUITE = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
)
# Every sign-in: the authorization server found, PKCE S256, a code and a token requested.
_SIGNED_IN = {
    "authorization-server-metadata",
    "authorization-request",
    "pkce-s256-method-used",
    "token-request",
}
_REGISTERED = {"client-registration", "valid-bearer-token"}
_TOKEN_ENDPOINT = {"token-endpoint-auth-method", "resource-parameter-in-token"}

#: The scenarios run, and the successes each must record besides the rest.
EXPECTED: dict[str, set[str]] = {
    "initialize": {"mcp-client-initialization"},
    "tools_call": {"tool-add-numbers"},
    "sse-retry": {"client-sse-graceful-reconnect", "client-sse-retry-timing", "client-sse-last-event-id"},
    "auth/metadata-default": _SIGNED_IN | _REGISTERED,
    "auth/metadata-var1": _SIGNED_IN | _REGISTERED,
    "auth/metadata-var2": _SIGNED_IN | _REGISTERED,
    "auth/metadata-var3": _SIGNED_IN | _REGISTERED,
    "auth/basic-cimd": _SIGNED_IN | {"cimd-client-id-used", "valid-bearer-token"},
    "auth/scope-from-www-authenticate": _SIGNED_IN | _REGISTERED | {"scope-from-www-authenticate"},
    "auth/scope-from-scopes-supported": _SIGNED_IN | _REGISTERED | {"scope-from-scopes-supported"},
    "auth/scope-omitted-when-undefined": _SIGNED_IN | _REGISTERED | {"scope-omitted-when-undefined"},
    "auth/scope-step-up": _SIGNED_IN | _REGISTERED | {"scope-step-up-initial", "scope-step-up-escalation"},
    # The server never grants enough: the call fails (the suite allows the client's error exit).
    "auth/scope-retry-limit": _SIGNED_IN | {"client-registration", "scope-retry-limit"},
    "auth/token-endpoint-auth-basic": _SIGNED_IN | _REGISTERED | _TOKEN_ENDPOINT,
    "auth/token-endpoint-auth-post": _SIGNED_IN | _REGISTERED | _TOKEN_ENDPOINT,
    "auth/token-endpoint-auth-none": _SIGNED_IN | _REGISTERED | _TOKEN_ENDPOINT,
    "auth/pre-registration": _SIGNED_IN | {"pre-registration-auth", "valid-bearer-token"},
}
BROWSER = Path(__file__).resolve().parent / "headless_browser.py"
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_counts() -> dict[str, int]:
    """The README's table of scenarios and the checks each passes (what users are told)."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| conformance scenario | checks passed |") :].split("\n\n", 1)[0]
    return {name: int(count) for name, count in re.findall(r"^\| `([^`]+)` \| (\d+) \|$", table, re.M)}


@pytest.fixture(scope="module")
def suite() -> Suite:
    return install()


def run(suite: Suite, scenario: str, tmp_path: Path, command: str | None = None) -> Outcome:
    client = command or f"{shlex.quote(sys.executable)} {shlex.quote(str(DRIVER))}"
    env = {
        **server_env(),
        "XDG_DATA_HOME": str(tmp_path / "share"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        # The CLI opens the authorization page with webbrowser, which runs this "browser".
        "BROWSER": f"{shlex.quote(sys.executable)} {shlex.quote(str(BROWSER))} %s",
    }
    return suite.run_client(scenario, client, tmp_path / "results", env)


def test_the_scenarios_run_are_ones_the_suite_lists(suite: Suite) -> None:
    assert set(EXPECTED) <= set(suite.client_scenarios())


def test_every_scenario_of_the_auth_suite_is_run(suite: Suite) -> None:
    """A suite that gains an auth scenario fails here, rather than going untested."""
    listed = suite.client_scenarios_with_versions()
    auth_suite = [
        name
        for name, versions in listed
        if name.startswith("auth/") and versions & {"2025-06-18", "2025-11-25"}
    ]
    assert tuple(auth_suite) == AUTH_SUITE
    assert set(AUTH_SUITE) <= set(EXPECTED)


def judge(outcome: Outcome) -> list[str]:
    """Why *outcome* is not a pass of its scenario (empty when it is)."""
    reasons = outcome.problems()
    if outcome.returncode != 0:
        reasons.append(f"the suite exited with {outcome.returncode}")
    succeeded = {check["id"] for check in outcome.with_status("SUCCESS")}
    reasons += [f"no SUCCESS for {missing}" for missing in sorted(EXPECTED[outcome.scenario] - succeeded)]
    return reasons


def test_the_readme_tells_every_scenario_run() -> None:
    assert sorted(readme_counts()) == sorted(EXPECTED)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_scenario_passes(suite: Suite, scenario: str, tmp_path: Path) -> None:
    outcome = run(suite, scenario, tmp_path)
    assert judge(outcome) == [], outcome.output
    # The README says how many checks pass: a suite or client that changes it changes the README.
    assert len(outcome.with_status("SUCCESS")) == readme_counts()[scenario], outcome.output


def test_sse_retry_waits_the_servers_retry_and_resumes_from_its_last_event(
    suite: Suite, tmp_path: Path
) -> None:
    outcome = run(suite, "sse-retry", tmp_path)
    [timing] = [check for check in outcome.checks if check["id"] == "client-sse-retry-timing"]
    [last_id] = [check for check in outcome.checks if check["id"] == "client-sse-last-event-id"]
    assert timing["status"] == "SUCCESS" and last_id["status"] == "SUCCESS", outcome.problems()
    # The server asks for 500 ms; the suite allows 50 ms early and 200 ms late.
    assert 450 <= timing["details"]["actualDelayMs"] <= 700, timing["details"]
    # The call was answered on the resumed stream: the CLI printed the tool's answer.
    assert "Reconnection test completed successfully" in outcome.output


def test_a_client_that_does_nothing_fails_the_scenario(suite: Suite, tmp_path: Path) -> None:
    """The judging can fail: a client that exits at once is no pass, although the suite says it is."""
    outcome = run(suite, "initialize", tmp_path, command=f"{shlex.quote(sys.executable)} -c pass")
    assert judge(outcome) == ["no SUCCESS for mcp-client-initialization"], outcome.output
