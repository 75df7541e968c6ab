"""Fixtures for the kernel tests: real kernels in isolated homes, the example server over stdio and HTTP."""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

try:
    from .harness import Kernel, isolated_env
except ImportError:  # run from this folder
    from harness import Kernel, isolated_env  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
SERVER_MODULE = "jupyter_fsbroker.examples.analysis_server"
#: The example server over stdio, as a Python string for cells.
STDIO_COMMAND = repr([sys.executable, "-m", SERVER_MODULE])

SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"


def server_env() -> dict[str, str]:
    """Make servers and kernels import this checkout, whatever the environment's install points at."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def make_workdir(base: Path) -> Path:
    """A notebook folder with ``data/sales.csv`` and ``data/raw/``."""
    work = base / "work"
    (work / "data" / "raw").mkdir(parents=True)
    (work / "data" / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    (work / "data" / "raw" / "one.csv").write_text(SALES_CSV, encoding="utf-8")
    return work


@pytest.fixture(scope="session")
def start_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Kernel]]:
    """A factory of kernels, each with its own home and notebook folder; all shut down at the end."""
    started: list[Kernel] = []

    def start(*, ipython_config: str | None = None) -> Kernel:
        base = tmp_path_factory.mktemp("kernel")
        env = isolated_env(base)
        env.update(server_env())
        if ipython_config is not None:
            profile = Path(env["IPYTHONDIR"]) / "profile_default"
            profile.mkdir(parents=True, exist_ok=True)
            (profile / "ipython_config.py").write_text(ipython_config, encoding="utf-8")
        kernel = Kernel(env, make_workdir(base))
        started.append(kernel)
        return kernel

    yield start
    for kernel in started:
        with contextlib.suppress(Exception):  # already shut down by its test
            kernel.shutdown(now=True)


def load(kernel: Kernel, *, consent_timeout: float | None = None) -> None:
    """``%load_ext jupyter_fsbroker``, share ``./data`` as ``data``, and name the broker ``broker``."""
    cells = ["%load_ext jupyter_fsbroker", "import jupyter_fsbroker as fsb", "broker = fsb.get_broker()"]
    cells.append('broker.add_root("./data", name="data")')
    if consent_timeout is not None:
        cells.append(f"%config FSBroker.consent_timeout = {consent_timeout}")
    kernel.run("\n".join(cells))


def connect_stdio(kernel: Kernel, name: str = "analysis") -> None:
    kernel.run(f"{name} = broker.connect({name!r}, command={STDIO_COMMAND})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def http_url() -> Iterator[str]:
    """The example server under uvicorn on 127.0.0.1; its ``/mcp`` URL once it listens."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", SERVER_MODULE, "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **server_env()},
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, name="http-server-stderr", daemon=True)
    reader.start()
    try:
        while True:
            try:
                line = lines.get(timeout=30)
            except queue.Empty:
                raise AssertionError("the HTTP server did not start in 30 s:\n" + "".join(seen)) from None
            if line is None:
                raise AssertionError("the HTTP server exited:\n" + "".join(seen))
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)


#: A cell that asks for consent as a server would, with no call in flight ("between cells").
ASK_BETWEEN_CELLS = """
import threading
answers = []
def _ask():
    answers.append(analysis.connection.handle(
        "files/consent",
        {"message": "between cells", "requestedPaths": ["data/raw"], "operations": ["read"]},
    ))
asker = threading.Thread(target=_ask)
asker.start()
"""
