"""Output-schema validation made ready off the event loop.

``ClientSession`` checks a tool's structured result against its output schema
and imports ``jsonschema`` the first time it does, on the event loop that runs
the connection: the import compiles grammars (``rfc3987_syntax``) for more than
a second (``benchmarks/README.md``, "Why the code is shaped this way"), a stall
for every connection on that loop and for the first call. The client
calls :func:`prepare_output_validation` once it knows a server has such tools;
the import then happens on a short-lived thread while nobody waits for it.

It never validates anything itself.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading

__all__ = ["prepare_output_validation"]

log = logging.getLogger(__name__)


def prepare_output_validation() -> None:
    """Import jsonschema on a thread, once per process, before the first tool result needs it.

    ``ClientSession`` validates structured results against a tool's output
    schema and imports jsonschema on first use, which compiles grammars for more
    than a second: on the event loop, that stalls every connection and the first call.
    """
    global _prepared
    if _prepared or "jsonschema" in sys.modules:
        return
    _prepared = True

    def prepare() -> None:
        try:
            for name in ("jsonschema.validators", "referencing"):
                importlib.import_module(name)
        except Exception:  # pragma: no cover - then the first call imports it and says why
            log.debug("preparing output-schema validation failed", exc_info=True)

    threading.Thread(target=prepare, name="fsbroker-jsonschema-import", daemon=True).start()


_prepared = False
