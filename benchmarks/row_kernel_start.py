"""Rows 6 and 7: ``%load_ext jupyter_fsbroker`` in a fresh kernel, and its first consent, click to result.

Each of several fresh kernels (ipykernel via jupyter_client, as the kernel
tests start them) first answers one empty cell, then:

6. ``%load_ext jupyter_fsbroker`` alone is executed and timed from outside,
   from sending the request to its ``execute_reply``;
7. the notebook shares ``./data``, connects the example analysis server over
   stdio and calls its ``profile_csv`` tool in a synchronous cell; the server
   asks for consent; once the prompt shows in the cell, the benchmark clicks
   Approve as JupyterLab does (a ``comm_msg`` on a kernel subshell) and takes
   the time from just before the click to the moment ``call_tool`` returned in
   the kernel (the cell records ``time.time()`` then; same machine, same clock).
   The broker's audit records split that time: click → consent granted →
   last ``files/read`` answered → result in the cell. The time from sending
   the cell to the prompt showing is reported beside it (a cost moved before
   the prompt is not a cost saved).

6a. in other fresh kernels (a first tool call there would make row 7's
   call the second), after one empty cell, one cell holding
   ``%load_ext jupyter_fsbroker``, ``broker.connect()`` of ``wire_server.py``
   over stdio (a server process starts: Python and mcp's imports) and a first
   ``call_tool("noop")``, timed from outside, from sending the request to its
   ``execute_reply``. ``%load_ext`` returns quickly because the client's imports
   go on in a thread, started once the loading cell is over or, as here, by
   the first ``connect``; what the connection and the first tool call wait
   for is paid in this cell. The cell also records its own clock after each step, so
   the notes split the time (``%load_ext``, connect, first call) and give a
   second ``call_tool`` in the next cell for comparison.

Rows 6 and 7 are the first of their kind in each kernel, as a user meets them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from context import Bench
from kernels import consent_prompt, kernel_in, timed_execute
from report import Row, summarize
from stats import median

NUMBERS = (6, 7)
LOAD_GOAL = 300.0
CONSENT_GOAL = 300.0

SETUP = f"""
import time
import jupyter_fsbroker as fsb
broker = fsb.get_broker()
broker.add_root("./data", name="data")
server = [{sys.executable!r}, "-m", "jupyter_fsbroker.examples.analysis_server"]
analysis = broker.connect("analysis", command=server)
"""
CALL = """
result = analysis.call_tool("profile_csv", {"path": "data/sales.csv"})
_arrived = time.time()
assert not result.is_error, result
print(repr(_arrived), result.data["rows"])
"""
WIRE_SERVER = str(Path(__file__).resolve().parent / "wire_server.py")
#: Row 6a's cell: everything from ``%load_ext`` to the first tool result, with the cell's own clock
#: after each step (``time.perf_counter`` is imported before ``%load_ext`` and costs nothing here).
FIRST_CALL = f"""
from time import perf_counter as _clock
_steps = [_clock()]
%load_ext jupyter_fsbroker
_steps.append(_clock())
import jupyter_fsbroker as _fsb
_conn = _fsb.get_broker().connect("bench", command=[{sys.executable!r}, {WIRE_SERVER!r}, "helper"])
_steps.append(_clock())
_first = _conn.call_tool("noop", {{}})
_steps.append(_clock())
assert not _first.is_error, _first
"""
SECOND_CALL = """
_start = _clock()
_again = _conn.call_tool("noop", {})
_steps.append(_clock() - _start)
assert not _again.is_error, _again
"""
#: The broker's audit records (time, duration) of the call: where the time between click and result goes.
AUDIT = "[(r.method, r.time, r.duration_ms) for r in broker.core.audit.records()]"
SALES = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"


def timeline(records: list[tuple[str, float, float]], clicked: float, arrived: float) -> dict[str, float]:
    """Milliseconds from the click to the end of the consent, to the end of the last read, to the result."""
    ends = {method: 0.0 for method in ("files/consent", "files/read")}
    for method, started, duration_ms in records:
        if method in ends:
            ends[method] = max(ends[method], started + duration_ms / 1000)
    return {
        "granted": (ends["files/consent"] - clicked) * 1000,
        "read": (ends["files/read"] - ends["files/consent"]) * 1000,
        "result": (arrived - ends["files/read"]) * 1000,
    }


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    load_ms: list[float] = []
    consent_ms: list[float] = []
    steps: list[dict[str, float]] = []
    shown_ms: list[float] = []
    for index in range(s.kernels):
        bench.log(f"rows 6-7: fresh kernel {index + 1}/{s.kernels}")
        base = bench.scratch("kernel")
        work = base / "work"
        (work / "data").mkdir(parents=True)
        (work / "data" / "sales.csv").write_text(SALES, encoding="utf-8")
        with kernel_in(base / "home", work) as kernel:
            timed_execute(kernel, "pass")
            load_ms.append(timed_execute(kernel, "%load_ext jupyter_fsbroker") * 1000)
            kernel.run(SETUP, timeout=120)
            subshell = kernel.create_subshell()
            submitted = time.time()
            cell = kernel.submit(CALL)
            approve = kernel.child(consent_prompt(kernel), "fsbroker-approve")
            clicked = time.time()
            shown_ms.append((clicked - submitted) * 1000)
            kernel.click(approve, subshell_id=subshell)
            kernel.wait(cell, 120).check()
            arrived = float(cell.stdout.split()[0])
            consent_ms.append((arrived - clicked) * 1000)
            steps.append(timeline(kernel.value(AUDIT), clicked, arrived))
    first_ms: list[float] = []
    split: list[dict[str, float]] = []
    for index in range(s.kernels):
        bench.log(f"row 6a: fresh kernel {index + 1}/{s.kernels}")
        base = bench.scratch("kernel")
        (base / "work").mkdir()
        with kernel_in(base / "home", base / "work") as kernel:
            timed_execute(kernel, "pass")
            first_ms.append(timed_execute(kernel, FIRST_CALL) * 1000)
            timed_execute(kernel, SECOND_CALL)
            started, loaded, connected, called, again = kernel.value("_steps")
            split.append(
                {
                    "load_ext": (loaded - started) * 1000,
                    "connect": (connected - loaded) * 1000,
                    "first_call": (called - connected) * 1000,
                    "second_call": again * 1000,
                }
            )
    load, consent = median(load_ms), median(consent_ms)

    def part(name: str) -> str:
        return f"{median([x[name] for x in split]):.0f} ms"

    return [
        Row(
            number=6,
            what="%load_ext jupyter_fsbroker in a fresh kernel",
            value=summarize(load_ms, "{:.0f}", "ms"),
            target=f"≤ {LOAD_GOAL:.0f} ms",
            met=load <= LOAD_GOAL,
            n=s.kernels,
            figures={"ms": load_ms},
            note="execute_request → execute_reply, timed from outside; one fresh kernel per sample",
        ),
        Row(
            number=6,
            variant="a",
            what="first tool call after %load_ext: %load_ext, connect (stdio), call_tool in one cell",
            value=summarize(first_ms, "{:.0f}", "ms"),
            n=s.kernels,
            figures={"ms": first_ms, "steps_ms": split},
            note=(
                "execute_request → execute_reply of that cell, timed from outside, in a fresh kernel after"
                f" one empty cell; in the cell: %load_ext {part('load_ext')}, connect {part('connect')}"
                " (the client's imports, which start there when connect shares the loading cell, and"
                f" wire_server.py's start: Python and mcp), first call_tool('noop') {part('first_call')};"
                f" a second call_tool {part('second_call')}"
            ),
        ),
        Row(
            number=7,
            what="first consent in a kernel, click Approve → tool result",
            value=summarize(consent_ms, "{:.0f}", "ms"),
            target=f"≤ {CONSENT_GOAL:.0f} ms",
            met=consent <= CONSENT_GOAL,
            n=s.kernels,
            figures={"ms": consent_ms, "steps_ms": steps, "prompt_shown_ms": shown_ms},
            note=(
                "example analysis server over stdio, profile_csv in a sync cell, click on a subshell;"
                f" click → consent granted {median([x['granted'] for x in steps]):.0f} ms,"
                f" → reads done {median([x['read'] for x in steps]):.0f} ms,"
                f" → result in the cell {median([x['result'] for x in steps]):.0f} ms;"
                f" the prompt showed {median(shown_ms):.0f} ms after the cell was sent"
            ),
        ),
    ]
