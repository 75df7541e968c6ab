"""How jupyter-fsbroker-serverkit is built from this repository: its files and its version.

The kit's sources are not in this folder but two up, in the repository's package: the build hook
adds the files of ``jupyter_fsbroker/serverkit/`` and ``jupyter_fsbroker/wire/`` (whichever exist)
to the wheel and the sdist, and the metadata hook reads the version from the repository's
``pyproject.toml``, the one place it is written. A build from the kit's sdist finds the files beside
this one instead, and hatchling reads the version from the sdist's ``PKG-INFO``. An editable build
adds no file: its ``.pth`` puts the repository root on ``sys.path`` (``dev-mode-dirs``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

HERE = Path(__file__).resolve().parent
#: The repository this folder is part of.
REPO = HERE.parents[1]
#: The folders of the package that make the kit.
FOLDERS = ("serverkit", "wire")


def _package() -> Path:
    """Where the kit's folders are: in the repository, or beside this file in the kit's sdist."""
    return HERE / "jupyter_fsbroker" if (HERE / "PKG-INFO").is_file() else REPO / "jupyter_fsbroker"


class KitVersion(MetadataHookInterface):
    """The version of the repository's ``pyproject.toml``."""

    def update(self, metadata: dict[str, Any]) -> None:
        if "version" not in metadata:  # an sdist's PKG-INFO gave it already
            project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
            metadata["version"] = project["version"]


class KitFiles(BuildHookInterface):  # type: ignore[type-arg]
    """The kit's source files, under their place in the package."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        package = _package()
        for folder in FOLDERS:
            for path in sorted((package / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    build_data["force_include"][str(path)] = f"jupyter_fsbroker/{path.relative_to(package)}"
