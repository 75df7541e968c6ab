"""A file streamed through the kernel leaves the kernel's memory behaving as the user's code expects.

The broker moves chunks of a few MiB through the kernel process; nothing it
does may change how that process's allocator treats the user's own memory
afterwards (issue 18: a process-wide heap tuning made a kernel keep ~800 MiB
of buffers its user had freed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tests.protocol.servers import stream_server
from tests.support.memory import KEPT_AT_MOST_KIB, random_file

from .conftest import load
from .harness import Kernel

MiB = 1024 * 1024
SERVER = repr([sys.executable, str(Path(stream_server.__file__).resolve())])


def test_memory_the_user_frees_after_a_transfer_goes_back_to_the_system(
    start_kernel: Callable[..., Kernel],
) -> None:
    kernel = start_kernel()
    load(kernel)
    kernel.run("broker.allow('data', ops=('read',))")
    sha256 = random_file(kernel.cwd / "data" / "big.bin", 256 * MiB)
    kernel.run(f"stream = broker.connect('stream', command={SERVER})")
    read = kernel.value("stream.call_tool('digest', {'path': 'data/big.bin'}).data", timeout=300)
    assert read == {"sha256": sha256, "bytes": 256 * MiB}
    kernel.run("stream.close()\nassert stream.wait_closed()")

    # The user's own code, after the transfer: 200 buffers of 4 MiB, a little of each kept.
    kernel.run("from tests.support.memory import churn")
    rss = kernel.value("churn()")
    assert rss["full"] - rss["before"] > 700 * 1024, rss  # the buffers were really resident
    kept = rss["after"] - rss["before"]
    assert kept <= KEPT_AT_MOST_KIB, f"RSS stayed {kept // 1024} MiB above where it was: {rss}"
