"""One assertion for "the same profile": what the example server's profilers answer, compared.

The Arrow and the standard-library profilers must answer the same result: every count, type,
minimum and maximum equal, means and standard deviations up to float rounding, and the top
values equal unless both say they are approximate (a column of more distinct values than the
cap, where each keeps the heaviest values its own way).
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["assert_same_profile"]

#: Keys of a profile's result compared as they are (besides ``columns``).
_PLAIN = ("rows", "ragged_rows")


def assert_same_profile(got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Assert that *got* and *expected* (two profiles of the same data) say the same."""
    for key in _PLAIN:
        assert got[key] == expected[key], key
    assert [c["name"] for c in got["columns"]] == [c["name"] for c in expected["columns"]]
    for mine, theirs in zip(got["columns"], expected["columns"], strict=True):
        name = mine["name"]
        assert set(mine) == set(theirs), name
        for key in ("type", "count", "missing", "distinct", "distinct_capped", "top_approximate"):
            assert mine[key] == theirs[key], (name, key)
        if not theirs["top_approximate"]:
            assert mine["top"] == theirs["top"], name
        else:
            assert len(mine["top"]) == len(theirs["top"]), name
        if theirs["type"] == "numeric":
            assert (mine["min"], mine["max"]) == (theirs["min"], theirs["max"]), name
            assert mine["mean"] == pytest.approx(theirs["mean"], rel=1e-12, abs=1e-12), name
            assert mine["std"] == pytest.approx(theirs["std"], rel=1e-9, abs=1e-12), name
