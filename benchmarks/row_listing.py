"""Row 5: a recursive ``files/list`` of a large tree, page by page, over stdio.

The tree holds half of its files in folders of 1,000 and the other half in
one large folder listed last (``Bench.tree``). ``wire_server.py``'s
``list_pages`` follows ``nextCursor`` from the first page to the last and
times each ``files/list`` in the server tool. Reported: entries
per second over the whole listing (median of the repeats), and the time of the
first and the last full pages. Page time counts as flat when the mean of the
last two full pages is at most 1.5 times the mean of the first two (medians
over the repeats).
"""

from __future__ import annotations

from context import Bench
from report import Row, summarize
from stats import median

NUMBERS = (5,)
GOAL = 100_000
FLAT = 1.5


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    folder = bench.tree(s.list_files)
    job = {"tool": "list_pages", "args": {"path": folder, "page_size": s.list_page}}
    bench.log(f"row 5: {s.repeats} x recursive list of {s.list_files:,} files, {s.list_page:,} per page")
    results = [bench.stdio_worker().call(job) for _ in range(s.repeats)]
    for result in results:
        # Every file plus every subfolder.
        if result["entries"] < s.list_files:
            raise RuntimeError(f"row 5: listed {result['entries']} entries, expected at least {s.list_files}")
    rates = [r["entries"] / r["seconds"] for r in results]
    pages = [[p["seconds"] * 1000 for p in r["pages"]] for r in results]
    # Full pages only: the last page holds what is left, often a few entries.
    full = [[p["seconds"] * 1000 for p in r["pages"] if p["entries"] == s.list_page] for r in results]
    if len(full[0]) < 4:
        raise RuntimeError("row 5: fewer than 4 full pages; use more files or smaller pages")
    first = median([(p[0] + p[1]) / 2 for p in full])
    last = median([(p[-1] + p[-2]) / 2 for p in full])
    growth = last / first
    rate = median(rates)
    flat = growth <= FLAT
    return [
        Row(
            number=5,
            what=f"recursive files/list of {s.list_files:,} files, {s.list_page:,} per page",
            value=summarize([r / 1000 for r in rates], "{:.1f}", "k entries/s")
            + f"; page {first:.0f} → {last:.0f} ms",
            target=f"≥ {GOAL // 1000}k/s, flat pages",
            met=rate >= GOAL and flat,
            n=s.repeats,
            figures={
                "entries_per_s": rates,
                "entries": results[0]["entries"],
                "page_ms": pages,
                "first_pages_ms": first,
                "last_pages_ms": last,
                "last_over_first": growth,
            },
            note=(
                f"{len(pages[0])} pages; the last full pages take {growth:.2f}x the first"
                f" ({'flat' if flat else 'not flat'}: flat means ≤ {FLAT}x)"
            ),
        )
    ]
