"""A brokering process of its own: a ``Broker`` in a child process, driven by the test over a pipe.

The child (``python -m tests.reliability.brokerproc ARGS``) shares the given
roots, connects to servers (``servers/app.py`` over stdio, or a URL), and
answers the test's commands, one JSON line each, tagged with an ``id``;
commands run concurrently, each answer carries the ``id`` it answers:

``{"cmd": "connect", "name", "url"?}`` → ``{"pid"}`` (``None`` over HTTP);
``{"cmd": "call", "name", "tool", "args", "timeout"}`` → the tool's ``structuredContent``;
``{"cmd": "close", "name"}``;
``{"cmd": "stats"}`` → descriptors, threads, RSS, held locks, audit totals, watches, connections;
``{"cmd": "configure", "settings"}``;
``{"cmd": "fill_pool"}``: run as many requests at once as the broker has workers (it then has them all);
``{"cmd": "exit"}``: close everything and exit.

A failure is answered ``{"id", "error": "..."}``. :class:`BrokerProcess` is the test's side: it
starts the child (optionally under ``unshare``, to drop root's privileges or to give it
inotify limits of its own), sends commands and waits for their answers with a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.env import server_env

APP = str(Path(__file__).resolve().parent / "servers" / "app.py")
#: Seconds an answer of the child is awaited by default.
ANSWER_TIMEOUT = 120.0
#: Rates no test reaches: the tests measure the broker, not its rate limiter.
UNLIMITED = {"ops_per_second": 1e6, "ops_burst": 10**6, "bytes_per_second": 1e12, "bytes_burst": 2**50}


# -- the child -------------------------------------------------------------------------------------


def _stats(broker: Any) -> dict[str, Any]:
    with open("/proc/self/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    fds = []
    for number in os.listdir("/proc/self/fd"):
        try:
            fds.append(f"{number} -> {os.readlink(f'/proc/self/fd/{number}')}")
        except OSError:  # the descriptor of the listing itself
            continue
    return {
        "fds": sorted(fds),
        "threads": sorted(t.name for t in threading.enumerate()),
        "rss": rss,
        "locks": [info.path for info in broker.locks.held()],
        "audit": broker.audit.totals(),
        "watches": len(broker.watches.watches()),
        "connections": len(broker.connections()),
    }


async def _serve(args: argparse.Namespace) -> None:
    from jupyter_fsbroker.core.broker import Broker, BrokerConfig
    from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision
    from jupyter_fsbroker.core.limits import Limits
    from jupyter_fsbroker.protocol import connect
    from jupyter_fsbroker.protocol.server_connection import ServerConnection

    config = BrokerConfig(
        lock_dir=args.lock_dir,
        trash_dir=args.trash_dir,
        limits=Limits(**UNLIMITED, lock_wait=args.lock_wait),
        stale_temp_age=args.stale_age,
        audit_path=args.audit_path,
        audit_required=args.audit_required == "True",
    )
    broker = Broker(config)
    for spec in args.root:
        name, _, folder = spec.partition("=")
        broker.add_root(folder, name=name)
    for spec in args.allow:
        path, _, ops = spec.partition(":")
        broker.allow(path, ops=ops or "read")
    consenter = CallbackConsenter(ConsentDecision.approve_all)
    conns: dict[str, ServerConnection] = {}
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read_stdin, name="commands", daemon=True).start()
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    async def run(command: dict[str, Any]) -> Any:
        cmd = command["cmd"]
        if cmd == "connect":
            name = command["name"]
            url = command.get("url")
            if url is None:
                conn = await connect(
                    broker, name, command=sys.executable, args=[APP], env=env, consenter=consenter
                )
            else:
                conn = await connect(broker, name, url=url, consenter=consenter)
            conns[name] = conn
            info = await conn.call_tool("info")
            return {"pid": info["structuredContent"]["pid"] if url is None else None}
        if cmd == "call":
            result = await conns[command["name"]].call_tool(
                command["tool"], command.get("args", {}), timeout=command.get("timeout", ANSWER_TIMEOUT)
            )
            if result.get("isError"):
                raise RuntimeError(f"the tool failed: {result.get('content')}")
            return result["structuredContent"]
        if cmd == "close":
            await conns.pop(command["name"]).aclose()
            return {}
        if cmd == "stats":
            return _stats(broker)
        if cmd == "configure":
            broker.configure(**command["settings"])
            return {}
        if cmd == "fill_pool":
            # Every worker of the request pool at once: the pool makes all the threads it keeps.
            workers = broker.config.workers
            barrier = threading.Barrier(workers)
            executor = broker.executor()
            await asyncio.gather(
                *(asyncio.wrap_future(executor.submit(barrier.wait, 60)) for _ in range(workers))
            )
            return {"workers": workers}
        raise ValueError(f"unknown command {cmd!r}")

    async def one(command: dict[str, Any]) -> None:
        try:
            answer({"id": command["id"], "result": await run(command)})
        except Exception as exc:
            answer({"id": command["id"], "error": f"{type(exc).__name__}: {exc}"})

    answer({"id": 0, "result": {"pid": os.getpid(), "ready": True}})
    tasks: set[asyncio.Task[None]] = set()
    while (line := await lines.get()) is not None:
        command = json.loads(line)
        if command["cmd"] == "exit":
            for conn in list(conns.values()):
                await conn.aclose()
            broker.close()
            answer({"id": command["id"], "result": {}})
            return
        task = asyncio.ensure_future(one(command))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def _limit_inotify(watches: int | None, instances: int | None) -> None:
    # Limits of this user namespace only (the test starts this process in a new one).
    for name, value in (("max_inotify_watches", watches), ("max_inotify_instances", instances)):
        if value is not None:
            with open(f"/proc/sys/user/{name}", "w", encoding="ascii") as file:
                file.write(str(value))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--allow", action="append", default=[], metavar="PATH:OPS")
    parser.add_argument("--lock-dir", help="default: the broker's own default")
    parser.add_argument("--trash-dir", required=True)
    parser.add_argument("--lock-wait", type=float, default=2.0)
    parser.add_argument("--stale-age", type=float, default=60.0)
    parser.add_argument("--file-size-limit", type=int, help="RLIMIT_FSIZE of this process, in bytes")
    parser.add_argument("--audit-path", help="the audit file (BrokerConfig.audit_path)")
    parser.add_argument("--audit-required", choices=("True", "False"), default="False")
    parser.add_argument("--inotify-watches", type=int)
    parser.add_argument("--inotify-instances", type=int)
    args = parser.parse_args(argv)
    if args.file_size_limit is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (args.file_size_limit, resource.RLIM_INFINITY))
    _limit_inotify(args.inotify_watches, args.inotify_instances)
    asyncio.run(_serve(args))


# -- the test's side -------------------------------------------------------------------------------


class ChildFailed(AssertionError):
    """The brokering process answered with an error, or not at all."""


class BrokerProcess:
    """A brokering process the test drives.

    Parameters
    ----------
    base
        A folder of the test: the trash goes to ``base/trash``, the child's stderr to
        ``base/<label>.stderr``.
    roots
        ``{name: folder}`` shared read-write.
    allow
        ``PATH:OPS`` pre-approvals.
    prefix
        A command the child is started under (``unshare ...``).
    default_locks
        Lock files where a broker puts them by default, instead of in ``base/locks``.
    env
        Changes to the child's environment (this process's, importing this checkout); a
        variable given ``None`` is removed.
    **options
        Further options of the child, by their name (``stale_age=0``, ``file_size_limit=...``).
    """

    def __init__(
        self,
        base: Path,
        roots: dict[str, Path],
        *,
        allow: Sequence[str] = (),
        label: str = "broker",
        prefix: Sequence[str] = (),
        default_locks: bool = False,
        env: Mapping[str, str | None] | None = None,
        **options: Any,
    ) -> None:
        argv = [*prefix, sys.executable, "-m", "tests.reliability.brokerproc"]
        argv += ["--trash-dir", str(base / "trash")]
        if not default_locks:
            argv += ["--lock-dir", str(base / "locks")]
        for name, folder in roots.items():
            argv += ["--root", f"{name}={folder}"]
        for spec in allow:
            argv += ["--allow", spec]
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        self.label = label
        self.stderr_path = base / f"{label}.stderr"
        self.server_pids: list[int] = []
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        child_env = {**os.environ, **server_env()}
        for name, value in (env or {}).items():
            if value is None:
                child_env.pop(name, None)
            else:
                child_env[name] = value
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=child_env
            )
        self._waiting(0)
        self._reader = threading.Thread(target=self._read, name=f"{label}-answers", daemon=True)
        self._reader.start()
        try:
            self.pid = self._wait(0, ANSWER_TIMEOUT)["pid"]
        except BaseException:
            self.kill()
            raise

    # -- commands ------------------------------------------------------------------------------

    def send(self, cmd: str, **fields: Any) -> int:
        """Send a command without waiting; returns its id for :meth:`wait`."""
        command_id = next(self._ids)
        self._waiting(command_id)
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"id": command_id, "cmd": cmd, **fields}) + "\n").encode())
        self.proc.stdin.flush()
        return command_id

    def wait(self, command_id: int, timeout: float = ANSWER_TIMEOUT) -> Any:
        """The result of the command *command_id*; :class:`ChildFailed` on an error answer."""
        return self._wait(command_id, timeout)

    def command(self, cmd: str, timeout: float = ANSWER_TIMEOUT, **fields: Any) -> Any:
        return self.wait(self.send(cmd, **fields), timeout)

    def connect(self, name: str, url: str | None = None) -> int | None:
        """Connect a server (``app.py`` over stdio unless *url*); its pid over stdio."""
        pid: int | None = self.command("connect", name=name, url=url)["pid"]
        if pid is not None:
            self.server_pids.append(pid)
        return pid

    def call(self, name: str, tool: str, timeout: float = ANSWER_TIMEOUT, **args: Any) -> Any:
        return self.command("call", timeout=timeout + 10, name=name, tool=tool, args=args)

    def stats(self) -> dict[str, Any]:
        return self.command("stats")  # type: ignore[no-any-return]

    # -- lifetime ------------------------------------------------------------------------------

    def exit(self) -> None:
        """Close everything in the child and wait for it to exit."""
        self.command("exit")
        assert self.proc.wait(ANSWER_TIMEOUT) == 0, self.stderr()
        self._finish()

    def kill(self) -> None:
        """SIGKILL the child (its servers then see their input end and exit) and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(ANSWER_TIMEOUT)
        self._finish()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def _finish(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._reader.join(ANSWER_TIMEOUT)

    def _waiting(self, command_id: int) -> None:
        with self._lock:
            self._answers[command_id] = queue.Queue()

    def _wait(self, command_id: int, timeout: float) -> Any:
        with self._lock:
            answers = self._answers[command_id]
        try:
            message = answers.get(timeout=timeout)
        except queue.Empty:
            raise ChildFailed(
                f"{self.label}: no answer within {timeout:g} s; stderr:\n{self.stderr()}"
            ) from None
        with self._lock:
            del self._answers[command_id]
        if "error" in message:
            raise ChildFailed(f"{self.label}: {message['error']}")
        return message["result"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            message = json.loads(raw)
            with self._lock:
                answers = self._answers.get(message["id"])
            if answers is not None:
                answers.put(message)
        with self._lock:
            pending = list(self._answers.values())
        for answers in pending:  # the child is gone: nobody waits forever
            answers.put({"error": f"the brokering process exited ({self.proc.wait()})"})


def unshare_prefix(*options: str) -> list[str] | None:
    """``unshare -U OPTIONS`` if this machine lets a process make a user namespace, else ``None``."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-U", *options, "true"], capture_output=True, check=False)
    return [unshare, "-U", *options] if probe.returncode == 0 else None


if __name__ == "__main__":
    main()
