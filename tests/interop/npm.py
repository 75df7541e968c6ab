"""The third-party MCP software the interop tests run, installed from npm at pinned versions.

:func:`install` puts the packages of :data:`PINS` into one folder per set of
pins (under ``FSBROKER_INTEROP_DIR``, default ``<user cache>/jupyter_fsbroker/
interop``) with ``npm install --ignore-scripts``, and reuses the folder when it
already holds exactly those versions, so only the first run on a machine
downloads anything. The tests' own JavaScript (``js/``) is copied below that
folder, so that Node resolves its imports from its ``node_modules``: into a
subfolder named after the scripts' contents, because every checkout on the
machine shares the packages, and one checkout's scripts must never replace
another's while its tests run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from tests.support.ci import cannot_run

#: Exactly what is installed. The Inspector's own package (``@modelcontextprotocol/inspector``)
#: wants Node >= 22.7.5; its CLI package declares no engine and runs on Node 20.
PINS: dict[str, str] = {
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/inspector-cli": "1.0.3",
    "@modelcontextprotocol/sdk": "1.32.2",
}

JS_SOURCES = Path(__file__).resolve().parent / "js"

#: Seconds ``npm install`` may take (a fresh machine downloads about 10 MB).
INSTALL_TIMEOUT = 300


class NpmUnavailable(RuntimeError):
    """Node or npm is missing, or the registry could not be reached: the interop tests cannot run."""


@dataclass(frozen=True)
class NodeTools:
    """Where the installed packages are, and how to run them."""

    folder: Path
    node: str
    scripts: Path

    def package(self, name: str) -> Path:
        return self.folder / "node_modules" / name

    def script(self, name: str) -> Path:
        """One of the tests' own scripts (``js/NAME``), as this checkout has it."""
        return self.scripts / name

    @property
    def server_filesystem(self) -> list[str]:
        return [self.node, str(self.package("@modelcontextprotocol/server-filesystem") / "dist" / "index.js")]

    @property
    def server_everything(self) -> list[str]:
        return [self.node, str(self.package("@modelcontextprotocol/server-everything") / "dist" / "index.js")]

    @property
    def inspector_cli(self) -> tuple[list[str], Path]:
        """The Inspector CLI's command and the folder to run it in.

        inspector-cli 1.0.3 looks for its ``package.json`` relative to the
        *working directory* (``../package.json``), so it must run from its
        ``build`` folder.
        """
        build = self.package("@modelcontextprotocol/inspector-cli") / "build"
        return [self.node, str(build / "index.js")], build


def cache_root() -> Path:
    configured = os.environ.get("FSBROKER_INTEROP_DIR")
    if configured:
        return Path(configured)
    return platformdirs.user_cache_path("jupyter_fsbroker") / "interop"


def _installed(folder: Path) -> bool:
    for name, version in PINS.items():
        manifest = folder / "node_modules" / name / "package.json"
        try:
            if json.loads(manifest.read_text()).get("version") != version:
                return False
        except (OSError, ValueError):
            return False
    return True


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One install at a time per folder, across processes."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install() -> NodeTools:
    """Install (or reuse) the pinned packages; return where they are.

    Raises
    ------
    NpmUnavailable
        No ``node``/``npm`` on PATH, or ``npm install`` failed (the message
        ends with npm's own last lines).
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise NpmUnavailable("node and npm are needed (Debian: apt-get install -y nodejs npm)")
    digest = hashlib.sha256(json.dumps(PINS, sort_keys=True).encode()).hexdigest()[:12]
    folder = cache_root() / digest
    with _locked(folder):
        if not _installed(folder):
            manifest = {"name": "jupyter-fsbroker-interop", "private": True, "dependencies": PINS}
            (folder / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
            try:
                done = subprocess.run(
                    [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(folder)],
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise NpmUnavailable(f"npm install did not finish within {INSTALL_TIMEOUT} s") from None
            if done.returncode != 0 or not _installed(folder):
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-5:])
                raise NpmUnavailable(
                    f"npm install of {', '.join(f'{n}@{v}' for n, v in PINS.items())} failed: {tail}"
                )
        scripts = _copy_scripts(folder)
    return NodeTools(folder, node, scripts)


def _copy_scripts(folder: Path) -> Path:
    """The tests' scripts in ``folder/scripts/<digest of their contents>`` (copied unless there)."""
    sources = sorted(JS_SOURCES.glob("*.mjs"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    target = folder / "scripts" / digest.hexdigest()[:12]
    if not target.is_dir():
        staged = target.with_name(f"{target.name}.{os.getpid()}")
        staged.mkdir(parents=True, exist_ok=True)
        for source in sources:
            shutil.copyfile(source, staged / source.name)
        staged.rename(target)  # held under the folder's lock: no one else is copying
    return target


def install_or_skip(title: str, who: str = "these tests") -> NodeTools:
    """:func:`install`, or skip the tests that need it, saying ``TITLE NOT RUN`` and why.

    Under CI, a failure instead: there *who* must run.
    """
    try:
        return install()
    except NpmUnavailable as exc:
        cannot_run(f"{title} NOT RUN: {exc}", who)
