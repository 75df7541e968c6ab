"""Text views of the broker, for terminals and frontends without widgets: no ``ipywidgets`` here.

* :mod:`.status` — the broker's state as text (:func:`status_text`, :class:`TextView`) and what
  every view reads the same way (:class:`ConnectionView`, :func:`follow_broker`).
* :mod:`.format` — words and numbers for people: reasons, sizes, ages, durations, escaping.
* :mod:`.consent_text` — a consent request as a text question, the answers it accepts, and what
  came of it.
* :mod:`.prompt` — :class:`TerminalConsenter`, the terminal prompt of the CLI and a terminal
  IPython.

The widgets (:mod:`jupyter_fsbroker.widgets`) use these words too, so every view says the same.
Views observe the broker and never decide policy.
"""

from __future__ import annotations

from .prompt import TerminalConsenter
from .status import ConnectionView, status_text

__all__ = ["ConnectionView", "TerminalConsenter", "status_text"]
