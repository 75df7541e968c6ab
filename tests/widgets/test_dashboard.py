"""The dashboard: sections follow the broker, buttons act through public methods, no thread is left."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from jupyter_fsbroker.console.status import ConnectionView
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.errors import FileLocked, PermissionDenied
from jupyter_fsbroker.core.watch import ChangeEvent
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.dashboard import Dashboard
from jupyter_fsbroker.wire.timestamps import iso_utc

from .conftest import ALL_OPS, WAIT, FakeView, join_all, make_request


def _dashboard(broker: Broker, views: list[FakeView] | None = None, **kwargs: float) -> Dashboard:
    shown = views if views is not None else []
    return Dashboard(broker, lambda: shown, **kwargs)  # type: ignore[arg-type]


def _approve_read(request: ConsentRequest) -> ConsentDecision:
    return ConsentDecision(request.approvable_paths, ("read",), 900)


def test_fake_view_is_a_connection_view() -> None:
    assert isinstance(FakeView("x"), ConnectionView)


def test_dom_classes(broker: Broker) -> None:
    dash = _dashboard(broker)
    assert "fsbroker-dashboard" in dash._dom_classes
    assert "fsbroker-changes" in dash.changes_html._dom_classes
    assert "fsbroker-activity" in dash.activity_html._dom_classes
    assert "fsbroker-consent-area" in dash.consent_area._dom_classes
    broker.allow("data/sales", ops=("read",))
    conn = broker.connect("analysis")
    broker.allow("data/x.csv", ops=("read",))
    conn.handle("files/read", {"path": "data/x.csv", "keepLocked": True})
    views = [FakeView("analysis", conn)]
    dash.close()
    dash = _dashboard(broker, views)
    assert all("fsbroker-revoke" in b._dom_classes for b in dash.revoke_buttons().values())
    assert all("fsbroker-force-unlock" in b._dom_classes for b in dash.force_unlock_buttons().values())
    assert "fsbroker-disconnect" in dash.disconnect_buttons()["analysis"]._dom_classes
    assert len(dash.revoke_buttons()) == 2 and len(dash.force_unlock_buttons()) == 1
    dash.close()


def test_roots_follow_the_broker(broker: Broker, tmp_path: Path) -> None:
    dash = _dashboard(broker)
    assert "<b>data</b>" in dash.roots_html.value and "<b>ref</b>" in dash.roots_html.value
    assert "read-only" in dash.roots_html.value and "read-write" in dash.roots_html.value
    assert "2 shared folders" in dash.header.value
    (tmp_path / "more").mkdir()
    broker.add_root(tmp_path / "more", name="more", read_only=True)
    assert dash.flush(WAIT)
    assert "<b>more</b>" in dash.roots_html.value
    assert "3 shared folders" in dash.header.value
    broker.remove_root("more")
    assert dash.flush(WAIT)
    assert "<b>more</b>" not in dash.roots_html.value
    dash.close()


def test_connections_and_the_kill_switch(broker: Broker) -> None:
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("analysis")
    locked = conn.handle("files/read", {"path": "data/x.csv", "keepLocked": True})
    view = FakeView("analysis", conn, transport="http", protocol_version="2025-06-18")
    other = FakeView("local", None, server_name="Other", state="connecting", protocol_version=None)
    views = [view, other]
    dash = _dashboard(broker, views)
    texts = dash.row_texts("connections")
    assert len(texts) == 2
    assert "<b>analysis</b>" in texts[0] and "Analysis Server" in texts[0]
    assert "http" in texts[0] and "2025-06-18" in texts[0] and "connected" in texts[0]
    assert "<b>local</b>" in texts[1] and "connecting" in texts[1] and "protocol ?" in texts[1]
    assert "2 connections" in dash.header.value
    assert list(dash.force_unlock_buttons()) == [locked["lockId"]]

    button = dash.disconnect_buttons()["analysis"]
    button.click()
    assert view.closed.wait(WAIT)
    assert dash.flush(WAIT)
    assert conn.closed
    assert "closed" in dash.row_texts("connections")[0]
    assert dash.disconnect_buttons()["analysis"].disabled  # nothing left to disconnect
    assert not dash.disconnect_buttons()["local"].disabled
    assert dash.force_unlock_buttons() == {}  # its locks went with it
    assert "Disconnected analysis." in dash.message.value
    views.remove(view)
    dash.refresh()
    assert list(dash.disconnect_buttons()) == ["local"]
    dash.close()


def test_disconnect_never_blocks_the_click(broker: Broker) -> None:
    release = threading.Event()
    view = FakeView("slow", broker.connect("slow"), release=release)
    dash = _dashboard(broker, [view])
    button = dash.disconnect_buttons()["slow"]
    button.click()  # returns at once although close() waits
    button.click()  # a second click while disconnecting does nothing more
    assert not view.closed.is_set()
    dash.refresh()
    assert "disconnecting" in dash.row_texts("connections")[0]
    assert dash.disconnect_buttons()["slow"].disabled
    release.set()
    assert view.closed.wait(WAIT)
    assert dash.flush(WAIT)
    assert "closed" in dash.row_texts("connections")[0]
    dash.close()


def test_a_failing_disconnect_is_reported(broker: Broker) -> None:
    class Broken(FakeView):
        def close(self) -> None:
            raise RuntimeError("the server is gone")

    view = Broken("broken")
    dash = _dashboard(broker, [view])
    dash.disconnect_buttons()["broken"].click()
    assert dash.flush(WAIT)
    assert "Could not disconnect broken" in dash.message.value and "the server is gone" in dash.message.value
    assert not dash.disconnect_buttons()["broken"].disabled  # it can be tried again
    dash.close()


def test_grants_and_revoke(broker: Broker) -> None:
    pre = broker.allow("data/sales", ops=("read",))
    conn = broker.connect("analysis", consenter=CallbackConsenter(_approve_read))
    answer = conn.handle("files/consent", {"requestedPaths": ["data/x.csv"], "operations": ["read"]})
    assert answer["granted"]
    dash = _dashboard(broker, [FakeView("analysis", conn)])
    texts = dash.row_texts("grants")
    assert len(texts) == 2
    assert "all servers" in texts[0] and "data/sales" in texts[0] and "until revoked" in texts[0]
    assert "<b>analysis</b>" in texts[1] and "data/x.csv" in texts[1] and "left (until" in texts[1]
    assert "2 grants" in dash.header.value

    conn.handle("files/read", {"path": "data/x.csv"})
    consented = next(g for g in broker.grants.grants() if g.connection_id == conn.id)
    dash.revoke_buttons()[consented.id].click()
    assert consented.id not in {g.id for g in broker.grants.grants()}
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/x.csv"})
    assert dash.flush(WAIT)
    assert list(dash.revoke_buttons()) == [pre.id]
    assert "Revoked read on <code>data/x.csv</code> for analysis." in dash.message.value

    dash.revoke_buttons()[pre.id].click()
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/sales/2024.csv"})
    assert dash.flush(WAIT)
    assert dash.revoke_buttons() == {}
    assert "No grants" in dash.grants_box.children[0].value
    dash.close()


def test_a_stale_revoke_button_does_nothing_harmful(broker: Broker) -> None:
    grant = broker.allow("data/sales", ops=("read",))
    dash = _dashboard(broker, refresh_interval=60.0)
    button = dash.revoke_buttons()[grant.id]
    broker.grants.revoke(grant.id)  # revoked elsewhere before the dashboard refreshed
    button.click()
    assert "already gone" in dash.message.value
    dash.close()


def test_force_release_frees_the_lock(broker: Broker) -> None:
    broker.allow("data", ops=ALL_OPS)
    holder = broker.connect("holder")
    other = broker.connect("other")
    lock_id = holder.handle("files/read", {"path": "data/x.csv", "keepLocked": True})["lockId"]
    with pytest.raises(FileLocked):
        other.handle("files/write", {"path": "data/x.csv", "content": "new"})
    dash = _dashboard(broker)
    texts = dash.row_texts("locks")
    assert len(texts) == 1 and "data/x.csv" in texts[0] and "held by <b>holder</b>" in texts[0]
    assert "1 lock" in dash.header.value
    dash.force_unlock_buttons()[lock_id].click()
    assert "Lock released." in dash.message.value
    other.handle("files/write", {"path": "data/x.csv", "content": "new"})
    assert dash.flush(WAIT)
    assert dash.force_unlock_buttons() == {}
    stale = dash.locks.make_row(lock_id)  # a button of a lock released meanwhile
    stale.button.click()
    assert "already released" in dash.message.value
    dash.close()


def test_change_feed(broker: Broker, data: Path) -> None:
    broker.allow("data", ops=ALL_OPS)
    sent: list[ChangeEvent] = []
    conn = broker.connect("watcher", notify=sent.append)
    dash = _dashboard(broker, max_changes=3)
    assert "No changes" in dash.changes_html.value
    seen = threading.Event()
    stop = broker.on_change(lambda event, connection: seen.set() if event.path == "data/new.csv" else None)
    try:
        conn.handle("files/watch", {"path": "data", "recursive": True})
        (data / "new.csv").write_text("hello\n")
        assert seen.wait(WAIT)
        assert dash.flush(WAIT)
        assert "data/new.csv" in dash.changes_html.value
        assert "watcher" in dash.changes_html.value
        assert "created" in dash.changes_html.value or "modified" in dash.changes_html.value
    finally:
        stop()
    dash.close()


def test_change_feed_is_capped_and_newest_first(broker: Broker) -> None:
    dash = _dashboard(broker, max_changes=3)
    conn = broker.connect("w")
    for i in range(5):
        dash._on_change(ChangeEvent("w_1", f"data/f{i}.csv", "modified", iso_utc(1000.0 + i)), conn)
    assert dash.flush(WAIT)
    html = dash.changes_html.value
    assert "data/f0.csv" not in html and "data/f1.csv" not in html
    assert html.index("data/f4.csv") < html.index("data/f3.csv") < html.index("data/f2.csv")
    dash.close()


def test_activity_log_and_totals(broker: Broker) -> None:
    broker.allow("data/x.csv", ops=("read",))
    conn = broker.connect("analysis")
    conn.handle("files/read", {"path": "data/x.csv"})  # before the dashboard: shown too
    dash = _dashboard(broker, max_activity=5)
    assert "files/read" in dash.activity_html.value
    with pytest.raises(PermissionDenied):
        conn.handle("files/read", {"path": "data/sales/2024.csv"})
    assert dash.flush(WAIT)
    html = dash.activity_html.value
    assert "allow" in html and "deny" in html
    assert "PERMISSION_DENIED: not_granted" in html
    assert html.index("data/sales/2024.csv") < html.index("data/x.csv")  # newest first
    assert "8 B" in html
    assert "analysis" in dash.totals_html.value and "8 B" in dash.totals_html.value
    assert "8 B read" in dash.header.value
    for _ in range(10):
        conn.handle("files/stat", {"path": "data/x.csv"})
    assert dash.flush(WAIT)
    assert dash.activity_html.value.count("files/stat") == 5  # capped
    dash.close()


def test_server_strings_are_escaped(broker: Broker) -> None:
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("<img src=x onerror=alert(1)>")
    with pytest.raises(Exception):  # noqa: B017 - any refusal
        conn.handle("files/read", {"path": "<script>"})
    view = FakeView("<b>evil</b>", conn, server_name="<i>x</i>", state="<u>s</u>")
    dash = _dashboard(broker, [view])
    everything = dash.activity_html.value + dash.totals_html.value + "".join(dash.row_texts("connections"))
    assert "<img" not in everything and "<script>" not in everything and "<b>evil" not in everything
    assert "&lt;img" in everything
    dash.close()


def test_refreshes_are_coalesced(broker: Broker) -> None:
    dash = _dashboard(broker, refresh_interval=1.0)
    before = dash.renders
    for i in range(50):
        broker.allow(f"data/sales/f{i}" if i % 2 else f"data/x{i}.csv", ops=("read",))  # one grant per path
    assert dash.flush(WAIT)
    assert 1 <= dash.renders - before <= 2
    assert len(dash.revoke_buttons()) == 50
    dash.close()


def test_every_render_runs_through_the_render_with_hook(broker: Broker) -> None:
    """A kernel renders in a context of its choosing: the hook runs each render, the first one too."""
    calls: list[tuple[Dashboard, threading.Thread]] = []

    def render_with(dashboard: Dashboard, render: Callable[[], None]) -> None:
        calls.append((dashboard, threading.current_thread()))
        render()

    dash = Dashboard(broker, render_with=render_with)
    assert [d for d, _ in calls] == [dash] and dash.renders == 1
    broker.allow("data/sales", ops=("read",))
    assert dash.flush(WAIT)
    assert len(calls) == dash.renders >= 2 and all(d is dash for d, _ in calls)
    assert calls[-1][1].name == "fsbroker-views"  # refreshed on the views' thread
    assert "data/sales" in dash.row_texts("grants")[0]
    dash.close()


def test_consent_area(broker: Broker) -> None:
    dash = _dashboard(broker)
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future)
    dash.add_prompt(prompt)
    dash.add_prompt(prompt)  # once only
    assert dash.consent_area.children == (prompt,)
    assert dash.flush(WAIT)
    assert "1 consent request waiting" in dash.header.value
    prompt.approve_button.click()
    assert dash.flush(WAIT)
    assert "waiting" not in dash.header.value
    dash.remove_prompt(prompt)
    assert dash.consent_area.children == ()
    dash.close()
    prompt.close()


def test_concurrent_events_and_clicks_leave_a_consistent_view(broker: Broker) -> None:
    dash = _dashboard(broker, refresh_interval=0.01)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def churn(i: int) -> None:
        try:
            barrier.wait(WAIT)
            for j in range(20):
                grant = broker.allow(f"data/f{i}-{j}", ops=("read",))
                if j % 2:
                    broker.grants.revoke(grant.id)
                if j % 5 == 0:
                    for button in list(dash.revoke_buttons().values())[:1]:
                        button.click()
                    dash.refresh()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    join_all(threads)
    assert errors == []
    assert dash.flush(WAIT)
    assert set(dash.revoke_buttons()) == {g.id for g in broker.grants.grants()}
    assert len(dash.grants_box.children) == max(1, len(broker.grants.grants()))
    dash.close()


def test_close_unsubscribes_and_leaves_no_thread(broker: Broker) -> None:
    before = set(threading.enumerate())
    release = threading.Event()
    view = FakeView("slow", broker.connect("slow"), release=release)
    dash = _dashboard(broker, [view], refresh_interval=30.0)
    broker.allow("data/sales", ops=("read",))  # a refresh, and the next one 30 s away
    dash.disconnect_buttons()["slow"].click()  # a Disconnect still running
    extra = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in extra] == ["fsbroker-views"]  # one thread refreshes and disconnects
    release.set()
    dash.close()
    join_all(extra)
    assert set(threading.enumerate()) == before
    renders = dash.renders
    broker.allow("data/x.csv", ops=("read",))
    broker.connect("late")
    assert set(threading.enumerate()) == before
    assert dash.renders == renders
    dash.close()  # idempotent
    dash.refresh()  # harmless after close
    assert dash.closed


def test_a_dashboard_of_a_closed_broker(tmp_path: Path, data: Path) -> None:
    from .conftest import make_broker

    broker = make_broker(tmp_path)
    broker.add_root(data, name="data")
    dash = _dashboard(broker)
    broker.close()
    dash.refresh()
    assert "broker closed" in dash.header.value
    dash.close()
    late = _dashboard(broker)
    assert "broker closed" in late.header.value
    late.close()
