"""The version of jupyter_fsbroker, as its installed metadata says it.

``pyproject.toml`` is the one place the version is written; an install carries it in the
distribution's metadata, and this module reads it there. Standard library only: the server kit's
own distribution ships without this module, and every layer may import it.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["__version__"]

try:
    __version__: str = importlib.metadata.version("jupyter_fsbroker")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
