"""What a transfer leaves behind in a process's memory: its RSS, a workload that shows it, a file to stream.

Standard library only: a kernel cell imports it without waiting for anything.
"""

from __future__ import annotations

import gc
import hashlib
import os
from pathlib import Path

MiB = 1024 * 1024
#: What an allocator may keep of the 800 MiB :func:`churn` frees (issue 18's bound), in KiB.
KEPT_AT_MOST_KIB = 64 * 1024


def random_file(path: Path, size: int) -> str:
    """Write *size* random bytes (a multiple of 4 MiB) to *path*; their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(size // (4 * MiB)):
            block = os.urandom(4 * MiB)
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def rss_kib() -> int:
    """This process's resident memory (``VmRSS``), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def churn(count: int = 200, size: int = 4 * MiB, keep: int = 64 * 1024) -> dict[str, int]:
    """Allocate *count* buffers of *size* bytes (every page written), keeping *keep* bytes of each; free them.

    What a user's own code does: buffers of a few MiB, a smaller result made
    from each as it goes (here its first *keep* bytes, allocated right after
    it, as results are), then the buffers dropped and the results kept.
    Returns the RSS before, with the buffers, and after (KiB): whatever the
    allocator keeps of the freed buffers is ``after - before`` less the
    results themselves (``count * keep``: 12.5 MiB by default). Kept results
    allocated above freed buffers are what stops a heap from shrinking, when
    the buffers come from the heap rather than from their own mappings.
    """
    gc.collect()
    before = rss_kib()
    buffers, kept = [], []
    for _ in range(count):
        buffers.append(b"\x01" * size)
        kept.append(bytes(buffers[-1][:keep]))
    full = rss_kib()
    del buffers
    gc.collect()
    after = rss_kib()
    del kept
    return {"before": before, "full": full, "after": after}
