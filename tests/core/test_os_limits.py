"""The operating system's limits, as the core names them: a full disk, a file size limit, the watch limit.

The faults themselves are made for real in ``tests/reliability`` (a tmpfs,
``RLIMIT_FSIZE``, inotify limits in a user namespace); here, the mapping and
the check that a whole recursive watch is not mistaken for a cut-short one.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from jupyter_fsbroker.core.errors import TooLarge, from_os_error
from jupyter_fsbroker.core.inotify import limit_cut_short


@pytest.mark.parametrize(
    ("code", "reason"),
    [(errno.ENOSPC, "no_space"), (errno.EDQUOT, "no_space"), (errno.EFBIG, "file_too_large")],
)
def test_a_request_that_does_not_fit_is_too_large(code: int, reason: str) -> None:
    error = from_os_error(OSError(code, "no room", "/outside/the/roots"), "data/x.csv")
    assert isinstance(error, TooLarge)
    assert (error.code, error.reason, error.path) == (-32106, reason, "data/x.csv")
    assert "/outside" not in error.message and "data/x.csv" in error.message


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
def test_a_whole_recursive_watch_is_not_cut_short(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"d{i}" / "inner").mkdir(parents=True)
    observer = Observer()
    observer.start()
    try:
        observer.schedule(FileSystemEventHandler(), str(tmp_path), recursive=True)
        assert limit_cut_short(str(tmp_path)) is False
    finally:
        observer.stop()
        observer.join()
