"""The broker side as the desk sees it: waiting for the name, closed before it, routes, limits read live."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.errors import ClosedError
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol.desk.core_slot import CoreSlot
from tests.support.brokers import make_broker

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


def slot_of(broker: Broker, requests: list[str] | None = None) -> CoreSlot:
    return CoreSlot(
        broker,
        consenter=None,
        notify=lambda event: None,
        on_request=None if requests is None else (lambda: requests.append("files/*")),
    )


async def test_a_request_before_the_name_waits_for_it_then_the_connection_answers(broker: Broker) -> None:
    broker.allow("data", ops=("read",))
    requests: list[str] = []
    slot = slot_of(broker, requests)
    assert not slot.ready and not slot.gone and not slot.settled
    assert slot.route("files/stat") is None  # not named: the task's way, which waits
    answers: list[dict[str, object]] = []

    async def ask() -> None:
        answers.append(await slot.handle("files/stat", {"path": "data/hello.txt"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert answers == []  # waiting for the name
        connection = slot.open("named-later")
    assert slot.ready and slot.connection is connection and connection.server == "named-later"
    assert answers[0]["type"] == "file"
    assert requests == ["files/*", "files/*"]  # the roots offer learns of every request


async def test_closed_before_it_was_named_a_waiting_request_meets_a_closed_error(broker: Broker) -> None:
    slot = slot_of(broker)
    failures: list[BaseException] = []

    async def ask() -> None:
        try:
            await slot.handle("files/read", {"path": "data/hello.txt"})
        except ClosedError as exc:
            failures.append(exc)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            slot.close("the user closed it")
    assert len(failures) == 1
    assert slot.gone and slot.settled and not slot.ready
    assert broker.connections() == ()


async def test_a_named_slot_routes_off_the_loop_but_not_a_consent_nor_after_the_pool_closed(
    tmp_path: Path,
) -> None:
    broker = make_broker(tmp_path)
    slot = slot_of(broker)
    connection = slot.open("x")
    route = slot.route("files/read")
    assert route is not None and route[1] == connection.handle
    assert slot.route("files/consent") is None  # it waits for the user on the loop
    broker.close()
    assert slot.route("files/read") is None  # the task's way answers connection_closed
    assert not slot.gone  # named once: the core answers for its closed connection


async def test_the_limits_are_read_for_every_request(broker: Broker) -> None:
    slot = slot_of(broker)
    broker.configure(limits=Limits(memory_budget=3 * 1024 * 1024, default_read_bytes=4096))
    assert slot.memory_budget() == 3 * 1024 * 1024
    assert slot.read_sizes()[0] == 4096
    assert slot.buffers() is None  # no connection yet
    slot.open("y")
    assert slot.buffers() is slot.connection.buffers  # type: ignore[union-attr]
