"""What the sandbox costs at start-up: a sandboxed server vs the same server unconfined.

``python benchmarks/sandbox_startup.py`` starts each server below many times,
alternating confined and unconfined runs so both see the same load, and prints
the median [min-max] of:

* ``python -c pass`` and ``/bin/true``: process start to exit — the launcher's own
  cost (an isolated interpreter that reads the policy, confines itself and execs);
* the example analysis server (Python, ``mcp``) and, when Node and the interop
  packages are there, the official filesystem server: process start to the
  ``initialize`` answer over stdio — what a user waits for;
* ``prepare()``: the broker's side (the policy computed from the command, the
  private folder and the policy file), first call (it asks the interpreter for its
  ``sys.path``) and later calls (cached).

``--repeats N`` (default 11), ``--json FILE`` writes the raw figures. Needs Landlock.
Nothing is written outside the temporary folders the sandbox creates and removes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's package

from jupyter_fsbroker.sandbox import choose, prepare  # noqa: E402
from jupyter_fsbroker.sandbox.launch import landlock_abi  # noqa: E402

INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"roots": {"listChanged": True}},
                "clientInfo": {"name": "sandbox-startup", "version": "0"},
            },
        }
    )
    + "\n"
).encode()


def environment() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE.parent), path) if p)}


def run_to_exit(command: Sequence[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def run_to_initialize(command: Sequence[str], env: dict[str, str]) -> float:
    """Start an MCP server over stdio; seconds until its answer to ``initialize``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
        if b'"result"' not in line:
            raise RuntimeError(f"{command[0]} did not answer initialize: {line[:200]!r}")
        return elapsed
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def timed_pair(
    command: Sequence[str], measure: Callable[[Sequence[str], dict[str, str]], float], repeats: int
) -> dict[str, list[float]]:
    """*repeats* unconfined and confined runs of *command*, alternating."""
    env = environment()
    figures: dict[str, list[float]] = {"unconfined": [], "sandboxed": []}
    measure(command, env)  # warm the page cache for both
    for _ in range(repeats):
        figures["unconfined"].append(measure(command, env))
        with prepare(command, choose(True), env=env) as launch:
            figures["sandboxed"].append(measure(launch.command, {**env, **launch.env}))
    return figures


def prepare_cost(repeats: int) -> dict[str, list[float]]:
    from jupyter_fsbroker.sandbox import reach

    command = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]
    figures: dict[str, list[float]] = {"first": [], "cached": []}
    for _ in range(max(3, repeats // 3)):
        reach._python_paths.cache_clear()
        for key in ("first", "cached"):
            started = time.perf_counter()
            with prepare(command, choose(True), env=environment()):
                figures[key].append(time.perf_counter() - started)
    return figures


def official_server() -> list[str] | None:
    node = shutil.which("node")
    cache = Path(os.environ.get("FSBROKER_NODE_DIR", Path.home() / ".cache" / "jupyter_fsbroker" / "node"))
    entry = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    scripts = sorted(cache.glob(f"interop-*/{entry}"))
    if node is None or not scripts:
        return None
    return [node, str(scripts[-1])]


def summary(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms [{min(values) * 1000:.1f}-{max(values) * 1000:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    abi = landlock_abi()
    cases: list[tuple[str, Sequence[str], Callable[[Sequence[str], dict[str, str]], float]]] = [
        ("python -c pass (to exit)", [sys.executable, "-c", "pass"], run_to_exit),
        ("/bin/true (to exit)", ["/bin/true"], run_to_exit),
        (
            "example analysis server (to initialize)",
            [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"],
            run_to_initialize,
        ),
    ]
    official = official_server()
    if official is not None:
        cases.append(("official filesystem server, Node (to initialize)", official, run_to_initialize))
    load = os.getloadavg()[0]
    print(
        f"sandbox start-up cost, Landlock ABI {abi}, {os.cpu_count()} cores, load {load:.1f},"
        f" n={args.repeats}"
    )
    print(f"{'':52} {'unconfined':>26} {'sandboxed':>26} {'extra':>10}")
    results: dict[str, dict[str, list[float]]] = {}
    for name, command, measure in cases:
        figures = timed_pair(command, measure, args.repeats)
        results[name] = figures
        extra = statistics.median(figures["sandboxed"]) - statistics.median(figures["unconfined"])
        print(
            f"{name:52} {summary(figures['unconfined'])} {summary(figures['sandboxed'])}"
            f" {extra * 1000:+8.1f} ms"
        )
    if official is None:
        print("(official filesystem server: not installed; run the interop tests once to install it)")
    cost = prepare_cost(args.repeats)
    results["prepare()"] = cost
    print(
        f"{'prepare(): policy, private folder (first / cached)':52} {summary(cost['first'])}"
        f" {summary(cost['cached'])}"
    )
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"abi": abi, "repeats": args.repeats, "figures": results}, indent=1))


if __name__ == "__main__":
    main()
