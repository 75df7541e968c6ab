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
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    namespace: MutableMapping[str, Any],
    names: Mapping[str, str],
    *,
    moved: Mapping[str, str] | None = None,
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
    moved
        ``{name: module}`` of names that moved to another package and still resolve here for
        one release: each use warns with a :class:`DeprecationWarning` that names the new
        place. They are not public here (``__dir__`` leaves them out).

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)``, to assign at the package's module level.
    """
    table = dict(names)
    gone = dict(moved or {})

    def __getattr__(name: str) -> Any:
        if name in gone:
            new = importlib.import_module(gone[name], package)
            warnings.warn(
                f"{package}.{name} is now {new.__name__}.{name}; the old place goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(new, name)  # not cached: every use warns
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
