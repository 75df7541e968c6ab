"""Keeping the heap of a process that moves file chunks mapped between chunks (glibc only).

A ``files/read`` answer passes through several buffers of 1-3 MB each (the
bytes read, their base64, the JSON message), allocated and freed for every
chunk, several chunks at a time, on the event loop and on the broker's worker
threads. glibc's default policy returns the top of a heap to the system as
soon as more than 128 KiB to a few MiB of it is free (``brk`` for the main
heap, ``madvise`` for a thread's), so the next chunk's buffers fault their
pages in again: measured on a 2-core VM, ~1,100 page faults and ~2.5 ms of
kernel time per MiB read, more than half of the brokering process's CPU time
for a streamed read. :func:`keep_heap` serves blocks under 32 MiB from the
heap (glibc's own ceiling for its dynamic mmap threshold) and trims a heap only
when more than 8 MiB of it is free, so that the few MiB of chunks in flight
are reused rather than faulted in again: the same read then costs ~0 page
faults and 1.7 instead of 4.3 ms of CPU per MiB. The price is the free memory
kept, up to 8 MiB per heap; glibc gives each thread its own heap (up to eight
per core), so threads created from then on share at most two (``M_ARENA_MAX``,
what memory-conscious deployments set with ``MALLOC_ARENA_MAX=2``). The peak
RSS growth of a 1 GiB read stays at +19 MiB (without the cap, +27 to +34 MiB;
trimming above 4 MiB instead of 8 faults again).

Nothing happens where ``mallopt`` is not glibc's (macOS, musl, Windows), nor
where the environment already tunes malloc (``MALLOC_ARENA_MAX``,
``MALLOC_TRIM_THRESHOLD_``, ``GLIBC_TUNABLES=glibc.malloc...``): whoever set those
decided. In a kernel the thresholds are the whole process's, the user's code's
too; ``FSBroker.tune_heap = False`` (``BrokerConfig.tune_heap``) keeps a broker's
connections from calling :func:`keep_heap` at all.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

__all__ = ["keep_heap"]

log = logging.getLogger(__name__)

# glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# glibc's own ceiling for its dynamic mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit);
# free memory kept per heap: above the few MiB of chunks in flight.
_MMAP_THRESHOLD = 32 * 1024 * 1024
_TRIM_THRESHOLD = 8 * 1024 * 1024
# Heaps that threads created from now on share: the main one and one other, so that the
# free memory kept is 2 x 8 MiB at most, not 8 MiB for each worker thread's own heap.
_ARENA_MAX = 2

_lock = threading.Lock()
_done = False


def keep_heap() -> bool:
    """Raise glibc's mmap and trim thresholds once per process (see the module's docstring).

    Returns
    -------
    bool
        Whether the limits are set (now or by an earlier call).
    """
    global _done
    with _lock:
        if _done:
            return True
        if not _glibc() or _environment_decides():
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        # The mmap threshold first: setting either freezes the other at its current value.
        _done = all(
            mallopt(option, value) == 1
            for option, value in (
                (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD),
                (_M_TRIM_THRESHOLD, _TRIM_THRESHOLD),
                (_M_ARENA_MAX, _ARENA_MAX),
            )
        )
        if not _done:
            log.debug("mallopt refused the heap thresholds")
        return _done


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None  # glibc's own configuration name
    except (AttributeError, ValueError, OSError):
        return False


def _environment_decides() -> bool:
    """Whether malloc is tuned through the environment already (glibc reads it at start)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return "glibc.malloc." in tunables or any(name.startswith("MALLOC_") for name in os.environ)
