"""The text a view without widgets shows for ours (GitHub, nbconvert, a terminal): the whole of it.

ipywidgets puts ``repr(widget)`` in the ``text/plain`` of a widget's output, cut
at 110 characters, mid-word: a connection card lost its "not sandboxed" that
way. Our widgets' reprs are one deliberate line each, so they are kept whole.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WholeText"]


class WholeText:
    """Mixin for our widgets: the ``text/plain`` of their output is the whole ``repr``."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle
