"""The dashboard's Trash section: what a server deleted is listed, Restore puts it back, Empty asks first."""

from __future__ import annotations

from pathlib import Path

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.widgets.dashboard import Dashboard

from .conftest import ALL_OPS, WAIT


def _dashboard(broker: Broker) -> Dashboard:
    return Dashboard(broker, tuple, refresh_interval=0.0)


def _delete(broker: Broker, *paths: str) -> None:
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("analysis")
    for path in paths:
        conn.handle("files/delete", {"path": path, "recursive": True})


def test_the_section_lists_what_was_deleted(broker: Broker) -> None:
    dash = _dashboard(broker)
    section = dash.trash
    assert "fsbroker-section-trash" in dash._sections["trash"].box._dom_classes
    assert "The trash is empty" in section.rows_box.children[0].value
    assert section.empty_button.disabled
    _delete(broker, "data/x.csv", "data/sales")
    assert dash.flush(WAIT)
    newest, oldest = broker.trash.list()
    buttons = dash.restore_buttons()
    assert list(buttons) == [newest.id, oldest.id]
    assert all("fsbroker-restore" in b._dom_classes and not b.disabled for b in buttons.values())
    texts = [row.children[1].value for row in section.rows_box.children]
    assert "<code" in texts[0] and "data/sales/" in texts[0] and "<b>analysis</b>" in texts[0]
    assert "data/x.csv" in texts[1] and newest.id[-8:] in texts[0]
    assert "2 entries" in section.summary.value and "kept 30 d" in section.summary.value
    assert dash._sections["trash"].label == "Trash (2)"
    assert not section.empty_button.disabled
    dash.close()


def test_restore_puts_the_file_back(broker: Broker, data: Path) -> None:
    dash = _dashboard(broker)
    _delete(broker, "data/x.csv")
    assert dash.flush(WAIT)
    [entry] = broker.trash.list()
    dash.restore_buttons()[entry.id].click()
    assert dash.flush(WAIT)
    assert (data / "x.csv").read_text() == "a,b\n1,2\n"
    assert "Restored <code>data/x.csv</code>" in dash.message.value
    assert dash.restore_buttons() == {}
    assert [r.method for r in broker.audit.records() if r.actor == "user"] == ["trash/restore"]
    dash.close()


def test_restore_never_replaces_what_is_there(broker: Broker, data: Path) -> None:
    dash = _dashboard(broker)
    _delete(broker, "data/x.csv")
    (data / "x.csv").write_text("written since")
    assert dash.flush(WAIT)
    [entry] = broker.trash.list()
    dash.restore_buttons()[entry.id].click()
    assert dash.flush(WAIT)
    assert (data / "x.csv").read_text() == "written since"
    assert "Could not restore" in dash.message.value and "overwrite=True" in dash.message.value
    assert list(dash.restore_buttons()) == [entry.id]
    dash.close()


def test_empty_asks_first_and_deletes_what_it_counted(broker: Broker, data: Path) -> None:
    dash = _dashboard(broker)
    section = dash.trash
    _delete(broker, "data/x.csv", "data/sales")
    assert dash.flush(WAIT)
    assert section.confirm_box.layout.display == "none"
    section.empty_button.click()
    assert section.confirm_box.layout.display == "flex"
    assert "Delete all 2 entries" in section.question.value and "cannot be undone" in section.question.value
    section.cancel_button.click()
    assert section.confirm_box.layout.display == "none"
    assert len(broker.trash.list()) == 2
    section.empty_button.click()
    # Deleted after the question was asked: not among what it counted, so it stays.
    (data / "late.txt").write_text("late")
    _delete(broker, "data/late.txt")
    section.confirm_button.click()
    assert dash.flush(WAIT)
    assert [e.path for e in broker.trash.list()] == ["data/late.txt"]
    assert "Deleted 2 trash entries for good." in dash.message.value
    assert "fsbroker-empty-confirm" in section.confirm_button._dom_classes
    assert "fsbroker-empty-cancel" in section.cancel_button._dom_classes
    assert "fsbroker-empty-trash" in section.empty_button._dom_classes
    dash.close()


def test_a_retired_dashboard_disables_the_trash_buttons(broker: Broker) -> None:
    dash = _dashboard(broker)
    _delete(broker, "data/x.csv")
    assert dash.flush(WAIT)
    dash.retire("the broker was closed")
    assert all(button.disabled for button in dash.restore_buttons().values())
    assert dash.trash.empty_button.disabled
    dash.close()
