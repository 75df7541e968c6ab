"""Views close every widget they made (layouts and styles too): the kernel's widget registry does not grow."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from ipywidgets.widgets.widget import _instances

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision
from jupyter_fsbroker.core.limits import MiB
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.dashboard import Dashboard
from jupyter_fsbroker.widgets.progress import TransferProgress

from .conftest import ALL_OPS, WAIT, FakeView, make_request


def test_a_prompt_closes_all_it_made() -> None:
    before = len(_instances)
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future)
    assert len(_instances) > before
    prompt.approve_button.click()
    prompt.close()
    assert len(_instances) == before


def test_a_dashboard_closes_all_it_made(broker: Broker) -> None:
    before = len(_instances)
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("analysis")
    views = [FakeView("analysis", conn)]
    dash = Dashboard(broker, lambda: views)
    for i in range(5):
        grant = broker.allow(f"data/f{i}", ops=("read",))
        lock_id = conn.handle("files/read", {"path": "data/x.csv", "keepLocked": True})["lockId"]
        assert dash.flush(WAIT)
        broker.grants.revoke(grant.id)
        broker.force_unlock(lock_id)
        assert dash.flush(WAIT)
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future)
    dash.add_prompt(prompt)
    dash.close()
    prompt.close()
    assert len(_instances) == before


def test_progress_closes_all_it_made(broker: Broker, data: Path) -> None:
    before = len(_instances)
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("analysis")
    progress = TransferProgress(broker, keep_finished=1)
    for name in ("a.bin", "b.bin", "c.bin"):
        (data / name).write_bytes(b"\x00" * (MiB + 1))
        conn.handle("files/read", {"path": f"data/{name}", "encoding": "base64", "length": MiB})
        conn.handle("files/read", {"path": f"data/{name}", "encoding": "base64", "offset": MiB})
    assert len(progress.transfers()) == 1
    progress.close()
    assert len(_instances) == before
