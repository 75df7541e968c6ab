"""The brokering process and the server helper keep their heaps mapped between file chunks (glibc)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_fsbroker.protocol import connector, heap
from jupyter_fsbroker.protocol.errors import ConnectError
from jupyter_fsbroker.protocol.server import heap as helper_heap
from tests.support.brokers import make_broker

SIDES = pytest.mark.parametrize(
    "module", ["jupyter_fsbroker.protocol.heap", "jupyter_fsbroker.protocol.server.heap"]
)


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):
        return False


@SIDES
@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt only")
def test_buffers_freed_between_chunks_are_reused_not_faulted_in_again(module: str) -> None:
    # In a fresh process: the thresholds are process-wide and set once.
    code = (
        "import resource\n"
        f"from {module} import keep_heap\n"
        "def churn():\n"
        "    for _ in range(50):\n"
        "        held = [bytearray(1 << 20) for _ in range(4)]\n"
        "        del held\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "churn()\n"
        "before = churn()\n"
        "faults_default = churn() - before\n"
        "assert keep_heap() and keep_heap()\n"
        "churn()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "print(faults_default, churn() - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    default, kept = map(int, out.stdout.split())
    assert kept < default / 10, (default, kept)


def test_it_says_whether_it_applies() -> None:
    assert heap.keep_heap() is _glibc()
    assert helper_heap.keep_heap() is _glibc()


@SIDES
@pytest.mark.parametrize(
    "setting", [("MALLOC_ARENA_MAX", "4"), ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072")]
)
def test_malloc_settings_in_the_environment_are_never_overridden(
    module: str, setting: tuple[str, str]
) -> None:
    code = f"from {module} import keep_heap\nprint(keep_heap())"
    env = {**os.environ, setting[0]: setting[1]}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"


@pytest.mark.anyio
@pytest.mark.parametrize("tune", [True, False])
async def test_a_broker_that_says_no_leaves_the_heap_alone(
    tune: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(connector, "keep_heap", lambda: calls.append("keep_heap") or True)
    # A command that exits at once: the connection fails, after the heap was (or not) tuned.
    with make_broker(tmp_path, tune_heap=tune) as broker, pytest.raises(ConnectError):
        await connector.connect(broker, "gone", command=sys.executable, args=["-c", "pass"], timeout=30)
    assert calls == (["keep_heap"] if tune else [])
