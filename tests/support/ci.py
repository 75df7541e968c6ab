"""Tests that may be skipped where their tools are missing, but must run under CI (``CI=true``)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this is a CI run (``CI`` is ``1``, ``true`` or ``yes``)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def cannot_run(message: str, who: str = "these tests") -> NoReturn:
    """Skip with *message*; under CI fail instead, since there *who* must run."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: {who} must run)")
    pytest.skip(message)
