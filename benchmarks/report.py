"""What ``run.py`` prints and writes: the rows of the table, the machine they ran on, the JSON file.

A :class:`Row` is one measured line of the table, already judged against its
target by the module that measured it; this module only lays rows out and
describes the machine. It never measures anything.

``python benchmarks/report.py FILE.json`` prints the table of a run ``run.py``
wrote; with ``--markdown``, as Markdown with a header line giving its date,
machine, commit and load: the READMEs' tables are that output.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "Row",
    "describe_machine",
    "markdown_of_run",
    "refusals_note",
    "render_markdown",
    "render_table",
    "summarize",
]

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Row:
    """One line of the table.

    Attributes
    ----------
    number
        The row's number in the issue's table (1-10).
    variant
        ``""`` for the row itself; a letter for a companion measured beside it
        (``4a``, ``4b`` ...), shown after the number.
    what
        What was measured, in a few words.
    value
        The measurement as printed, e.g. ``"52.3 MB/s [48.1-55.0]"``.
    baseline, ratio
        The baseline measured in the same run and the ratio to it (empty without one).
    ceiling
        What no implementation of the row's transport can beat here, measured in
        the same run, and the value's share of it (empty without one).
    target
        The target as printed, e.g. ``"≥ 1.5x"``.
    met
        Whether the target is met; ``None`` when the row could not be measured.
    n
        How many runs (or samples) the value summarizes.
    figures
        The raw numbers, for the JSON file.
    note
        One line printed under the table (sizes in ``--quick``, what was skipped and why ...).
    """

    number: int
    what: str
    value: str
    baseline: str = ""
    ratio: str = ""
    ceiling: str = ""
    target: str = ""
    met: bool | None = None
    n: int = 0
    figures: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    variant: str = ""

    @property
    def label(self) -> str:
        """The row's name in the table: its number and variant (``4``, ``4a``)."""
        return f"{self.number}{self.variant}"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Row:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "variant": self.variant,
            "what": self.what,
            "value": self.value,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "ceiling": self.ceiling,
            "target": self.target,
            "met": self.met,
            "n": self.n,
            "figures": dict(self.figures),
            "note": self.note,
        }


def verdict(met: bool | None) -> str:
    return {True: "met", False: "missed", None: "—"}[met]


def render_table(rows: Sequence[Row]) -> str:
    """The rows as an aligned text table, then their notes."""
    header = ["#", "what", "value", "n", "baseline", "ratio", "ceiling (our share)", "target", "met"]
    cells = [
        [r.label, r.what, r.value, str(r.n or ""), r.baseline, r.ratio, r.ceiling, r.target, verdict(r.met)]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    notes = [f"  {r.label}. {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines)


def render_markdown(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (for the README)."""
    lines = [
        "| # | what | value | baseline (same run) | ratio | ceiling (our share) | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r.label, r.what, r.value, r.baseline, r.ratio, r.ceiling, r.target, verdict(r.met)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    except OSError:
        return ""  # no git: the commit stays unknown
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 0.0


def describe_machine() -> dict[str, Any]:
    """Date, machine, software versions and the checkout's commit."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "system": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(_memory_gib(), 1),
        "python": platform.python_version(),
        "mcp": _version("mcp"),
        "ipykernel": _version("ipykernel"),
        "commit": _git("rev-parse", "HEAD"),
        "branch": _git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


def refusals_note(results: Sequence[Mapping[str, Any]]) -> str:
    """What the broker's default limits refused during a row's worker *results* ("" if nothing).

    Each result of a worker job carries ``refused`` (``bench_wire.Refusals``):
    requests a limit refused, which the helper repeated after ``retryAfterMs``,
    so the row's time includes the waits.
    """
    counts: dict[str, int] = {}
    for result in results:
        for key, n in result.get("refused", {}).items():
            counts[key] = counts.get(key, 0) + n
    if not counts:
        return ""
    listed = ", ".join(f"{n} {key}" for key, n in sorted(counts.items()))
    return f"; the broker's default limits refused requests ({listed}), repeated after retryAfterMs (timed)"


def summarize(values: Sequence[float], fmt: str, unit: str) -> str:
    """``median unit [min-max]`` (just the value when there is one), each number through *fmt*."""
    from stats import median, spread

    text = f"{fmt.format(median(values))} {unit}".rstrip()
    if len(values) > 1:
        low, high = spread(values)
        text += f" [{fmt.format(low)}-{fmt.format(high)}]"
    return text


def markdown_of_run(data: Mapping[str, Any]) -> str:
    """A run's JSON as Markdown: a line on the machine, commit and load, then the table and notes."""
    m = data["machine"]
    settings = data["settings"]
    mode = "`--quick`" if settings["quick"] else "full run"
    if settings.get("rows", "all") != "all":
        mode += " of rows " + ", ".join(str(n) for n in settings["rows"])
    # Taken before and after each row module: the load the rows ran in.
    between = [run[key][0] for run in data["runs"] for key in ("load_before", "load_after")]
    lines = [
        f"Measured {m['date'][:16].replace('T', ' ')} UTC ({mode}, {data['seconds']:.0f} s) on"
        f" {m['cpus']} cores ({m['cpu']}), {m['memory_gib']:.0f} GiB, {m['system']}; Python {m['python']},"
        f" mcp {m['mcp']}, ipykernel {m['ipykernel']}, node {m.get('node') or '-'}; commit"
        f" `{m['commit'][:7]}`"
        + (" with uncommitted changes" if m["dirty"] else "")
        + f". Load average (1 min): {data['load_start'][0]:.1f} at the start"
        + (f", {min(between):.1f} to {max(between):.1f} between the rows" if between else "")
        + f", {data['load_end'][0]:.1f} at the end.",
        "",
    ]
    rows = [Row.from_json(r) for r in data["rows"]]
    lines.append(render_markdown(rows))
    notes = [f"* {r.label}: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Print the table of a run that run.py wrote as JSON.")
    parser.add_argument("json", type=Path, help="the run's JSON file (run.py --json)")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="as Markdown, headed by the run's date, machine and load",
    )
    args = parser.parse_args()
    data = json.loads(args.json.read_text(encoding="utf-8"))
    if args.markdown:
        print(markdown_of_run(data))
    else:
        print(render_table([Row.from_json(r) for r in data["rows"]]))


if __name__ == "__main__":
    main()
