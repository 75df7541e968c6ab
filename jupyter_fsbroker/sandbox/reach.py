"""What a confined server needs to reach, computed from its command: the broker's half of the sandbox.

What it is for: :func:`plan` turns a server's command, environment and the
notebook's roots into a :class:`~.policy.Policy` — the strictest one that lets
ordinary Python and Node MCP servers start and run:

* **read and execute** on the system (``/usr``, ``/lib*``, ``/bin``, ``/sbin``)
  and on the interpreter's own prefix and packages (a Python interpreter is
  asked for its ``sys.path``; a Node or other executable gets its
  installation prefix, ``…/bin/..``);
* **read** on the server's own files: the script or package folder its command
  names (for a script inside ``node_modules``, the outermost ``node_modules``
  folder, where its dependencies are), ``NODE_PATH``, and the paths the user
  adds;
* **read** on a short list of system files that programs read at start-up or
  when they resolve names and certificates (:data:`SYSTEM_FILES`), on the
  process's own ``/proc/self`` and a few system-wide ``/proc`` and ``/sys``
  facts; read and write on ``/dev/null``, read on ``/dev/urandom`` and
  ``/dev/zero``;
* **read and write** on the private temporary folder (``TMPDIR``);
* at the ``roots`` level, the roots: read-only roots read-only.

Nothing else: not the home folder, not the roots (at the ``files`` level), not
the shared temporary folder, not the rest of ``/etc`` (``/etc/shadow``, SSH
host keys), not other processes' ``/proc`` entries (their command lines may
carry tokens). A folder that would contain the home folder, a root or the
shared temporary folder — or lie inside a root — is never granted: an
automatically found folder is narrowed to the one file the command names (or
dropped, with a note), a path the user adds is refused.

What it must never do: import Jupyter, ``mcp`` or the rest of the package (the
sandbox is its own layer), or grant a path for a reason it cannot name (every
rule carries its ``why``).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .policy import AccessMode, Policy, Rule

__all__ = ["SYSTEM_FILES", "Plan", "SandboxError", "plan"]


class SandboxError(ValueError):
    """The sandbox cannot be set up as asked (a path that contains a root, a command not found...)."""


#: Read-and-execute: where programs and their libraries live.
_SYSTEM_PROGRAMS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/nix/store")

#: Files (and folders of them) under /etc that ordinary programs read, and nothing else of /etc.
SYSTEM_FILES: tuple[tuple[str, str], ...] = (
    ("/etc/ld.so.cache", "the dynamic loader's library index"),
    ("/etc/ld.so.conf", "the dynamic loader's configuration"),
    ("/etc/ld.so.conf.d", "the dynamic loader's configuration"),
    ("/etc/localtime", "the local time zone"),
    ("/etc/timezone", "the local time zone's name"),
    ("/etc/locale.alias", "locale names (glibc, Python's locale module)"),
    ("/etc/mime.types", "file types by extension (Python's mimetypes, which fails on a refusal)"),
    ("/etc/ssl", "TLS certificates and the OpenSSL configuration"),
    ("/etc/ca-certificates", "TLS certificates"),
    ("/etc/pki", "TLS certificates (Red Hat family)"),
    ("/etc/crypto-policies", "TLS settings (Red Hat family)"),
    ("/etc/nsswitch.conf", "how names, users and hosts are looked up"),
    ("/etc/passwd", "the user's own name and home (no secrets: those are in /etc/shadow)"),
    ("/etc/group", "group names"),
    ("/etc/host.conf", "name resolution"),
    ("/etc/hosts", "name resolution"),
    ("/etc/resolv.conf", "name resolution"),
    ("/etc/gai.conf", "name resolution"),
    ("/etc/services", "port names"),
    ("/etc/protocols", "protocol names"),
)

#: Facts about the machine that runtimes read at start-up (Node sizes its heap and thread pool).
_SYSTEM_FACTS: tuple[tuple[str, str], ...] = (
    ("/proc/self", "the process's own /proc entry (its pid stays the same across exec)"),
    ("/proc/cpuinfo", "processor count and features"),
    ("/proc/meminfo", "memory size (Node)"),
    ("/proc/stat", "processor count (Node)"),
    ("/proc/loadavg", "load average"),
    ("/proc/uptime", "uptime"),
    ("/proc/version", "kernel version"),
    ("/proc/sys/vm/overcommit_memory", "memory overcommit mode (V8)"),
    ("/proc/sys/kernel/osrelease", "kernel version"),
    ("/sys/devices/system/cpu", "processors online (Node, Python's os.cpu_count)"),
    ("/sys/fs/cgroup", "CPU and memory limits (Node's heap size, thread pools)"),
)

_DEVICES: tuple[tuple[str, AccessMode, str], ...] = (
    ("/dev/null", AccessMode.DEVICE, "the null device"),
    ("/dev/zero", AccessMode.READ, "zeros"),
    ("/dev/urandom", AccessMode.READ, "random numbers"),
    ("/dev/random", AccessMode.READ, "random numbers"),
)

_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")
_NODE = re.compile(r"^(node|nodejs)$")
# Interpreter options after which the next argument is the option's value, not the script.
_TAKES_VALUE = frozenset({"-W", "-X", "-Q", "-r", "--require", "--import", "--loader", "-C", "--conditions"})
# Interpreter options after which no script file follows (code or a module name does).
_NO_SCRIPT = frozenset({"-c", "-m", "-e", "--eval", "-p", "--print"})
_PACKAGE_MARKERS = ("package.json", "pyproject.toml", "setup.py", "setup.cfg")

#: Seconds a Python interpreter gets to say where its packages are.
_PROBE_TIMEOUT = 30.0
_PROBE = (
    "import json, sys; print(json.dumps({'prefixes': [sys.prefix, sys.base_prefix, sys.exec_prefix, "
    "sys.base_exec_prefix], 'path': sys.path}))"
)


@dataclass(frozen=True)
class Plan:
    """A computed policy and what was left out of it.

    Attributes
    ----------
    policy
        What the launcher enforces.
    notes
        Paths found for the server but not granted, and why (a folder that
        contains a root, say), for the connection's log.
    """

    policy: Policy
    notes: tuple[str, ...] = ()


@dataclass
class _Builder:
    """Rules collected in order, each path once (the first reason wins), and what was refused."""

    forbidden: tuple[str, ...]
    roots: tuple[str, ...]
    rules: dict[str, Rule] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, path: str, access: AccessMode, why: str, *, required: bool = False) -> None:
        path = os.path.realpath(path)
        if path not in self.rules:
            self.rules[path] = Rule(path, access, why, required)

    def overlap(self, path: str) -> str | None:
        """What makes *path* too broad to grant: the home folder, a root or the shared temp folder."""
        real = os.path.realpath(path)
        for other in self.forbidden:
            if _within(other, real):
                return f"it contains {other}"
        for root in self.roots:
            if _within(real, root) or _within(root, real):
                return f"it overlaps the root {root}"
        return None

    def add_own(self, path: str, access: AccessMode, why: str, *, narrow_to: str | None = None) -> None:
        """A folder of the server's own, or (when that is too broad) just *narrow_to*, or nothing."""
        reason = self.overlap(path)
        if reason is None:
            self.add(path, access, why)
            return
        if narrow_to is not None and self.overlap(narrow_to) is None:
            self.add(narrow_to, access, why + " (the file only: " + reason + ")")
            return
        self.notes.append(f"not granted: {path} ({why}): {reason}")


def plan(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    roots: Iterable[tuple[str, bool]],
    private_tmp: str,
    level: str = "files",
    paths: Iterable[str] = (),
    connect_ports: Sequence[int] | None = None,
) -> Plan:
    """The policy for *command*.

    Parameters
    ----------
    command
        The server's command and arguments, as the user gave them.
    env
        The environment the server will get (``PATH``, ``PYTHON*``, ``NODE_PATH``, ``LD_LIBRARY_PATH``).
    cwd
        Its working directory (``None``: this process's).
    roots
        ``(path, read_only)`` for every root of the broker: they are never granted at the
        ``files`` level, and granted (read-only ones read-only) at the ``roots`` level.
    private_tmp
        The server's own temporary folder, granted read-write.
    level
        ``"files"`` or ``"roots"``.
    paths
        More paths the server may read (its data files, a cache it needs).
    connect_ports
        ``None``: the network is not confined; else the only TCP ports it may connect to.

    Raises
    ------
    SandboxError
        The command is not found, a path the user added does not exist or would reach a
        root, the home folder or the shared temporary folder, or *level* is unknown.
    """
    if level not in ("files", "roots"):
        raise SandboxError(f"unknown sandbox level {level!r} (expected 'files' or 'roots')")
    if not command:
        raise SandboxError("no command to confine")
    cwd = os.path.abspath(cwd or os.getcwd())
    root_list = [(os.path.realpath(p), ro) for p, ro in roots]
    builder = _Builder(_forbidden(env), tuple(p for p, _ in root_list))

    for path in _SYSTEM_PROGRAMS:
        builder.add(path, AccessMode.READ_EXECUTE, "programs and libraries of the system")
    for path, why in SYSTEM_FILES:
        builder.add(path, AccessMode.READ, why)
    for pattern in ("/etc/python3*",):  # Debian's Python reads its sitecustomize from there
        for path in sorted(glob.glob(pattern)):
            builder.add(path, AccessMode.READ, "the system Python's own configuration")
    # /proc/self must stay a path: the launcher opens it, so the rule names the server's own pid.
    for path, why in _SYSTEM_FACTS:
        builder.rules.setdefault(path, Rule(path, AccessMode.READ, why))
    for path, access, why in _DEVICES:
        builder.rules.setdefault(path, Rule(path, access, why))

    _program(builder, command, env, cwd)
    for entry in _split(env.get("NODE_PATH", "")):
        builder.add_own(entry, AccessMode.READ, "NODE_PATH")
    for entry in _split(env.get("LD_LIBRARY_PATH", "")):
        builder.add_own(entry, AccessMode.READ_EXECUTE, "LD_LIBRARY_PATH")

    for path in paths:
        real = os.path.realpath(os.path.join(cwd, path))
        if not os.path.exists(real):
            raise SandboxError(f"the sandbox cannot grant {path}: it does not exist")
        reason = builder.overlap(real)
        if reason is not None:
            raise SandboxError(f"the sandbox cannot grant {path}: {reason}")
        builder.add(real, AccessMode.READ, "added by the user", required=True)

    if level == "roots":
        _grant_roots(builder, root_list)
    else:
        _note_roots_in_reach(builder, root_list)
    builder.rules[os.path.realpath(private_tmp)] = Rule(
        os.path.realpath(private_tmp),
        AccessMode.READ_WRITE,
        "the server's private temporary folder (TMPDIR)",
        True,
    )
    ports = None if connect_ports is None else tuple(sorted(set(connect_ports)))
    return Plan(Policy(tuple(builder.rules.values()), ports, level), tuple(builder.notes))


def _grant_roots(builder: _Builder, roots: Sequence[tuple[str, bool]]) -> None:
    """The roots, read-only ones read-only — which Landlock can only do if none lies in a writable one."""
    for path, read_only in roots:
        if read_only:
            outer = [p for p, ro in roots if not ro and p != path and _within(path, p)]
            if outer:
                raise SandboxError(
                    f"the sandbox cannot keep the read-only root {path} read-only: it lies inside the "
                    f"read-write root {outer[0]}, and what the kernel allows adds up (make that root "
                    "read-only too, or use the files level)"
                )
    for path, read_only in roots:
        access = AccessMode.READ if read_only else AccessMode.READ_WRITE
        builder.rules[path] = Rule(path, access, "a read-only root" if read_only else "a root", True)


def _note_roots_in_reach(builder: _Builder, roots: Sequence[tuple[str, bool]]) -> None:
    """Say so when a root lies inside something the server must reach anyway (the system, its interpreter)."""
    for root, _ in roots:
        for rule in builder.rules.values():
            if rule.path != "/proc/self" and _within(root, rule.path):
                builder.notes.append(
                    f"the root {root} lies inside {rule.path} ({rule.why}), which the server may read: "
                    "it can read that root directly"
                )
                break


def _forbidden(env: Mapping[str, str]) -> tuple[str, ...]:
    """Folders no rule may contain: the home folder and the shared temporary folders."""
    found = {os.path.realpath(os.path.expanduser("~")), "/"}
    home = env.get("HOME")
    if home:
        found.add(os.path.realpath(home))
    for candidate in ("/tmp", "/var/tmp", "/usr/tmp", "/dev/shm", tempfile.gettempdir()):  # noqa: S108
        if os.path.isdir(candidate):
            found.add(os.path.realpath(candidate))
    # "/" is forbidden as a container of everything; rules below it are checked against the rest.
    return tuple(sorted(found))


def _within(path: str, folder: str) -> bool:
    """Whether *path* is *folder* or lies beneath it (both canonical)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _split(value: str) -> list[str]:
    return [p for p in value.split(os.pathsep) if p]


def _program(builder: _Builder, command: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
    """The executable, its interpreter, its prefix, its packages and its script."""
    exe = _which(command[0], env, cwd)
    args = list(command[1:])
    interpreter = exe
    shebang = _shebang(exe)
    if shebang is not None:  # a console script: its interpreter runs it
        interpreter = _which(shebang, env, cwd)
        builder.add_own(os.path.dirname(exe), AccessMode.READ_EXECUTE, "the command's folder", narrow_to=exe)
        script: str | None = exe
    else:
        script = _script(args, cwd) if _interprets(exe) else None
    _prefix(builder, interpreter, "the interpreter's installation")
    _prefix(builder, exe, "the command's installation")
    name = os.path.basename(interpreter)
    if _PYTHON.match(name):
        prefixes, entries = _python_paths(interpreter, _python_env(env), cwd)
        for path in prefixes:
            builder.add_own(path, AccessMode.READ_EXECUTE, "the Python interpreter's prefix")
        for entry in entries:
            if os.path.exists(entry):
                builder.add_own(entry, AccessMode.READ, "a folder of the Python interpreter's sys.path")
    if script is not None:
        _own_files(builder, script)


def _which(name: str, env: Mapping[str, str], cwd: str) -> str:
    if os.sep in name:
        found: str | None = os.path.join(cwd, name)
        if not (found and os.access(found, os.X_OK) and os.path.isfile(found)):
            found = None
    else:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise SandboxError(f"command not found: {name}")
    return os.path.abspath(found)


def _shebang(exe: str) -> str | None:
    """The interpreter named on a script's ``#!`` line (``/usr/bin/env X``: ``X``), else ``None``."""
    try:
        with open(exe, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return rest[0] if rest else None
    return words[0]


def _interprets(exe: str) -> bool:
    name = os.path.basename(exe)
    return bool(_PYTHON.match(name) or _NODE.match(name))


def _script(args: Sequence[str], cwd: str) -> str | None:
    """The script file an interpreter's arguments name, if any."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _NO_SCRIPT:
            return None
        elif arg in _TAKES_VALUE:
            skip = True
        elif not arg.startswith("-"):
            path = os.path.join(cwd, arg)
            return os.path.abspath(path) if os.path.isfile(path) else None
    return None


def _prefix(builder: _Builder, exe: str, why: str) -> None:
    """``…/bin/..`` of the executable, both as written and with links resolved."""
    for path in {exe, os.path.realpath(exe)}:
        folder = os.path.dirname(path)
        if os.path.basename(folder) == "bin":
            folder = os.path.dirname(folder)
        builder.add_own(folder, AccessMode.READ_EXECUTE, why, narrow_to=path)


def _own_files(builder: _Builder, script: str) -> None:
    """The script's package: the outermost ``node_modules`` holding it, its project folder, or its folder."""
    real = os.path.realpath(script)
    parts = real.split(os.sep)
    if "node_modules" in parts:
        outer = os.sep.join(parts[: parts.index("node_modules") + 1])
        builder.add_own(outer, AccessMode.READ, "the server's packages (node_modules)", narrow_to=real)
        return
    folder = os.path.dirname(real)
    project = folder
    while True:
        if any(os.path.exists(os.path.join(project, m)) for m in _PACKAGE_MARKERS):
            break
        parent = os.path.dirname(project)
        if parent == project:
            project = folder
            break
        project = parent
    if project != folder and builder.overlap(project) is None:
        builder.add(project, AccessMode.READ, "the server's project folder")
    else:
        builder.add_own(folder, AccessMode.READ, "the server's script folder", narrow_to=real)


def _python_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of the environment that decides where Python finds its packages."""
    keep = {"PATH", "HOME", "LD_LIBRARY_PATH"}
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON") or k in keep))


@functools.lru_cache(maxsize=32)
def _python_paths(
    interpreter: str, env: tuple[tuple[str, str], ...], cwd: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Ask *interpreter* for its prefixes and ``sys.path`` (cached: one start per interpreter and env)."""
    try:
        done = subprocess.run(  # noqa: S603 - the interpreter the user's command names
            [interpreter, "-c", _PROBE],
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=cwd,
            timeout=_PROBE_TIMEOUT,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(done.stdout.strip().splitlines()[-1])
        prefixes = tuple(str(p) for p in data["prefixes"])
        entries = tuple(str(p) for p in data["path"] if p)  # "" is the working directory
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError) as exc:
        raise SandboxError(f"cannot ask {interpreter} where its packages are: {exc}") from None
    return tuple(dict.fromkeys(prefixes)), tuple(dict.fromkeys(entries))
