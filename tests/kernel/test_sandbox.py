"""A sandboxed local server from the notebook: ``connect(sandbox=...)``, magics, the setting, no Landlock."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox.launch import SandboxUnavailable, landlock_abi
from tests.support import without_landlock
from tests.support.ci import cannot_run

from .conftest import load
from .harness import Kernel

# Landlock, and confined servers started for real: the system lane, like tests/sandbox.
pytestmark = pytest.mark.system

SNOOPING_ARGV = [
    sys.executable,
    str(Path(__file__).resolve().parents[1] / "sandbox" / "servers" / "snooping_server.py"),
]
SNOOPING = repr(SNOOPING_ARGV)
# The server imports this checkout, as the kernel does.
ENV = "{'PYTHONPATH': os.environ['PYTHONPATH']}"


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    try:
        landlock_abi()
    except SandboxUnavailable as exc:
        cannot_run(f"Landlock is unavailable here: {exc}")
    kernel = start_kernel()
    load(kernel)
    kernel.run("import os\nopen('data/notes.txt', 'w').write('hello\\n')")
    yield kernel


def call(kernel: Kernel, conn: str, tool: str, path: str) -> str:
    return str(kernel.value(f"{conn}.call_tool({tool!r}, {{'path': {path!r}}}).text"))


def test_the_setting_confines_local_servers_and_files_still_serves_them(kernel: Kernel) -> None:
    kernel.run("%config FSBroker.sandbox = 'files'")
    try:
        kernel.run(f"boxed = broker.connect('boxed', command={SNOOPING}, env={ENV})")
        assert str(kernel.value("boxed.sandbox.describe()")).startswith("sandboxed (files; Landlock ABI ")
        card = kernel.wait_widget("fsbroker-connection")  # the line under the connecting cell says so
        assert "sandboxed (files; Landlock ABI " in kernel.text_of(card)
        status = str(kernel.value("broker.status()"))
        assert [line for line in status.splitlines() if "boxed" in line and "sandboxed (files;" in line]
        kernel.run("%fsbroker status")
        dashboard = kernel.wait_widget("fsbroker-dashboard")
        assert "sandboxed (files; Landlock ABI " in kernel.text_of(dashboard)
        notes = str(kernel.value("os.path.abspath('data/notes.txt')"))
        assert call(kernel, "boxed", "open_directly", notes) == "EACCES"
        kernel.run("broker.allow('data/notes.txt')")
        assert call(kernel, "boxed", "read_brokered", "data/notes.txt") == "hello\n"
        kernel.run(f"free = broker.connect('free', command={SNOOPING}, env={ENV}, sandbox=False)")
        assert kernel.value("free.sandbox.describe()") == "not sandboxed"
        assert call(kernel, "free", "open_directly", notes) == "ok"
        # The snapshot other views render (the JupyterLab panel) says the same.
        confined = kernel.value("{c['name']: c['confined'] for c in broker.snapshot()['connections']}")
        assert confined == {"boxed": True, "free": False}
    finally:
        kernel.run("%config FSBroker.sandbox = 'off'")


def test_magics_connect_with_the_sandbox(kernel: Kernel) -> None:
    command = " ".join(SNOOPING_ARGV)
    out = kernel.run(f'%fsbroker connect roots --command "{command}" --sandbox-roots')
    assert out.stdout.startswith("roots: sandboxed (roots; Landlock ABI ")
    notes = str(kernel.value("os.path.abspath('data/notes.txt')"))
    assert call(kernel, "broker.connection('roots')", "open_directly", notes) == "ok"
    assert call(kernel, "broker.connection('roots')", "open_directly", "/etc/shadow") == "EACCES"
    refused = kernel.run_fail(f'%fsbroker connect bad --command "{command}" --sandbox --no-sandbox')
    assert "contradicts" in str(refused)


def test_without_landlock_asked_is_an_error_and_the_setting_a_warning(kernel: Kernel) -> None:
    kernel.run(without_landlock.kernel_code("no Landlock in this kernel (test)"))
    try:
        failed = kernel.run_fail(f"broker.connect('asked', command={SNOOPING}, env={ENV}, sandbox=True)")
        assert failed["ename"] == "SandboxUnavailable"
        assert "the sandbox was asked for, but no Landlock in this kernel (test)" in failed["evalue"]
        kernel.run("%config FSBroker.sandbox = 'roots'")
        out = kernel.run(f"default = broker.connect('default', command={SNOOPING}, env={ENV})")
        warnings = [line for line in out.stderr.splitlines() if "without the default sandbox" in line]
        assert len(warnings) == 1, out.stderr
        described = str(kernel.value("default.sandbox.describe()"))
        assert described.startswith("not sandboxed (sandbox unavailable: no Landlock in this kernel (test)")
    finally:
        kernel.run(f"{without_landlock.KERNEL_RESTORE}\n%config FSBroker.sandbox = 'off'")
