"""Confine the calling process to a :class:`~.policy.Policy`, for good: Landlock, no privileges gained.

What it is for: the launcher (:mod:`.run`) calls :func:`confine` once, just
before it executes the server's command. From then on the kernel refuses the
process — and everything it executes or starts — every path and TCP port the
policy does not list, whoever the process runs as: Landlock binds root too.

What it must never do: import anything but the standard library; return
normally unless every part of the policy is in force. There is no "best
effort" here beyond the one the kernel's age imposes (:class:`Confinement`
says what that left out); the decision to run a server unconfined is the
broker's (:mod:`.availability`), never this module's.

The steps, in order:

1. Every rule's path is opened (``O_PATH``) before anything is restricted.
2. A ruleset handles every filesystem right the kernel knows (so whatever
   is not granted is refused), TCP bind and connect when the policy confines
   the network, and — from ABI 6 — the scoping of abstract UNIX sockets and
   signals: the server cannot connect to an abstract socket or signal a
   process outside its own domain (the kernel, the notebook, the user's
   other programs). Landlock itself keeps it from ``ptrace``-ing them.
3. ``PR_SET_NO_NEW_PRIVS``: nothing it executes gains privileges. (Root, with
   ``CAP_SYS_ADMIN``, could restrict itself without it; it is set anyway.)
4. If the process holds capabilities (it runs as root), they are taken away
   for good from what it executes: ``SECBIT_NOROOT`` (uid 0 gets no
   capabilities at ``execve``), the bounding set emptied, the ambient set
   cleared. Landlock confines files, not the powers of root (loading a kernel
   module, raw devices, the network stack).
5. ``landlock_restrict_self``, with (ABI 7) the server's own denials sent to
   the audit log and the launcher's not.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from . import landlock
from .landlock import AccessFS, AccessNet, RestrictFlag, Scope
from .policy import AccessMode, Policy

__all__ = ["Confinement", "confine"]

# Rights that apply to a file (a rule on a file may grant no others).
_FILE_RIGHTS = (
    AccessFS.EXECUTE | AccessFS.WRITE_FILE | AccessFS.READ_FILE | AccessFS.TRUNCATE | AccessFS.IOCTL_DEV
)

_READ = AccessFS.READ_FILE | AccessFS.READ_DIR
_RIGHTS = {
    AccessMode.READ: _READ,
    AccessMode.READ_EXECUTE: _READ | AccessFS.EXECUTE,
    # No MAKE_CHAR/MAKE_BLOCK (a device node made by root reaches the disk) and no EXECUTE.
    AccessMode.READ_WRITE: _READ
    | AccessFS.WRITE_FILE
    | AccessFS.TRUNCATE
    | AccessFS.MAKE_REG
    | AccessFS.MAKE_DIR
    | AccessFS.MAKE_SYM
    | AccessFS.MAKE_SOCK
    | AccessFS.MAKE_FIFO
    | AccessFS.REMOVE_FILE
    | AccessFS.REMOVE_DIR
    | AccessFS.REFER,
    AccessMode.DEVICE: AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE,
}

_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECBIT_NOROOT = 1 << 0
_SECBIT_NOROOT_LOCKED = 1 << 1


@dataclass(frozen=True)
class Confinement:
    """What is in force after :func:`confine`.

    Attributes
    ----------
    abi
        The kernel's Landlock ABI version.
    network
        Whether TCP bind/connect is confined (the policy asked, and ABI ≥ 4).
    scoped
        Whether abstract UNIX sockets and signals are cut off at the domain's edge (ABI ≥ 6).
    capabilities_dropped
        Whether the process held capabilities and they were taken away.
    skipped
        Paths of optional rules that do not exist on this system.
    """

    abi: int
    network: bool
    scoped: bool
    capabilities_dropped: bool
    skipped: tuple[str, ...] = ()


def _rights_of(access: AccessMode, abi: int, *, is_dir: bool) -> AccessFS:
    """The Landlock rights of *access* on a kernel of *abi*, for a folder or a file."""
    rights = _RIGHTS[access] & landlock.fs_rights(abi)
    return rights if is_dir else rights & _FILE_RIGHTS


def confine(policy: Policy) -> Confinement:
    """Restrict this process to *policy*, irreversibly. Call it with one thread only.

    Raises
    ------
    landlock.LandlockUnavailable
        The kernel cannot do it (the message says why).
    FileNotFoundError
        A required rule's path does not exist.
    OSError
        Any other refusal on the way; nothing is in force then but what the
        message says failed after (no new privileges may already be set).
    ValueError
        The policy confines the network and the kernel's ABI is older than 4.
    """
    abi = landlock.abi_version()
    if policy.connect_ports is not None and abi < 4:
        raise ValueError(f"confining the network needs Landlock ABI 4 (Linux 6.7); this kernel offers {abi}")
    opened: list[tuple[int, AccessMode]] = []
    skipped: list[str] = []
    try:
        for rule in policy.rules:
            try:
                opened.append((os.open(rule.path, os.O_PATH | os.O_CLOEXEC), rule.access))
            except FileNotFoundError:
                if rule.required:
                    raise
                skipped.append(rule.path)
        net = landlock.net_rights(abi) if policy.connect_ports is not None else AccessNet(0)
        ruleset = landlock.create_ruleset(abi, landlock.fs_rights(abi), net, landlock.scopes(abi))
        try:
            for fd, access in opened:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                landlock.add_path_rule(ruleset, fd, _rights_of(access, abi, is_dir=is_dir))
            for port in policy.connect_ports or ():
                landlock.add_net_port_rule(ruleset, port, AccessNet.CONNECT_TCP)
            landlock.set_no_new_privs()
            dropped = _drop_capabilities()
            # The launcher's own denials are of no interest; the server's are (when audit is on).
            logging = RestrictFlag.LOG_SAME_EXEC_OFF | RestrictFlag.LOG_NEW_EXEC_ON
            landlock.restrict_self(ruleset, logging & landlock.restrict_flags(abi))
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in opened:
            os.close(fd)
    return Confinement(abi, bool(net), bool(landlock.scopes(abi) & Scope.SIGNAL), dropped, tuple(skipped))


def _permitted_capabilities() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapPrm:"):
                return int(line.split()[1], 16)
    return 0


def _drop_capabilities() -> bool:
    """Take every capability away from what this process executes; whether there were any."""
    if _permitted_capabilities() == 0:
        # An ordinary user: nothing to take (and no right to shrink the bounding set); no new
        # privileges already keeps file capabilities from adding any at execve.
        return False
    landlock.prctl(_PR_SET_SECUREBITS, _SECBIT_NOROOT | _SECBIT_NOROOT_LOCKED)
    cap = 0
    while True:
        try:
            landlock.prctl(_PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # past the last capability this kernel knows
                break
            raise
        cap += 1
    landlock.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    return True
