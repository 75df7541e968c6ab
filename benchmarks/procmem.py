"""Resident memory of a process, read from ``/proc`` (Linux): the benchmarks' one memory probe.

Used in the processes being measured (the wire server, a worker) and from
outside them (the official server, a kernel). It never allocates anything
worth measuring and never raises for a process that is gone.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["child_pid", "memory_kib", "reset_peak"]


def memory_kib(pid: int | str = "self") -> dict[str, int]:
    """Current RSS (``VmRSS``) and peak RSS (``VmHWM``) of process *pid*, in KiB (zeros if it is gone)."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return {"rss_kib": found.get("VmRSS", 0), "peak_kib": found.get("VmHWM", 0)}


def reset_peak(pid: int | str = "self") -> bool:
    """Reset the ``VmHWM`` of process *pid* to its current RSS (Linux ≥ 4.0); whether it worked."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def child_pid(name: str) -> int | None:
    """The pid of a child of this process whose command name is *name*, if there is one."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                text = stat.read()
            comm = text[text.index("(") + 1 : text.rindex(")")]
            ppid = int(text[text.rindex(")") + 2 :].split()[1])
            if ppid == me and comm == name:
                return int(entry)
    return None
