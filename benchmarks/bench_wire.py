"""The whole stack on real transports: our client and broker against a real MCP server process.

Run ``python benchmarks/bench_wire.py`` (about two minutes) or ``--quick`` (under
a minute: a 64 MiB read, a 16 MiB write, 200 round trips, fewer configurations).
``--json FILE`` also writes every measurement as JSON.

The client side is :func:`jupyter_fsbroker.protocol.connect` with a real
:class:`~jupyter_fsbroker.core.broker.Broker` with the user's default settings
(limits included; each result counts the requests a limit refused, in
``refused``); the server is
``benchmarks/wire_server.py``, written with the server-side helper, served over
stdio (the helper's ``run_stdio``, and mcp's stock ``server.run("stdio")``) and
over Streamable HTTP (uvicorn on 127.0.0.1, a free port). Measured:

1. reading a 256 MiB file with ``iter_chunks`` (1 and 2 MiB chunks,
   concurrency 1 and 4) in a tool that hashes it: MB/s (10^6 bytes/s, timed in
   the server) and the resident memory of both processes (RSS before the read
   and peak during it; each process's peak is reset before the measurement);
2. 1000 sequential small ``files/*`` round trips (``files/stat`` and a read of
   a 96-byte file) timed in the server, and 1000 sequential no-op
   ``tools/call`` timed in the client: µs per round trip;
3. writing 64 MiB with ``write_bytes`` (staged chunks): MB/s.

Each measurement runs in a fresh client process (this script with
``--worker``, which reads its jobs one JSON line at a time on stdin and
answers each on stdout) that starts its own server, so every peak belongs to
one process and one operation. ``run.py`` drives the same workers through
:class:`Runner`. Files live in a temporary directory removed at the
end; every process started is stopped on exit, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from procmem import memory_kib, reset_peak

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))  # import this checkout

SERVER = str(HERE / "wire_server.py")
MiB = 1024 * 1024
TRANSPORTS = {
    "helper": "stdio (run_stdio)",
    "stock": 'stdio (run("stdio"))',
    "http": "Streamable HTTP",
    "modern": "Streamable HTTP, 2026-07-28 (stateless, batches)",
}


# -- the worker: one client process, one server, a few tool calls ---------------------------------


@contextlib.contextmanager
def http_server(mode: str = "http") -> Iterator[str]:
    """``wire_server.py MODE`` (``http`` or ``http-stateless``) in a subprocess; yields its URL. It
    exits when our end of its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, SERVER, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the HTTP server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        stop_process(process)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def stop_process(process: subprocess.Popen[Any]) -> None:
    """Terminate *process* if it still runs; kill it if it lingers past 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tool_result(result: dict[str, Any]) -> dict[str, Any]:
    if result.get("isError"):
        raise RuntimeError(f"the tool failed: {result.get('content')}")
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        inner = structured.get("result")
        return inner if isinstance(inner, dict) and len(structured) == 1 else structured
    return json.loads(result["content"][0]["text"])


async def serve_jobs(spec: dict[str, Any]) -> None:
    """Connect a broker to a fresh server; run each job read from stdin, print each result on stdout."""
    from jupyter_fsbroker.core.broker import Broker
    from jupyter_fsbroker.core.config import BrokerConfig
    from jupyter_fsbroker.protocol import connect

    state = Path(spec["state"])
    # The user's defaults (limits, heap, coalescing window ...), except where state goes: the
    # lock files and the trash stay in the benchmark's temporary folder, out of the user's.
    config = BrokerConfig(lock_dir=str(state / "locks"), trash_dir=str(state / "trash"))
    with Broker(config) as broker, contextlib.ExitStack() as stack:
        broker.add_root(spec["root"], name="data")
        broker.allow("data", ops=tuple(spec.get("ops", ("read", "write"))))
        refusals = Refusals()
        stack.callback(broker.audit.subscribe(refusals.count))
        transport = spec["transport"]
        if transport == "http":
            # The handshake era by name: the client's default (auto) would take the 2026-07-28 era
            # this server offers too, which row 11 measures on its own.
            target: dict[str, Any] = {"url": stack.enter_context(http_server()), "era": "legacy"}
        elif transport == "modern":
            # The 2026-07-28 era on a stateless server: files/* by the extension's batches.
            target = {"url": stack.enter_context(http_server("http-stateless")), "era": "modern"}
            count_rounds()
        else:
            target = {"command": sys.executable, "args": [SERVER, transport]}
        conn = await connect(broker, "bench", **target)
        print(json.dumps({"ready": True}), flush=True)
        try:
            # One job per line; end of file (the benchmark is done, or gone) ends the worker.
            while line := await asyncio.to_thread(sys.stdin.readline):
                refusals.reset()
                ROUNDS.update(rounds=0, operations=0)
                result = await run_job(conn, json.loads(line))
                result["refused"] = refusals.reset()
                result["client_rounds"] = dict(ROUNDS)
                print(json.dumps(result), flush=True)
        finally:
            await conn.aclose()


#: The batches the client performed (one a round of a modern call) and their operations, since the
#: last job began.
ROUNDS = {"rounds": 0, "operations": 0}


def count_rounds() -> None:
    """Count the modern era's rounds in this worker: each batch the client performs is one."""
    from jupyter_fsbroker.protocol.files_batches import BatchDesk

    perform = BatchDesk.perform

    async def counted(self: BatchDesk, operations: Any, progress: Any = None) -> list[dict[str, Any]]:
        ROUNDS["rounds"] += 1
        ROUNDS["operations"] += len(operations)
        return await perform(self, operations, progress)

    BatchDesk.perform = counted  # type: ignore[method-assign]


class Refusals:
    """The broker's refusals that a well-behaved server meets only when a limit binds.

    Counted from the audit log, by error name (``RATE_LIMITED`` ...), so that a
    row can say when the default limits throttled it (the helper waits
    ``retryAfterMs`` and asks again, which the timings include).
    """

    LIMITS = frozenset({"RATE_LIMITED", "TOO_LARGE"})

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def count(self, record: Any) -> None:
        if record.error in self.LIMITS:
            key = f"{record.error}:{record.reason}"
            with self._lock:
                self._counts[key] = self._counts.get(key, 0) + 1

    def reset(self) -> dict[str, int]:
        """The counts since the last reset."""
        with self._lock:
            counts, self._counts = self._counts, {}
        return counts


async def run_job(conn: Any, job: dict[str, Any]) -> dict[str, Any]:
    if job["tool"] == "noop":
        # tools/call round trips, timed here: client → server → client.
        await conn.call_tool("noop", {})
        start = time.perf_counter()
        for _ in range(job["count"]):
            await conn.call_tool("noop", {})
        return {"count": job["count"], "seconds": time.perf_counter() - start}
    before = memory_kib()
    reset = reset_peak()
    start = time.perf_counter()
    result = tool_result(await conn.call_tool(job["tool"], job["args"]))
    result["call_seconds"] = time.perf_counter() - start
    result["client_rss_before_kib"] = before["rss_kib"]
    result["client_peak_kib"] = memory_kib()["peak_kib"]
    result["client_peak_reset"] = reset
    return result


def worker(spec_json: str) -> None:
    asyncio.run(serve_jobs(json.loads(spec_json)))


# -- the benchmark: make the files, start workers, print the table --------------------------------


class Worker:
    """One worker process (this script with ``--worker``), connected to its own fresh server.

    Made by :meth:`Runner.open`. :meth:`call` runs one job in it; :meth:`close`
    ends it (closing its stdin, which is also how it notices that we are gone).
    Its stderr is ours.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        self.transport = spec["transport"]
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self) -> None:
        """Wait until the worker is connected to its server (so that starting it is never measured)."""
        self._answer()

    def call(self, job: dict[str, Any]) -> dict[str, Any]:
        """Run *job* (see :meth:`Runner.run`) and return its result."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(job) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died: reported below
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"the {self.transport} worker failed (exit {code}); see its stderr above")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        """End the worker: at once if it is idle; killed if it does not end within 30 s."""
        process = self.process
        if process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


class Runner:
    """Starts worker processes and stops those still running on exit."""

    def __init__(self, root: Path, state: Path) -> None:
        self.root = root
        self.state = state
        self.live: list[Worker] = []

    @contextlib.contextmanager
    def open(self, transport: str, *, ops: tuple[str, ...] = ("read", "write")) -> Iterator[Worker]:
        """A fresh worker connected to a fresh server over *transport*, for as long as the block lasts.

        *transport* is ``helper``, ``stock``, ``http`` (see ``wire_server.py``) or ``modern``
        (``http-stateless``, connected on the 2026-07-28 era);
        *ops* are the operations pre-approved on the whole root.
        """
        spec = {"transport": transport, "root": str(self.root), "state": str(self.state), "ops": list(ops)}
        worker = Worker(spec)
        self.live.append(worker)
        try:
            worker.wait_ready()
            yield worker
        finally:
            self.live.remove(worker)
            worker.close()

    def run(
        self, transport: str, jobs: list[dict[str, Any]], *, ops: tuple[str, ...] = ("read", "write")
    ) -> list[dict[str, Any]]:
        """Run *jobs* in a fresh worker (see :meth:`open`); their results.

        A job is ``{"tool": name, "args": {...}}`` (a server tool, timed by the
        server; the worker adds the client's RSS before the call and its peak
        during it) or ``{"tool": "noop", "count": n}`` (*n* ``tools/call`` round
        trips, timed in the worker).
        """
        with self.open(transport, ops=ops) as worker:
            return [worker.call(job) for job in jobs]

    def stop(self) -> None:
        """Stop the workers still running (on Ctrl-C)."""
        while self.live:
            stop_process(self.live.pop().process)


def make_file(path: Path, size: int) -> str:
    """Write *size* random bytes to *path*; their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for start in range(0, size, 4 * MiB):
            block = os.urandom(min(4 * MiB, size - start))
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * MiB):
            digest.update(block)
    return digest.hexdigest()


def mb(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def benchmark(quick: bool, json_path: str | None) -> None:
    read_mib = 64 if quick else 256
    write_mib = 16 if quick else 64
    trips = 200 if quick else 1000
    reps = 1 if quick else 3
    read_configs = [(1, 1), (2, 4)] if quick else [(1, 1), (1, 4), (2, 1), (2, 4)]
    write_chunks = [1] if quick else [1, 2]

    tmp = Path(tempfile.mkdtemp(prefix="fsbroker-bench-wire-"))
    runner = Runner(tmp / "data", tmp / "state")
    out: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "mcp": metadata.version("mcp"),
        "quick": quick,
        "load_before": os.getloadavg(),
        "read": [],
        "round_trips": [],
        "write": [],
    }
    try:
        runner.root.mkdir()
        runner.state.mkdir()
        started = time.perf_counter()
        expected = make_file(runner.root / "big.bin", read_mib * MiB)
        (runner.root / "small.txt").write_text("x" * 95 + "\n")
        print(
            f"bench_wire: {out['date']}, {out['cpus']} CPUs, Python {out['python']}, mcp {out['mcp']}",
            file=sys.stderr,
        )

        # 1. chunked reads
        read_rows = []
        for transport in ("helper", "http"):
            for chunk, concurrency in read_configs:
                args = {"path": "data/big.bin", "chunk_size": chunk * MiB, "concurrency": concurrency}
                [r] = runner.run(transport, [{"tool": "hash_file", "args": args}])
                ok = r["sha256"] == expected and r["bytes"] == read_mib * MiB
                if not ok:
                    raise RuntimeError(f"read over {transport}: wrong digest or size {r['bytes']}")
                r.update(transport=transport, chunk_mib=chunk, concurrency=concurrency)
                out["read"].append(r)
                read_rows.append(
                    [
                        TRANSPORTS[transport],
                        f"{chunk} MiB",
                        str(concurrency),
                        f"{r['bytes'] / r['seconds'] / 1e6:.1f}",
                        f"{mb(r['rss_before_kib'])} → {mb(r['peak_kib'])}",
                        f"{mb(r['client_rss_before_kib'])} → {mb(r['client_peak_kib'])}",
                        "ok",
                    ]
                )
                print(f"  read {transport} {chunk} MiB x{concurrency} done", file=sys.stderr)

        # 2. small round trips
        trip_rows = []
        for transport in ("helper", "stock", "http"):
            jobs: list[dict[str, Any]] = []
            for _ in range(reps):
                for kind in ("stat", "read"):
                    args = {"path": "data/small.txt", "count": trips, "kind": kind}
                    jobs.append({"tool": "round_trips", "args": args})
                jobs.append({"tool": "noop", "count": trips})
            results = runner.run(transport, jobs)
            per_op = {
                kind: statistics.median(r["seconds"] / r["count"] for r in results[i::3]) * 1e6
                for i, kind in enumerate(("stat", "read", "noop"))
            }
            out["round_trips"].append({"transport": transport, "count": trips, "reps": reps, "us": per_op})
            trip_rows.append([TRANSPORTS[transport], *(f"{per_op[k]:.0f}" for k in ("stat", "read", "noop"))])
            print(f"  round trips {transport} done", file=sys.stderr)

        # 3. staged writes
        write_rows = []
        for transport in ("helper", "http"):
            for chunk in write_chunks:
                name = f"out-{transport}-{chunk}.bin"
                args = {"path": f"data/{name}", "size": write_mib * MiB, "chunk_size": chunk * MiB}
                [r] = runner.run(transport, [{"tool": "write_file", "args": args}])
                if file_sha256(runner.root / name) != r["sha256"] or r["bytes"] != write_mib * MiB:
                    raise RuntimeError(f"write over {transport}: the file on disk is not what was sent")
                (runner.root / name).unlink()
                r.update(transport=transport, chunk_mib=chunk)
                out["write"].append(r)
                write_rows.append(
                    [
                        TRANSPORTS[transport],
                        f"{chunk} MiB",
                        str(r["chunks"]),
                        f"{r['bytes'] / r['seconds'] / 1e6:.1f}",
                        f"{mb(r['rss_before_kib'])} → {mb(r['peak_kib'])}",
                        f"{mb(r['client_rss_before_kib'])} → {mb(r['client_peak_kib'])}",
                        "ok",
                    ]
                )
                print(f"  write {transport} {chunk} MiB done", file=sys.stderr)
        out["seconds"] = time.perf_counter() - started
        out["load_after"] = os.getloadavg()
    finally:
        runner.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    rss = ["server RSS MiB", "client RSS MiB"]
    print(
        table(
            f"1. read {read_mib} MiB with iter_chunks, sha256 in the server (RSS: before → peak)",
            ["transport", "chunk", "conc", "MB/s", *rss, "sha256"],
            read_rows,
        )
    )
    print()
    print(
        table(
            f"2. sequential round trips, µs each (median of {reps} x {trips})",
            ["transport", "files/stat", "files/read 96 B", "tools/call no-op"],
            trip_rows,
        )
    )
    print()
    print(
        table(
            f"3. write {write_mib} MiB with write_bytes, staged chunks (RSS: before → peak)",
            ["transport", "chunk", "requests", "MB/s", *rss, "sha256"],
            write_rows,
        )
    )
    load = "/".join(f"{x:.1f}" for x in (out["load_before"][0], out["load_after"][0]))
    print(
        f"\n{out['cpus']} CPUs, {out['date']}, total {out['seconds']:.0f} s, load average before/after {load}"
    )
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller files, fewer runs (< 1 minute)")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements to FILE as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return
    # SIGTERM ends the benchmark like Ctrl-C does: through the clean-up.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        benchmark(args.quick, args.json)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
