"""The brokering process and the server helper keep their heaps mapped between file chunks (glibc)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jupyter_fsbroker.protocol import heap
from jupyter_fsbroker.protocol.server import heap as helper_heap

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
