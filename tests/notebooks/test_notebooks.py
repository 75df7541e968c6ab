"""The tutorial notebooks run unattended and tell the story they claim; the saved ones read well.

Each notebook is executed in a fresh kernel (nbclient, as ``jupyter execute``
does) in a copy of ``notebooks/`` under the test's temporary folder, with its
own home folder; notebook 02 with a small dataset. A cell that fails fails the
test; then a few outputs that carry the story are checked, and that nothing
stayed behind (the notebook's ``_work`` folder, servers, kernels: the leak
check of ``tests/conftest.py`` applies).

The committed notebooks are checked too: saved with the outputs of a real run
(02 at its stated size), without errors, absolute paths of the machine that ran
them, or large blobs.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_core.utils import ensure_event_loop
from nbclient import NotebookClient

from jupyter_fsbroker.sandbox.launch import SandboxUnavailable, landlock_abi
from tests.kernel.harness import isolated_env
from tests.support.env import REPO, server_env
from tests.support.leaks import ends_with_each_user

pytestmark = pytest.mark.slow

NOTEBOOKS = REPO / "notebooks"
NAMES = sorted(path.name for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
#: Seconds one cell may take before nbclient gives up: a safety net, far above what any cell needs.
CELL_TIMEOUT = 600
#: Seconds a kernel may take to start, and a cell's output to follow its reply: safety nets too.
#: (nbclient's defaults, 60 s and 4 s, are met on a loaded machine; past the second it drops the
#: cell's remaining outputs with a warning, and the checks below would miss them.)
STARTUP_TIMEOUT = 300
IOPUB_TIMEOUT = 120
#: The size of notebook 02's dataset in the tests, in MB.
TEST_SIZE_MB = "4"
#: The size notebook 02 states, which its saved outputs must come from.
STATED_SIZE_MB = 300


@pytest.fixture(scope="module")
@ends_with_each_user  # the loop is made at set-up and closed at the end; nothing else is started
def _loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The event loop nbclient's blocking API runs on in this thread (made once, closed at the end)."""
    loop = ensure_event_loop()
    yield loop
    loop.close()


def _outputs(cell: Any) -> str:
    """Every text a code cell showed: streams, plain text and HTML of its results, errors."""
    texts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            texts.append(output["text"])
        elif output["output_type"] == "error":
            texts.append(f"{output['ename']}: {output['evalue']}")
        else:
            data = output.get("data", {})
            texts += [str(data.get(kind, "")) for kind in ("text/plain", "text/html", "text/markdown")]
    return "\n".join(texts)


def _all_outputs(nb: Any) -> str:
    return "\n".join(_outputs(cell) for cell in nb.cells if cell.cell_type == "code")


def _errors(nb: Any) -> list[str]:
    return [
        f"{output['ename']}: {output['evalue']}"
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output["output_type"] == "error"
    ]


def _run(name: str, tmp_path: Path, **env: str) -> tuple[Any, Path]:
    """Execute notebook *name* in a copy of ``notebooks/``; return it with its outputs, and the copy."""
    folder = tmp_path / "notebooks"
    shutil.copytree(
        NOTEBOOKS, folder, ignore=shutil.ignore_patterns("_work", "__pycache__", ".ipynb_checkpoints")
    )
    # Local servers are started from this folder with `python -m ...` or a script path and a clean
    # environment (no PYTHONPATH): they import the package from here, that is from this checkout.
    (folder / "jupyter_fsbroker").symlink_to(REPO / "jupyter_fsbroker", target_is_directory=True)
    # A script's own folder comes first on its path (`servers/hostile_server.py`: `servers/`), and a
    # sandboxed one may read that folder but not where a link would lead: a copy, then.
    shutil.copytree(
        REPO / "jupyter_fsbroker",
        folder / "servers" / "jupyter_fsbroker",
        ignore=shutil.ignore_patterns("__pycache__", "labextension"),
    )
    nb = nbformat.read(folder / name, as_version=4)
    # Nobody clicks here: notebook 01 answers its consent prompts from code with this.
    kernel_env = {**isolated_env(tmp_path / "home"), **server_env(), "FSBROKER_ANSWER_IN_CODE": "1", **env}
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        startup_timeout=STARTUP_TIMEOUT,
        iopub_timeout=IOPUB_TIMEOUT,
        raise_on_iopub_timeout=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute(env=kernel_env)
    return nb, folder


def _check_clean(nb: Any, folder: Path) -> None:
    assert _errors(nb) == []
    assert not (folder / "_work").exists(), "the notebook left its work folder behind"
    assert str(folder) not in _all_outputs(nb), "an absolute path of the notebook's folder was shown"


def test_01_quickstart(tmp_path: Path, _loop: asyncio.AbstractEventLoop) -> None:
    nb, folder = _run("01_quickstart.ipynb", tmp_path)
    _check_clean(nb, folder)
    out = _all_outputs(nb)
    assert "360 rows, 5 columns" in out  # the profile the server computed
    assert "analysis asks: 'Profile data/sales.csv" in out and "read on data/sales.csv" in out
    # The report's consent: read granted already, write asked on the report only.
    assert "read on data/sales.csv: granted already" in out and "write on data/sales.report.md" in out
    # Its audit record names the path that was asked, not the one granted already.
    assert re.search(r"files/consent +data/sales\.report\.md", out), "the report's consent names the report"
    assert "# Profile of `data/sales.csv`" in out and "| revenue | numeric | 351 | 9 |" in out
    assert "not_granted" in out and "revoked 2 grants; left: 0" in out
    assert "connection 'analysis': closed (closed by the user)" in out
    assert "Not for any server" not in out


def test_02_remote_analysis(tmp_path: Path, _loop: asyncio.AbstractEventLoop) -> None:
    nb, folder = _run("02_remote_analysis.ipynb", tmp_path, FSBROKER_TUTORIAL_SIZE_MB=TEST_SIZE_MB)
    _check_clean(nb, folder)
    out = _all_outputs(nb)
    generated = int(re.search(r"([\d,]+) orders, \d+ MB, generated", out)[1].replace(",", ""))  # type: ignore[index]
    profiled = re.search(r"([\d,]+) rows, \d+ MB in ([\d,]+) chunks", out)
    assert profiled is not None and int(profiled[1].replace(",", "")) == generated
    assert int(profiled[2]) >= 4  # streamed in 1 MiB chunks
    written = re.search(r"([\d,]+) of ([\d,]+) orders written: [\d.]+ MB in (\d+) staged chunks", out)
    assert written is not None and int(written[2].replace(",", "")) == generated
    assert 0 < int(written[1].replace(",", "")) < generated and int(written[3]) >= 1
    sizes = re.search(r"sizes the notebook saw meanwhile: \[([\d, ]*)\] — old (\d+), new (\d+)", out)
    assert sizes is not None and {int(s) for s in sizes[1].split(", ") if s} <= {int(sizes[2]), int(sizes[3])}
    converted = re.search(r"([\d,]+) rows written to data/results/orders.parquet", out)
    assert converted is not None and int(converted[1].replace(",", "")) == generated
    # One column's profile and a two-column query read about their columns' chunks, not the file.
    for tool, columns in (("profile_parquet", "the column's chunks"), ("query", "region and quantity")):
        read = re.search(
            rf"{tool} read ([\d.]+) MB of the file's ([\d.]+) MB; [^:]*{columns}: ([\d.]+) MB", out
        )
        assert read is not None, tool
        assert float(read[1]) < float(read[2]), tool
    assert "files/read" in out and "files/write" in out  # the audit summary


def test_03_locks_and_collaboration(tmp_path: Path, _loop: asyncio.AbstractEventLoop) -> None:
    nb, folder = _run("03_locks_and_collaboration.ipynb", tmp_path)
    _check_clean(nb, folder)
    out = _all_outputs(nb)
    assert "each exactly once: True" in out and "counter.txt now holds 40" in out
    assert "both read the same version: True" in out
    assert "bob was refused: bob · write_text failed: PRECONDITION_FAILED" in out
    assert "FILE_LOCKED: shared/notes.md is kept locked by alice" in out
    assert "- alice: profiled the March data\n- bob: cleaned the regions\n- bob: added the totals" in out
    assert "alice: alice · unlock_file failed: NOT_FOUND" in out
    assert "kept locks before: Counter({'alice': 1})" in out
    assert "kept locks after alice closed: Counter()" in out


def test_04_watching_changes(tmp_path: Path, _loop: asyncio.AbstractEventLoop) -> None:
    nb, folder = _run("04_watching_changes.ipynb", tmp_path)
    _check_clean(nb, folder)
    out = _all_outputs(nb)
    assert "pipeline watches data/inbox" in out
    assert "moved  data/inbox/orders-2026-03.csv  (was data/inbox/orders-01.csv)" in out
    assert "deleted  data/inbox/old-export.csv" in out
    assert "(marker seen: True)" in out
    assert "the server received exactly the feed: True" in out
    assert "the same, but for .env: True" in out
    assert "not-for-servers" not in out


def test_05_security_model(tmp_path: Path, _loop: asyncio.AbstractEventLoop) -> None:
    nb, folder = _run("05_security_model.ipynb", tmp_path)
    _check_clean(nb, folder)
    cells = [_outputs(cell) for cell in nb.cells if cell.cell_type == "code"]
    out = "\n".join(cells)
    for reason in ("traversal", "escaping_symlink", "outside_roots", "sensitive", "read_only", "nul_byte"):
        assert f"PERMISSION_DENIED  {reason}" in out, reason
    # Handed the locations, it is told where data is, never where the read-only folder is; by default
    # it is told the names only, and the connection says why.
    assert "{'name': 'data', 'read_only': False, 'located': True}" in out
    assert "{'name': 'reference', 'read_only': True, 'located': True}" not in out
    assert (
        "{'roots': [{'name': 'data', 'read_only': False, 'located': False}, "
        "{'name': 'reference', 'read_only': True, 'located': False}]}"
    ) in out
    assert "hostile-default asked where the shared folders are (roots/list) and got only their names" in out
    assert "'approvedPaths': ['data']" in out  # a consent for everything granted only the root
    assert "'stopped_by': 'PERMISSION_DENIED', 'reason': 'not_granted'" in out  # revoked mid-session
    assert re.search(r"server process \d+ is gone", out)
    # Nothing from outside the roots, and no sensitive content, reached the notebook through the broker;
    # only the last section's local server, opening a file itself, read one.
    for secret in ("sk-live-do-not-share", "hunter2", "also outside", "token@git", "OPENSSH"):
        assert secret not in out, secret
    [direct] = [i for i, text in enumerate(cells) if "the outside world" in text]
    assert "'read': True" in cells[direct] and direct >= len(cells) - 3
    # The same server, sandboxed, reads nothing directly: not outside the roots, not inside them.
    [boxed] = [text for text in cells if "hostile-boxed:" in text or "no sandbox on this machine" in text]
    try:
        landlock_abi()
    except SandboxUnavailable:
        assert "no sandbox on this machine" in boxed
    else:
        assert "hostile-boxed: sandboxed (files;" in boxed
        assert boxed.count("'read': False, 'error': 'PermissionError'") == 2
        assert re.search(r"through files/\*: \{'request': 'files/read .*'outcome': 'answered'", boxed)


# -- the committed notebooks --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_carry_the_outputs_of_a_clean_run(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), "not executed top to bottom in one run"
    assert _errors(nb) == []
    saved = json.dumps(nb)  # outputs and the saved widget state
    assert not re.search(r"(?<![\w.])/(?:home|root|tmp|work|Users|private|var)/", saved), "a machine's path"
    assert len(saved) < 400_000, f"{name} is {len(saved):,} characters: a large blob in its outputs?"


def test_the_saved_remote_analysis_ran_at_its_stated_size() -> None:
    nb = nbformat.read(NOTEBOOKS / "02_remote_analysis.ipynb", as_version=4)
    assert f'"FSBROKER_TUTORIAL_SIZE_MB", "{STATED_SIZE_MB}"' in nb.cells[2].source
    found = re.search(r"([\d,]+) orders, ([\d,]+) MB, generated", _all_outputs(nb))
    assert found is not None and int(found[2].replace(",", "")) >= STATED_SIZE_MB


def test_every_notebook_is_tested() -> None:
    tested = {name.removeprefix("test_") for name in globals() if re.fullmatch(r"test_\d\d_\w+", name)}
    assert {name.removesuffix(".ipynb") for name in NAMES} == tested
