"""Fixtures for the kernel tests: real kernels in isolated homes, the example server over stdio and HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jupyter_core.utils import ensure_event_loop

from jupyter_fsbroker.core.lockfiles import lock_path
from tests.support.leaks import ends_with_each_user
from tests.support.notebook_kernel import load, start_notebook_kernel
from tests.support.servers import MODULE as SERVER_MODULE
from tests.support.servers import analysis_server_http

try:
    from .harness import Kernel, Widget
except ImportError:  # run from this folder
    from harness import Kernel, Widget  # type: ignore[no-redef]

#: The example server over stdio, as a Python string for cells.
STDIO_COMMAND = repr([sys.executable, "-m", SERVER_MODULE])

#: A call of the example server that asks for consent on a file no grant covers.
PROFILE = 'analysis.call_tool("profile_csv", {"path": "data/sales.csv"})'
#: The same call returning a failure instead of raising ToolError.
PROFILE_RAW = 'analysis.call_tool("profile_csv", {"path": "data/sales.csv"}, raise_on_error=False)'


def held_lock_files(kernel: Kernel) -> list[Path]:
    """The lock files of the locks the kernel's broker holds now.

    They are in the user account's lock folder, which other processes (other tests) share:
    a test looks at its own files, never at the whole folder.
    """
    folder, keys = kernel.value(
        "(lambda b: (b.core.locks.lock_dir, sorted({l.key for l in b.locks()})))"
        "(__import__('jupyter_fsbroker').get_broker())"
    )
    return [Path(lock_path(folder, key)) for key in keys]


class _KernelOwners:
    """Who ends each kernel: the test or fixture that was running when it was started."""

    def __init__(self) -> None:
        self._stack: list[list[Kernel]] = [[]]  # the bottom one: the session's

    def adopt(self, kernel: Kernel) -> None:
        self._stack[-1].append(kernel)

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Kernels started inside the ``with`` block are shut down when it ends."""
        self._stack.append([])
        try:
            yield
        finally:
            self._shutdown(self._stack.pop())

    def close(self) -> None:
        while self._stack:
            self._shutdown(self._stack.pop())

    @staticmethod
    def _shutdown(kernels: list[Kernel]) -> None:
        for kernel in kernels:
            with contextlib.suppress(Exception):  # already shut down by its test
                kernel.shutdown(now=True)


@pytest.fixture(scope="session")
@ends_with_each_user  # it ends every kernel with the test or fixture that started it
def _kernel_owners(_jupyter_loop: asyncio.AbstractEventLoop) -> Iterator[_KernelOwners]:
    owners = _KernelOwners()
    yield owners
    owners.close()


@pytest.fixture(scope="module", autouse=True)
@ends_with_each_user  # kernels a module's fixtures start end with the module
def _module_kernels(_kernel_owners: _KernelOwners) -> Iterator[None]:
    """Kernels a module's fixtures start end with the module."""
    with _kernel_owners.scope():
        yield


@pytest.fixture(autouse=True)
def _test_kernels(_kernel_owners: _KernelOwners) -> Iterator[None]:
    """Kernels a test (or its function-scoped fixtures) starts end with the test."""
    # jupyter_client's blocking calls run on the loop jupyter_core keeps for the current context;
    # where a test elsewhere in this process ran in another context, the session's loop is not
    # that one, and a new loop made in the middle of the next test would count as its leftover.
    ensure_event_loop()
    with _kernel_owners.scope():
        yield


@pytest.fixture(scope="session")
@ends_with_each_user  # every kernel ends with the test or fixture that started it
def start_kernel(
    tmp_path_factory: pytest.TempPathFactory, _kernel_owners: _KernelOwners
) -> Callable[..., Kernel]:
    """A factory of kernels, each with its own home and notebook folder.

    A kernel is shut down when the test or fixture that started it ends.
    """

    def start(*, ipython_config: str | None = None) -> Kernel:
        kernel = start_notebook_kernel(tmp_path_factory.mktemp("kernel"), ipython_config=ipython_config)
        _kernel_owners.adopt(kernel)
        return kernel

    return start


def connect_stdio(kernel: Kernel, name: str = "analysis", *, pythonpath: bool = False) -> None:
    """The example server over stdio as *name*; with *pythonpath*, given the kernel's ``PYTHONPATH``.

    Stdio servers get a bare environment: without it, the server imports this checkout only
    through the link in the notebook folder (:func:`make_workdir`).
    """
    env = ", env={'PYTHONPATH': __import__('os').environ['PYTHONPATH']}" if pythonpath else ""
    kernel.run(f"{name} = broker.connect({name!r}, command={STDIO_COMMAND}{env})")


def analysis_kernel(start_kernel: Callable[..., Kernel], *, pythonpath: bool = False) -> Kernel:
    """A new kernel with the extension loaded, ``./data`` shared and the example server connected."""
    kernel = start_kernel()
    load(kernel)
    connect_stdio(kernel, pythonpath=pythonpath)
    return kernel


@pytest.fixture
def fresh_grants(kernel: Kernel) -> Iterator[None]:
    """No grant of ``analysis`` before and after the test, so that its calls ask; a long consent timeout.

    *kernel* is the module's own fixture: a kernel with ``analysis`` connected.
    """
    kernel.run("analysis.revoke()\n%config FSBroker.consent_timeout = 120")
    yield
    kernel.run("analysis.revoke()")


def shown_prompt(kernel: Kernel, timeout: float = 30.0) -> Widget:
    """The next consent prompt once it is displayed in a call's panel (clickable for a user)."""

    def displayed() -> Widget | None:
        for panel in kernel.find_widgets("fsbroker-call"):
            for widget in kernel.descendants(panel):
                if "fsbroker-consent" in widget.classes and widget.comm_id not in kernel.seen:
                    return widget
        return None

    prompt: Widget = kernel.wait_for(displayed, timeout, "a consent prompt displayed in the calling cell")
    kernel.seen.add(prompt.comm_id)
    return prompt


@pytest.fixture(scope="session")
@ends_with_each_user  # a subprocess started at set-up; nothing in this process after that
def http_url() -> Iterator[str]:
    """The example server under uvicorn on 127.0.0.1; its ``/mcp`` URL once it listens."""
    with analysis_server_http() as server:
        yield server.url


#: A cell that asks for consent as a server would, with no call in flight ("between cells"); for an
#: operation the tests never pre-approve (what is granted already is approved without asking): a
#: write where nothing is, which creates, so it starts ticked (a delete or a replacing write does not).
ASK_BETWEEN_CELLS = """
import threading
answers = []
def _ask():
    answers.append(analysis.connection.handle(
        "files/consent",
        {"message": "between cells", "requestedPaths": ["data/raw"], "operations": ["write"]},
    ))
asker = threading.Thread(target=_ask)
asker.start()
"""
