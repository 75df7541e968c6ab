"""Public names of a package imported on first use: one helper for every ``__init__``.

A package's ``__init__`` lists its public names in ``__all__`` and gets the
module-level ``__getattr__`` and ``__dir__`` of PEP 562 from :func:`lazy_exports`::

    from .. import _lazy

    __getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), {"Dashboard": ".dashboard"})

so that importing the package (or one of its lightweight modules) does not load
the heavy ones (IPython, ``ipywidgets``, ``mcp``) until a name that needs them
is used. Type checkers see the names through ``if TYPE_CHECKING:`` imports in
the same ``__init__``; this module is invisible to them.

This module must never import anything but the standard library: every
package's ``__init__`` runs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names are imported on first use.

    Parameters
    ----------
    package
        The package's ``__name__`` (relative module names are resolved against it).
    namespace
        The package's ``globals()``: a resolved name is stored there, so the
        next lookup is an ordinary attribute and never reaches ``__getattr__``.
    names
        ``{public name: module}``, the module spelled relative to the package
        (``".dashboard"``) or absolute.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)``, to assign at the package's module level.
    """
    table = dict(names)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
