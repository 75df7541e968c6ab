"""The trash in a real kernel: a real server deletes, the user lists and restores from the notebook.

The server is ``tests/reliability/servers/app.py`` over stdio (built with the server helper); its
``request`` tool sends one raw ``files/delete`` to the kernel, as a server with a delete grant
would. The kernel's trash is in its isolated home (``XDG_DATA_HOME``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.env import REPO
from tests.support.notebook_kernel import SALES_CSV, load

from .harness import Kernel, Widget

APP = repr([sys.executable, str(REPO / "tests" / "reliability" / "servers" / "app.py")])

#: A cell: the server deletes *path* through the kernel; the cell's value is what the server got back.
DELETE = 'cleaner.call_tool("request", {{"method": "files/delete", "params": {{"path": "{path}"}}}}).data'


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    kernel = start_kernel()
    load(kernel)
    kernel.run("broker.allow('data', ops=('read', 'write', 'delete'))")
    kernel.run(f"cleaner = broker.connect('cleaner', command={APP})")
    yield kernel


def test_a_file_a_server_deleted_is_listed_and_restored_from_the_magic(kernel: Kernel) -> None:
    sales = kernel.cwd / "data" / "sales.csv"
    assert kernel.value(DELETE.format(path="data/sales.csv")) == {
        "result": {"path": "data/sales.csv", "trashed": True}
    }
    assert not sales.exists()

    listed = kernel.run("%fsbroker trash").check()
    assert "Trash: 1 entry" in listed.text and "data/sales.csv" in listed.text and "cleaner" in listed.text
    html = str(listed.result.get("text/html", "") if listed.result else "")
    assert "<table" in html and "data/sales.csv" in html
    tail = kernel.value("broker.trash().list()[0].id[-8:]")
    assert tail in listed.text

    restored = kernel.run(f"%fsbroker trash restore {tail}").check()
    assert restored.stdout == f"Restored data/sales.csv to {sales.resolve()}.\n"
    assert sales.read_text() == SALES_CSV
    assert kernel.value("len(broker.trash().list())") == 0
    users = "[(r.method, r.actor, r.path) for r in broker.core.audit.records() if r.actor != 'server']"
    assert kernel.value(users) == [("trash/restore", "user", "data/sales.csv")]


def test_restore_refuses_to_replace_and_empty_deletes_for_good(kernel: Kernel) -> None:
    raw = kernel.cwd / "data" / "raw" / "one.csv"
    kernel.value(DELETE.format(path="data/raw/one.csv"))
    raw.write_text("written since")
    tail = kernel.value("broker.trash().list()[0].id[-8:]")
    refused = kernel.run_fail(f"%fsbroker trash restore {tail}")
    assert refused["ename"] == "UsageError" and "something is at" in refused["evalue"]
    assert raw.read_text() == "written since"
    kept = kernel.run("%fsbroker trash empty --older-than 1").check()
    assert kept.stdout == "Deleted 0 trash entries for good.\n"
    emptied = kernel.run("%fsbroker trash empty").check()
    assert emptied.stdout == "Deleted 1 trash entry for good.\n"
    assert kernel.value("len(broker.trash().list())") == 0


def test_a_small_trash_set_at_run_time_refuses_a_large_delete(kernel: Kernel) -> None:
    kernel.run("%config FSBroker.trash_max_bytes = 10")
    try:
        answer = kernel.value(DELETE.format(path="data/sales.csv"))
        assert (answer["error"]["name"], answer["error"]["reason"]) == ("TOO_LARGE", "exceeds_trash")
        assert (kernel.cwd / "data" / "sales.csv").exists()
    finally:
        kernel.run("%config FSBroker.trash_max_bytes = None")


def restore_button(kernel: Kernel, path: str, timeout: float = 15.0) -> Widget:
    """The Restore button of the dashboard's trash row that names *path*."""

    def find() -> Widget | None:
        for row in kernel.descendants(kernel.wait_widget("fsbroker-dashboard")):
            parts = [
                kernel.widgets.get(ref.removeprefix("IPY_MODEL_")) for ref in row.state.get("children", [])
            ]
            buttons = [w for w in parts if w is not None and "fsbroker-restore" in w.classes]
            if buttons and any(path in str(w.state.get("value", "")) for w in parts if w is not None):
                return buttons[0]
        return None

    button: Widget = kernel.wait_for(find, timeout, f"a Restore button for {path}")
    return button


def test_the_dashboards_restore_button(kernel: Kernel) -> None:
    sales = kernel.cwd / "data" / "sales.csv"
    kernel.run("%fsbroker status")
    kernel.value(DELETE.format(path="data/sales.csv"))
    assert not sales.exists()
    kernel.click(restore_button(kernel, "data/sales.csv"))
    kernel.wait_for(sales.exists, 15.0, "data/sales.csv restored by the Restore button")
    assert sales.read_text() == SALES_CSV


def test_the_settings_reach_the_broker_config(tmp_path: Path) -> None:
    from traitlets import TraitError

    from jupyter_fsbroker.core.config import DEFAULT_TRASH_MAX_AGE
    from jupyter_fsbroker.kernel.settings import LIVE_TRAITS, FSBroker

    default = FSBroker().make_config()
    assert (default.trash_max_age, default.trash_max_bytes, default.audit_required) == (
        DEFAULT_TRASH_MAX_AGE,
        None,
        False,
    )
    audit = str(tmp_path / "audit.jsonl")
    chosen = FSBroker(trash_max_age=3600.0, trash_max_bytes=10**6, audit_file=audit, audit_required=True)
    config = chosen.make_config()
    assert (config.trash_max_age, config.trash_max_bytes, config.audit_path, config.audit_required) == (
        3600.0,
        10**6,
        audit,
        True,
    )
    assert {"trash_max_age", "trash_max_bytes"} <= set(LIVE_TRAITS) and "audit_required" not in LIVE_TRAITS
    for bad in ({"trash_max_age": 0.0}, {"trash_max_bytes": -1}):
        with pytest.raises(TraitError, match="must be positive"):
            FSBroker(**bad)
