"""The official MCP conformance suite (``@modelcontextprotocol/conformance``), pinned, one scenario at a time.

:func:`install` installs the suite's committed lock (``js/``) with Node 24
(:mod:`tests.support.node`); :meth:`Suite.run_client` runs one client scenario against a
command and returns what the suite recorded (``checks.json``: one entry per check, with a
``status`` of ``SUCCESS``, ``FAILURE``, ``WARNING``, ``INFO`` or ``SKIPPED``) and its exit
status. Scenarios run one after the other: ``--suite`` starts all its clients at once, too
many for a shared two-core machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.node import Node, install_or_skip

#: The pinned version (also in ``js/package.json`` and its lock).
VERSION = "0.1.16"
JS = Path(__file__).resolve().parent / "js"
#: Seconds one scenario may take, the client's own run included (the suite's limit is 30 s).
SCENARIO_TIMEOUT = 90


@dataclass(frozen=True)
class Outcome:
    """What the suite said about one scenario."""

    scenario: str
    returncode: int
    checks: list[dict[str, Any]]
    output: str

    def with_status(self, status: str) -> list[dict[str, Any]]:
        return [check for check in self.checks if check["status"] == status]

    def counts(self) -> dict[str, int]:
        """``SUCCESS``, ``FAILURE`` and ``WARNING``: how many checks had each."""
        return {status: len(self.with_status(status)) for status in ("SUCCESS", "FAILURE", "WARNING")}

    def problems(self) -> list[str]:
        """The failures and warnings, one line each (for assertion messages)."""
        return [
            f"{check['status']} {check['id']}: {check.get('errorMessage') or check.get('description')}"
            for check in self.checks
            if check["status"] in ("FAILURE", "WARNING")
        ]


@dataclass(frozen=True)
class Suite:
    node: Node
    folder: Path

    @property
    def entry(self) -> str:
        return str(
            self.folder / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
        )

    def client_scenarios(self) -> list[str]:
        """The client scenarios this version lists, in its order."""
        return [name for name, _ in self.client_scenarios_with_versions()]

    def client_scenarios_with_versions(self) -> list[tuple[str, set[str]]]:
        """The client scenarios with the spec revisions each is for (``2025-11-25``, ``draft`` ...)."""
        done = subprocess.run(
            [self.node.node, self.entry, "list"], capture_output=True, text=True, timeout=60, check=True
        )
        lines = done.stdout.split("Client scenarios", 1)[1].splitlines()
        found = []
        for line in lines:
            if line.strip().startswith("- "):
                name, _, versions = line.strip()[2:].partition(" ")
                found.append((name, set(versions.strip("[]").split(","))))
        return found

    def run_client(
        self, scenario: str, command: str, output: Path, env: dict[str, str] | None = None
    ) -> Outcome:
        """Run *scenario* with *command* as the client (the suite appends its URL); its checks.

        *command* is split on spaces by the suite and run through a shell.
        """
        output.mkdir(parents=True, exist_ok=True)
        argv = [self.node.node, self.entry, "client", "--command", command, "--scenario", scenario]
        # In a session of its own: the suite kills only the shell it started when a client
        # times out, and whatever is left of the run is killed here, so nothing outlives it.
        process = subprocess.Popen(
            [*argv, "-o", str(output)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            # Not the checkout: ``python -m`` puts the working folder first on sys.path, and the
            # checkout that runs must be the one the environment's PYTHONPATH names.
            cwd=output,
            start_new_session=True,
        )
        try:
            printed, _ = process.communicate(timeout=SCENARIO_TIMEOUT)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        found = sorted(output.glob(f"{scenario}-*/checks.json"))
        checks: list[dict[str, Any]] = json.loads(found[-1].read_text()) if found else []
        client_output = ""
        if found:
            for name in ("stdout.txt", "stderr.txt"):
                path = found[-1].parent / name
                if path.is_file():
                    client_output += f"--- client {name}\n{path.read_text(errors='replace')}"
        return Outcome(scenario, process.returncode, checks, printed + client_output)


def install() -> Suite:
    """The installed suite, or a skip (a failure under CI) when Node 24 or npm cannot provide it."""
    node, folder = install_or_skip(JS, f"conformance-{VERSION}", "the MCP conformance suite")
    return Suite(node, folder)
