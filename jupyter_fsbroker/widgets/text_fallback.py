"""The text a view without widgets shows for ours (GitHub, nbconvert, a terminal): the whole of it.

ipywidgets puts ``repr(widget)`` in the ``text/plain`` of a widget's output, cut
at 110 characters, mid-word: a connection card lost its "not sandboxed" that
way. Our widgets' reprs are one deliberate line each, so they are kept whole; a
widget whose words mean nothing once its moment has passed (a call's running line,
which a saved notebook would show long after the call ended) says nothing there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WholeText", "fallback_text"]


class WholeText:
    """Mixin for our widgets: the ``text/plain`` of their output is :meth:`fallback_text`, whole."""

    def fallback_text(self) -> str:
        """What a view without widgets shows for this widget: its ``repr``, unless overridden."""
        return repr(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is not None:
            bundle["text/plain"] = self.fallback_text()
        return bundle


def fallback_text(widget: Any) -> str:
    """:meth:`WholeText.fallback_text` of *widget*, or its ``repr`` for a widget of another kind."""
    return widget.fallback_text() if isinstance(widget, WholeText) else repr(widget)
