"""What the command-line tests share: a working folder with one shared folder in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import SALES


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder as the current one, holding ``data/sales.csv``.

    The trash and the per-user data of the processes the test starts stay inside it (their lock
    files go to the account's lock folder, which no environment variable moves).
    """
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text(SALES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    return tmp_path
