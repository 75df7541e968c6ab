"""The announcement a real kernel publishes on IOPub when the extension loads.

A panel opens its comm when it sees the ``update_display_data`` of display id
``jupyter_fsbroker.announce``: that message is read on IOPub while the cell that
loaded the extension still runs, so a cell that loads the extension and then
blocks in a call has the panels already. No frontend renders it: the display
was never shown, and the message is an update of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jupyter_fsbroker.kernel.panel.messages import ANNOUNCE_ID, ANNOUNCE_MIME, PROTOCOL_VERSION, TARGET
from tests.support.panel_comm import Panel

from .harness import Kernel

pytestmark = pytest.mark.slow


def announcements(kernel: Kernel, msg_id: str) -> list[dict[str, Any]]:
    """The announcements among the IOPub messages of the cell *msg_id*."""
    return [
        msg
        for msg in kernel.iopub_log
        if msg.get("parent_header", {}).get("msg_id") == msg_id
        and msg["content"].get("transient", {}).get("display_id") == ANNOUNCE_ID
    ]


def test_load_ext_announces_the_broker_on_iopub_and_a_second_load_ext_changes_nothing(
    start_kernel: Callable[..., Kernel],
) -> None:
    kernel = start_kernel()
    plain = kernel.run("print('no extension yet')")
    assert announcements(kernel, plain.msg_id) == []

    loaded = kernel.run("%load_ext jupyter_fsbroker").check()
    (announce,) = announcements(kernel, loaded.msg_id)
    assert announce["msg_type"] == "update_display_data"
    assert announce["content"]["data"] == {
        ANNOUNCE_MIME: {"version": PROTOCOL_VERSION, "type": "announce", "target": TARGET}
    }
    # Nothing for a frontend to render: no display_data, no output of the cell.
    assert loaded.displays == [] and loaded.stdout == "" and loaded.stderr == ""
    # The announcement comes before the cell ends: a panel reading IOPub sees it while the cell runs.
    cell = [m for m in kernel.iopub_log if m.get("parent_header", {}).get("msg_id") == loaded.msg_id]
    idle = next(i for i, m in enumerate(cell) if m["content"].get("execution_state") == "idle")
    assert cell.index(announce) < idle

    # Loading it again is a no-op: no second announcement, the same broker, a panel still attaches.
    kernel.run("import jupyter_fsbroker as fsb\nfirst = fsb.get_broker()")
    again = kernel.run("%load_ext jupyter_fsbroker").check()
    assert announcements(kernel, again.msg_id) == []
    assert again.stderr == "" and again.failure is None
    assert kernel.value("fsb.get_broker() is first") is True
    panel = Panel(kernel, subshell_id=kernel.create_subshell())
    assert panel.state()["roots"] == []

    # A reload starts a new broker, and that one announces itself too.
    reloaded = kernel.run("%reload_ext jupyter_fsbroker").check()
    assert len(announcements(kernel, reloaded.msg_id)) == 1
    assert kernel.value("fsb.get_broker() is not first") is True
