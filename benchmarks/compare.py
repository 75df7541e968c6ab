"""Two checkouts measured in one interleaved run: is a change slower, beyond the machine's noise?

``python benchmarks/compare.py --against ../other-checkout --rows 2,4 --rounds 3`` runs
``benchmarks/run.py`` of this checkout and of the other one alternately (this, other, this,
other, ...), each with its own package (every run imports the checkout it lives in), in the same
environment and with the same options, and prints for every row the medians of both side by
side: the measured figure and the ratio to the baseline the same run measured. Alternating is
what makes the comparison fair on a shared machine: a burst of load lands on both sides, not on
one. A run's JSON files are kept in ``--out`` (default: a temporary folder, printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def primary(figures: dict[str, Any]) -> tuple[str, float] | None:
    """The figure a row is judged by: its first list of numbers that is not a baseline's or a ceiling's."""
    for key, value in figures.items():
        if key.startswith(("baseline", "ceiling", "ratio")) or not isinstance(value, list) or not value:
            continue
        if all(isinstance(x, int | float) for x in value):
            return key, statistics.median(value)
    return None


def one_run(checkout: Path, passed: list[str], out: Path) -> dict[str, Any]:
    command = [sys.executable, str(checkout / "benchmarks" / "run.py"), *passed, "--json", str(out)]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=checkout, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def summary(runs: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    """Per row: the median of its primary figure and of its ratio over the runs."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for run in runs:
        for row in run["rows"]:
            entry = rows.setdefault(
                (row["number"], row["variant"]), {"what": row["what"], "figure": [], "ratio": []}
            )
            figures = row.get("figures") or {}
            found = primary(figures)
            if found is not None:
                entry["unit"] = found[0]
                entry["figure"].append(found[1])
            if isinstance(figures.get("ratio"), int | float):
                entry["ratio"].append(figures["ratio"])
    return rows


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (its root folder)")
    parser.add_argument("--rows", required=True, help="the rows to measure, e.g. 2,4")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each checkout, alternating (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="passed to run.py")
    parser.add_argument("--repeats", type=int, help="passed to run.py")
    parser.add_argument("--out", type=Path, help="folder for the runs' JSON files")
    args = parser.parse_args()
    passed = ["--rows", args.rows] + (["--quick"] if args.quick else [])
    passed += ["--repeats", str(args.repeats)] if args.repeats else []
    out = args.out or Path(tempfile.mkdtemp(prefix="fsbroker-compare-"))
    out.mkdir(parents=True, exist_ok=True)
    sides = {"this": HERE.parent, "other": args.against.resolve()}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for n in range(args.rounds):
        for side, checkout in sides.items():
            runs[side].append(one_run(checkout, passed, out / f"{side}-{n}.json"))
    these, others = summary(runs["this"]), summary(runs["other"])
    print(f"\nthis: {sides['this']} ({runs['this'][0]['machine']['commit'][:10]})")
    print(f"other: {sides['other']} ({runs['other'][0]['machine']['commit'][:10]})")
    print(f"{args.rounds} runs each, alternating; median [min-max] of the runs' medians\n")
    for key in sorted(these.keys() | others.keys()):
        a, b = these.get(key, {}), others.get(key, {})
        label = f"{key[0]}{key[1]}"
        print(f"row {label}: {a.get('what') or b.get('what')}")
        print(
            f"  {a.get('unit') or b.get('unit') or 'figure'}: this {cell(a.get('figure', []))}"
            f"  other {cell(b.get('figure', []))}"
        )
        print(f"  ratio to baseline: this {cell(a.get('ratio', []))}  other {cell(b.get('ratio', []))}")
    print(f"\nruns: {out}")


if __name__ == "__main__":
    main()
