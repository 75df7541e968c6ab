"""Build hook: the built JupyterLab extension carries the package's version, written only in pyproject.toml.

Runs after the jupyter-builder hook (hooks run in the order ``pyproject.toml``
lists them): it writes the version, spelled the npm way, into the built
extension's ``package.json`` (what ``jupyter labextension list`` shows). The
source ``labextension/package.json`` keeps a placeholder version and is never
modified by a build. It never builds anything itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from packaging.version import Version

#: The built extension's metadata, relative to the project root.
BUILT_PACKAGE_JSON = Path("jupyter_fsbroker", "labextension", "package.json")


def npm_version(version: str) -> str:
    """A PEP 440 version spelled as semver: ``0.1.0.dev0`` → ``0.1.0-dev.0``, ``1.2rc1`` → ``1.2.0-rc.1``."""
    parsed = Version(version)
    release = [*parsed.release, 0, 0][:3] if len(parsed.release) < 3 else list(parsed.release)
    text = ".".join(str(part) for part in release)
    pre: list[str] = []
    if parsed.pre is not None:
        label = {"a": "alpha", "b": "beta", "rc": "rc"}[parsed.pre[0]]
        pre += [label, str(parsed.pre[1])]
    if parsed.dev is not None:
        pre += ["dev", str(parsed.dev)]
    if pre:
        text += "-" + ".".join(pre)
    build = []
    if parsed.post is not None:
        build += ["post", str(parsed.post)]
    if parsed.local is not None:
        build += parsed.local.split(".")
    if build:
        text += "+" + ".".join(build)
    return text


class LabextensionVersionHook(BuildHookInterface):  # type: ignore[type-arg]
    """Stamp the built extension with the project's version."""

    PLUGIN_NAME = "labextension-version"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        path = Path(self.root) / BUILT_PACKAGE_JSON
        if not path.is_file():  # a build without the extension (SKIP_JUPYTER_BUILDER): nothing to stamp
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        wanted = npm_version(self.metadata.version)
        if data.get("version") != wanted:
            data["version"] = wanted
            path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
