"""The environment of a subprocess that must import this checkout, whatever is installed."""

from __future__ import annotations

import os
from pathlib import Path

#: The root of this checkout.
REPO = Path(__file__).resolve().parents[2]


def server_env() -> dict[str, str]:
    """What to add to a subprocess's environment so that it imports this checkout first.

    Servers, kernels and the command line run ``jupyter_fsbroker`` from ``PYTHONPATH``
    before anything installed (an editable install may point at another checkout).
    Merge it into the environment the subprocess gets: ``{**os.environ, **server_env()}``.
    """
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), path) if p)}
