"""The third-party MCP software the interop tests run, installed from npm at pinned versions.

``js/package.json`` pins the packages and ``js/package-lock.json`` locks the rest;
:func:`install_or_skip` installs them with :func:`tests.support.node.install_locked` and
Debian's Node (the servers and the Inspector CLI run on Node 20), so only the first
run on a machine downloads anything. The tests' own JavaScript (``js/*.mjs``) is
copied below that folder, so that Node resolves its imports from its
``node_modules``: into a subfolder named after the scripts' contents, because
every checkout on the machine shares the packages, and one checkout's scripts
must never replace another's while its tests run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.support.node import folder_lock, system_node
from tests.support.node import install_or_skip as node_install_or_skip

#: The tests' scripts and the packages' manifest and lock. The Inspector's own package
#: (``@modelcontextprotocol/inspector``) wants Node >= 22.7.5; its CLI package declares no engine
#: and runs on Node 20.
JS_SOURCES = Path(__file__).resolve().parent / "js"


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
    """Install (or reuse) the pinned packages and this checkout's scripts; where they are.

    Without ``node``/``npm`` on PATH, or when ``npm ci`` fails, skip the tests that need them,
    saying ``TITLE NOT RUN`` and why; under CI, a failure instead: there *who* must run.
    """
    node, folder = node_install_or_skip(JS_SOURCES, "interop", title, who, system_node)
    with folder_lock(folder):
        scripts = _copy_scripts(folder)
    return NodeTools(folder, node.node, scripts)
