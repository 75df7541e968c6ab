"""Checks that apply to every test: nothing a test starts may outlive it; and the two lanes.

The lanes: a test in one of :data:`SYSTEM_FOLDERS` is marked ``system`` here, by its folder, so
that a new file there cannot forget it. Plain ``pytest`` deselects them (``addopts`` in
``pyproject.toml``); ``pytest -m system`` runs them alone, and ``scripts/test.sh`` runs both.

A test that leaves a thread running, a child process alive or a file
descriptor open fails, with a list of what it left. The state is recorded when
the test's body starts (its fixtures are set up by then) and compared once its
fixtures were torn down:

* a test whose fixtures are all function-scoped is judged at its own teardown;
* a test that uses a module- (or class-, package-, session-) scoped fixture of
  this project may leave what that fixture makes lazily (a pool's worker
  thread, a pooled connection): its leftovers are judged when the broadest such
  fixture has ended, and the failure, reported at that teardown, names the test.
  Fixtures marked with :func:`tests.support.leaks.ends_with_each_user` do not
  defer the judgement.

Leftovers get :data:`LEAK_GRACE` seconds to go away on their own (a thread
finishing, a process exiting); the wait ends as soon as they have.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_core.utils import ensure_event_loop

from tests.support import leaks

# No test touches the system keyring of the machine it runs on: the default sign-in store of this
# process and of every process the tests start finds none (keyring reads this variable). The
# keyring tests give their backends explicitly, and the Secret Service test its own D-Bus session.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

#: Seconds leftovers get to go away on their own: a safety net, not a speed requirement (a thread or
#: a process that is ending may wait seconds for a CPU on a loaded machine); a real leak costs this
#: wait once, before it is reported.
LEAK_GRACE = 30.0

#: The folders of ``tests/`` whose tests are the system lane: they need a browser, Node and npm,
#: Landlock, faults and load, executed notebooks or fuzzing, and take minutes.
SYSTEM_FOLDERS = frozenset(
    {"browser", "conformance", "interop", "reliability", "notebooks", "security", "sandbox"}
)
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before the -m of addopts deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if path.is_relative_to(TESTS) and path.relative_to(TESTS).parts[0] in SYSTEM_FOLDERS:
            item.add_marker(pytest.mark.system)


_BEFORE = pytest.StashKey[leaks.Snapshot]()
_PASSED = pytest.StashKey[bool]()


@dataclass(frozen=True)
class _Pending:
    """Leftovers of a passed test, judged when *horizon* (a node whose fixtures own them) ends."""

    test: str
    horizon: pytest.Item | pytest.Collector
    leaks: leaks.Leaks


_pending: list[_Pending] = []


def _scope_node(item: pytest.Item, scope: str) -> pytest.Item | pytest.Collector:
    node: pytest.Item | pytest.Collector | None = None
    if scope == "class":
        node = item.getparent(pytest.Class)
    if scope in ("class", "module") and node is None:
        node = item.getparent(pytest.Module)
    if scope == "package":
        node = item.getparent(pytest.Package)
    return node if node is not None else item.session


def _horizon(item: pytest.Item) -> pytest.Item | pytest.Collector:
    """The broadest node whose fixtures (this project's, in use by *item*) may own its leftovers."""
    # pytest has no public view of the fixtures a test activated (getfixturevalue included):
    # read its request's record, and assume the most patient horizon should that move.
    request = getattr(item, "_request", None)
    fixturedefs = getattr(request, "_fixture_defs", None)
    if not isinstance(fixturedefs, dict):
        return item.session
    chain = item.listchain()
    horizon: pytest.Item | pytest.Collector = item
    for fixturedef in fixturedefs.values():
        if fixturedef.scope == "function" or not fixturedef.baseid or leaks.judged_at_once(fixturedef.func):
            continue  # pytest's and plugins' own fixtures (no baseid) own nothing of ours
        node = _scope_node(item, fixturedef.scope)
        if node in chain and chain.index(node) < chain.index(horizon):
            horizon = node
    return horizon


def _waited(pending: _Pending, item: pytest.Item) -> str:
    if pending.horizon is item:
        return f"after {LEAK_GRACE:g} s"
    scope = pending.horizon.nodeid or "the session"
    return f"{LEAK_GRACE:g} s after the fixtures of {scope} had ended"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    item.stash[_BEFORE] = leaks.snapshot()
    item.stash[_PASSED] = False
    result = yield
    item.stash[_PASSED] = True
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    horizon = _horizon(item)  # before the teardown forgets which fixtures were active
    result = yield
    # A failed test has failed already: what it left behind is a consequence, not news.
    if item.stash.get(_PASSED, False):
        new = leaks.appeared_since(item.stash[_BEFORE])
        if new:
            _pending.append(_Pending(item.nodeid, horizon, new))
    ended = set(item.listchain()) - set(nextitem.listchain() if nextitem is not None else ())
    due = [p for p in _pending if p.horizon in ended]
    reports = []
    for pending in due:
        _pending.remove(pending)
        left = leaks.wait_gone(pending.leaks, LEAK_GRACE)
        if left:
            reports.append(f"{pending.test} left these behind ({_waited(pending, item)}):\n{left.describe()}")
    if reports:
        pytest.fail("\n".join(reports), pytrace=False)
    return result


@pytest.fixture(scope="session")
@leaks.ends_with_each_user  # the loop is made at set-up, and closed when the session ends
def _jupyter_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The event loop that jupyter_client's blocking API runs on in this thread (the kernel tests').

    jupyter_core makes one on first use and keeps it for the thread, open; made
    here, it exists before the first kernel test starts, and the session closes it.
    """
    loop = ensure_event_loop()
    yield loop
    loop.close()
