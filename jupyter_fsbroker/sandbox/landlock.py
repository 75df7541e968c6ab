"""Landlock, the Linux security module a process uses to confine itself: a small ``ctypes`` binding.

What it is for: the three Landlock system calls (create a ruleset, add a rule,
restrict the calling thread), ``PR_SET_NO_NEW_PRIVS``, and the table of which
access rights each Landlock ABI version knows, so that a ruleset never names a
right the running kernel would reject. :mod:`.confine` builds on it.

What it must never do: import anything but the standard library (it runs in a
server's process just before the server's command is executed), or report a
restriction that the kernel did not apply — every failed call raises.

Why a binding of our own (the PyPI bindings read in November 2026):

* ``landlock`` (1.0.0.dev5, MIT): filesystem rights only — its ruleset struct has
  no network or scope fields, so nothing past ABI 3 can be used — and its
  error check reads ``errno`` without looking at the return value, so a stale
  ``errno`` from an earlier call turns a success into an exception.
* ``py-landlock`` (0.1.1, MIT): ABIs 1 to 7 with typed arguments, but its builder
  always handles every right and cannot grant ``REFER`` (a rename across
  folders of the private temporary folder would fail), refuses to load on any
  architecture but x86-64 and aarch64 (the system call numbers are the same
  on all of them), and is a first release.
* ``landlockpy`` (0.2.0, 0BSD): the fullest (ABIs up to 11), but passes untyped
  Python integers to the variadic ``syscall(2)`` (it works because libffi
  widens them, not because it is declared), sizes its ruleset struct for
  ABIs this machine cannot check, and is a few weeks old.

None has a history of maintenance yet, and the part of them this project needs
is about a hundred lines. A security boundary that every confined server goes
through should be small enough to audit in one sitting and import only the
standard library, so it lives here: every argument type is declared, the
structs are laid out as ``<linux/landlock.h>`` lays them out
(``landlock_path_beneath_attr`` is packed: 12 bytes), the ruleset struct is
passed at the size of the ABI in use (8, 16 or 24 bytes; a kernel accepts a
larger struct only if the extra bytes are zero), and each right is dropped from
``handled_access_*`` when the kernel is older than the ABI that introduced it.

ABI history (kernel): 1 (5.13) filesystem; 2 (5.19) ``REFER``; 3 (6.2)
``TRUNCATE``; 4 (6.7) TCP bind/connect; 5 (6.10) ``IOCTL_DEV``; 6 (6.12) scoping
of abstract UNIX sockets and signals; 7 (6.15) audit-logging flags of
``landlock_restrict_self``.
"""

from __future__ import annotations

import ctypes
import enum
import errno
import os
import sys
from functools import cache

__all__ = [
    "AccessFS",
    "AccessNet",
    "LandlockUnavailable",
    "RestrictFlag",
    "Scope",
    "abi_version",
    "add_net_port_rule",
    "add_path_rule",
    "create_ruleset",
    "fs_rights",
    "net_rights",
    "prctl",
    "restrict_flags",
    "restrict_self",
    "scopes",
    "set_no_new_privs",
]

# The same numbers on every architecture (system calls from 424 on are shared; alpha is not a target).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38


class AccessFS(enum.IntFlag):
    """``LANDLOCK_ACCESS_FS_*``: what may be done to files and folders beneath a rule's path."""

    EXECUTE = 1 << 0
    WRITE_FILE = 1 << 1
    READ_FILE = 1 << 2
    READ_DIR = 1 << 3
    REMOVE_DIR = 1 << 4
    REMOVE_FILE = 1 << 5
    MAKE_CHAR = 1 << 6
    MAKE_DIR = 1 << 7
    MAKE_REG = 1 << 8
    MAKE_SOCK = 1 << 9
    MAKE_FIFO = 1 << 10
    MAKE_BLOCK = 1 << 11
    MAKE_SYM = 1 << 12
    REFER = 1 << 13  # ABI 2
    TRUNCATE = 1 << 14  # ABI 3
    IOCTL_DEV = 1 << 15  # ABI 5


class AccessNet(enum.IntFlag):
    """``LANDLOCK_ACCESS_NET_*`` (ABI 4): TCP only; UDP and other protocols are not covered."""

    BIND_TCP = 1 << 0
    CONNECT_TCP = 1 << 1


class Scope(enum.IntFlag):
    """``LANDLOCK_SCOPE_*`` (ABI 6): IPC cut off at the edge of the confined domain."""

    ABSTRACT_UNIX_SOCKET = 1 << 0
    SIGNAL = 1 << 1


class RestrictFlag(enum.IntFlag):
    """``LANDLOCK_RESTRICT_SELF_*`` (ABI 7): which denials reach the audit log."""

    LOG_SAME_EXEC_OFF = 1 << 0
    LOG_NEW_EXEC_ON = 1 << 1
    LOG_SUBDOMAINS_OFF = 1 << 2


#: The ABI that introduced each right; a right is usable on a kernel whose ABI is at least this.
_FS_SINCE = {right: 1 for right in AccessFS} | {
    AccessFS.REFER: 2,
    AccessFS.TRUNCATE: 3,
    AccessFS.IOCTL_DEV: 5,
}
_NET_SINCE = {AccessNet.BIND_TCP: 4, AccessNet.CONNECT_TCP: 4}
_SCOPE_SINCE = {Scope.ABSTRACT_UNIX_SOCKET: 6, Scope.SIGNAL: 6}
_RESTRICT_SINCE = {flag: 7 for flag in RestrictFlag}


def fs_rights(abi: int) -> AccessFS:
    """Every filesystem right the kernel of Landlock ABI *abi* knows."""
    return AccessFS(sum(right for right, since in _FS_SINCE.items() if abi >= since))


def net_rights(abi: int) -> AccessNet:
    """Every network right of ABI *abi* (none before 4)."""
    return AccessNet(sum(right for right, since in _NET_SINCE.items() if abi >= since))


def scopes(abi: int) -> Scope:
    """Every scope of ABI *abi* (none before 6)."""
    return Scope(sum(scope for scope, since in _SCOPE_SINCE.items() if abi >= since))


def restrict_flags(abi: int) -> RestrictFlag:
    """Every ``landlock_restrict_self`` flag of ABI *abi* (none before 7)."""
    return RestrictFlag(sum(flag for flag, since in _RESTRICT_SINCE.items() if abi >= since))


class _RulesetAttr(ctypes.Structure):
    """``struct landlock_ruleset_attr``: grew from 8 bytes (ABI 1) to 16 (ABI 4) to 24 (ABI 6)."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    """``struct landlock_path_beneath_attr``, packed in the kernel's header: 12 bytes."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    """``struct landlock_net_port_attr``: 16 bytes, the port in host byte order."""

    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class LandlockUnavailable(OSError):
    """This system cannot confine a process with Landlock; the message says why, for people."""


@cache
def _libc() -> ctypes.CDLL:
    if sys.platform != "linux":
        raise LandlockUnavailable(f"Landlock is a Linux feature; this system is {sys.platform}")
    libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter already loaded
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    return libc


def _syscall(*args: object) -> int:
    """``syscall(2)`` with declared argument types; raises ``OSError`` on -1 (and only then)."""
    result = int(_libc().syscall(*args))
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


_UNAVAILABLE = {
    errno.ENOSYS: "this kernel has no Landlock system calls (Landlock needs Linux 5.13 or later "
    "built with CONFIG_SECURITY_LANDLOCK)",
    errno.EOPNOTSUPP: "Landlock is built into this kernel but not enabled at boot "
    "(add 'landlock' to the kernel's lsm= parameter)",
    errno.EPERM: "the Landlock system calls are blocked here (a container's seccomp profile, typically)",
}


def abi_version() -> int:
    """The Landlock ABI version this kernel offers (1 or more).

    Raises
    ------
    LandlockUnavailable
        Not Linux, no Landlock in the kernel, Landlock disabled, or the system
        calls blocked.
    """
    try:
        return _query_abi()
    except LandlockUnavailable:
        raise
    except OSError as exc:
        reason = _UNAVAILABLE.get(exc.errno or 0, f"the Landlock version query failed: {exc.strerror}")
        raise LandlockUnavailable(exc.errno, reason) from None


def _query_abi() -> int:
    """``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)``: the ABI, or ``OSError``.

    The one place that asks the kernel; tests replace it to stand for a machine
    without Landlock (nothing outside the process can).
    """
    return _syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )


def create_ruleset(abi: int, fs: AccessFS, net: AccessNet, scoped: Scope) -> int:
    """A new ruleset (its descriptor, close-on-exec) handling *fs*, *net* and *scoped*.

    Every right must be one the kernel of *abi* knows (see :func:`fs_rights`
    and its neighbours); the struct is passed at that ABI's size.
    """
    if fs & ~fs_rights(abi) or net & ~net_rights(abi) or scoped & ~scopes(abi):
        raise ValueError(f"a right that Landlock ABI {abi} does not know: {fs!r} {net!r} {scoped!r}")
    attr = _RulesetAttr(int(fs), int(net), int(scoped))
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = _syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    os.set_inheritable(fd, False)  # the kernel's ruleset descriptor is close-on-exec already; say so
    return fd


def add_path_rule(ruleset: int, parent_fd: int, access: AccessFS) -> None:
    """Allow *access* beneath the file or folder open as *parent_fd* (an ``O_PATH`` descriptor)."""
    attr = _PathBeneathAttr(int(access), parent_fd)
    _syscall(
        ctypes.c_long(_SYS_ADD_RULE),
        ctypes.c_int(ruleset),
        ctypes.c_int(_RULE_PATH_BENEATH),
        ctypes.byref(attr),
        ctypes.c_uint32(0),
    )


def add_net_port_rule(ruleset: int, port: int, access: AccessNet) -> None:
    """Allow *access* (TCP bind and/or connect) on *port*."""
    if not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {port}")
    attr = _NetPortAttr(int(access), port)
    _syscall(
        ctypes.c_long(_SYS_ADD_RULE),
        ctypes.c_int(ruleset),
        ctypes.c_int(_RULE_NET_PORT),
        ctypes.byref(attr),
        ctypes.c_uint32(0),
    )


def prctl(option: int, arg: int) -> None:
    """``prctl(option, arg, 0, 0, 0)``, which confinement needs besides Landlock; raises ``OSError``."""
    if _libc().prctl(option, arg, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl({option}, {arg}): {os.strerror(code)}")


def set_no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: no set-user-ID or file capability can raise privileges again."""
    prctl(_PR_SET_NO_NEW_PRIVS, 1)


def restrict_self(ruleset: int, flags: RestrictFlag) -> None:
    """Enforce *ruleset* on the calling thread and everything it executes or starts, for good."""
    _syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(int(flags)))
