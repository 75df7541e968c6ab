"""The brokering process keeps its heap mapped between file chunks (glibc)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jupyter_fsbroker.protocol.heap import keep_heap


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):
        return False


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt only")
def test_buffers_freed_between_chunks_are_reused_not_faulted_in_again() -> None:
    # In a fresh process: the thresholds are process-wide and set once.
    code = (
        "import resource\n"
        "from jupyter_fsbroker.protocol.heap import keep_heap\n"
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
    assert keep_heap() is _glibc()
