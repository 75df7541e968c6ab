"""Fixtures of the text view tests: a real broker with two roots (no widgets here)."""

from tests.support.views import broker, data, ref

__all__ = ["broker", "data", "ref"]
