"""The one in-flight table: states, slots, cancellation in every state, stop, and threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from jupyter_fsbroker.protocol.desk.route import Route
from jupyter_fsbroker.protocol.desk.table import InFlight, Ticket, TicketState

READ = "files/read"


def taken(table: InFlight, request_id: int, *, route: Route = Route.WORKER) -> Ticket:
    ticket = table.add(request_id, READ, route)
    assert ticket is not None
    return ticket


def test_an_entry_goes_queued_running_writing_done_and_holds_a_slot_only_while_running() -> None:
    freed: list[int] = []
    table = InFlight(2, on_slot_free=lambda: freed.append(1))
    ticket = taken(table, 7)
    assert ticket.state is TicketState.QUEUED and len(table) == 1 and table.free_slots == 2
    assert table.run(ticket)
    assert ticket.state is TicketState.RUNNING and table.running == 1 and table.free_slots == 1
    assert not table.run(ticket)  # once
    assert table.answering == 1
    assert table.writing(ticket)
    assert ticket.state is TicketState.WRITING and table.running == 0 and freed == [1]
    assert len(table) == 1 and table.answering == 0  # in the table until written
    assert table.finish(ticket)
    assert ticket.state is TicketState.DONE and len(table) == 0
    assert not table.finish(ticket)  # idempotent: its reservation is given back once


def test_no_more_than_max_in_flight_run_at_once() -> None:
    table = InFlight(2)
    tickets = [taken(table, n) for n in range(3)]
    assert [table.run(e) for e in tickets] == [True, True, False]
    assert table.free_slots == 0
    table.writing(tickets[0])
    assert table.run(tickets[2])
    with pytest.raises(ValueError):
        InFlight(0)


def test_a_request_alone_runs_at_once_without_waiting_for_a_slot() -> None:
    table = InFlight(1)
    ticket = taken(table, 1, route=Route.HERE)
    table.run_now(ticket)
    assert ticket.state is TicketState.RUNNING and table.running == 1
    assert table.writing(ticket) and table.finish(ticket)
    assert table.running == 0 and len(table) == 0


def test_a_cancel_stops_a_queued_entry_and_drops_a_running_ones_answer() -> None:
    table = InFlight(4)
    queued, running = taken(table, 1), taken(table, 2)
    handled: list[str] = []
    queued.cancel_handle = lambda: handled.append("queued")
    running.cancel_handle = lambda: handled.append("running")
    assert table.run(running)
    assert table.cancel(1) is queued and table.cancel(2) is running
    assert handled == ["queued", "running"]  # a future or a task not started never runs
    assert not table.run(queued)  # never runs
    assert not table.writing(running)  # its answer is never written
    assert table.running == 0  # and its slot is free
    assert table.cancel(1) is None  # once
    assert table.finish(queued) and table.finish(running) and len(table) == 0


def test_once_its_answer_is_being_written_a_request_is_no_longer_cancellable() -> None:
    table = InFlight(4)
    ticket = taken(table, 3)
    table.run(ticket)
    assert table.writing(ticket)
    assert table.cancel(3) is None  # the cancel goes on to the session, as an unknown id
    assert not ticket.dropped


def test_an_id_taken_again_is_the_one_a_cancel_finds_and_both_finish() -> None:
    table = InFlight(4)
    first, second = taken(table, 5), taken(table, 5)
    assert table.cancel(5) is second and not first.dropped
    assert table.finish(first) and table.finish(second) and len(table) == 0


def test_stop_drops_everything_not_being_written_and_takes_no_more() -> None:
    table = InFlight(4)
    queued, running, writing = taken(table, 1), taken(table, 2), taken(table, 3)
    cancelled: list[int] = []
    for n, ticket in enumerate((queued, running, writing), start=1):
        ticket.cancel_handle = lambda n=n: cancelled.append(n)
    table.run(running)
    table.run(writing)
    table.writing(writing)
    left = table.stop()
    assert set(left) == {queued, running, writing}  # the owner finishes every one
    assert queued.dropped and running.dropped and not writing.dropped
    assert sorted(cancelled) == [1, 2]
    assert table.add(4, READ, Route.WORKER) is None and table.stopped
    assert table.cancel(2) is None


def test_threads_running_and_cancelling_at_once_leave_the_table_consistent() -> None:
    # Workers contend for two slots while the loop cancels every third request: each request is
    # written or dropped, never both; each ends once; every slot comes back.
    table = InFlight(2)
    written: list[object] = []
    lock = threading.Lock()

    def answer(ticket: Ticket) -> None:
        while not table.run(ticket) and not ticket.dropped:
            pass  # no slot free yet
        if ticket.state is TicketState.RUNNING and table.writing(ticket):
            with lock:
                written.append(ticket.request_id)
        table.finish(ticket)

    tickets = [taken(table, n) for n in range(2000)]
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(answer, e) for e in tickets]
        cancelled = {n for n in range(0, 2000, 3) if table.cancel(n) is not None}
        for future in futures:
            future.result(timeout=30)
    assert len(table) == 0 and table.running == 0 and table.free_slots == 2
    assert len(written) == len(set(written))
    assert not set(written) & cancelled
    assert set(written) | cancelled == set(range(2000))
