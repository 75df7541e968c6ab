"""Loading, unloading, reloading, settings and shutdown of the extension in a real kernel."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from .conftest import STDIO_COMMAND, connect_stdio, held_lock_files, load
from .harness import Kernel

THREADS = "{(t.ident, t.name) for t in __import__('threading').enumerate()}"

#: Runs in the kernel: ``_children()`` lists the processes whose parent is the kernel.
CHILDREN_HELPER = """
import os as _os

def _children():
    found = []
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == _os.getpid():
                    found.append(int(pid))
        except (OSError, IndexError, ValueError):
            pass
    return sorted(found)
"""


def test_load_is_quiet_and_unload_leaves_nothing_behind(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    kernel.run(
        CHILDREN_HELPER + f"\nbefore = {THREADS}\nimport os\nfiles_before = sorted(os.listdir('data'))"
    )
    loaded = kernel.run("%load_ext jupyter_fsbroker")
    assert (loaded.stdout, loaded.stderr, loaded.displays, loaded.result) == ("", "", [], None)
    assert "fsbroker-loop" in kernel.value("[name for _, name in " + THREADS + "]")

    # Use everything that starts threads or holds resources: a stdio server, a tool call,
    # a watch (watchdog observer), a kept lock (a lock file), a consent prompt (its countdown).
    kernel.run(
        "import jupyter_fsbroker as fsb\nbroker = fsb.get_broker()\nbroker.add_root('./data', name='data')"
    )
    kernel.run("broker.allow('data', ops=('read', 'watch'))")
    connect_stdio(kernel)
    kernel.run(
        "r = analysis.call_tool('watch_changes', {'path': 'data', 'seconds': 0.2}); assert not r.is_error, r"
    )
    kernel.run("analysis.connection.handle('files/read', {'path': 'data/sales.csv', 'keepLocked': True})")
    (lock_file,) = held_lock_files(kernel)
    assert lock_file.exists()
    assert len(kernel.value("_children()")) == 1

    kernel.run("%unload_ext jupyter_fsbroker")
    new_threads = kernel.value(f"sorted({THREADS} - before)")
    assert new_threads == [], f"threads left behind: {new_threads}"
    assert kernel.value("_children()") == [], "the server process is still running"
    assert not lock_file.exists(), "lock file left behind"
    assert kernel.value("sorted(os.listdir('data')) == files_before")
    assert kernel.value("analysis.closed") and kernel.value("broker.closed")
    assert "UsageError" in kernel.run_fail("%fsbroker status")["ename"], "%fsbroker is still registered"
    assert "Cell magic `%%fsbroker` not found" in kernel.run_fail("%%fsbroker\nstatus")["evalue"]

    # %reload_ext and get_broker() after an unload both start a fresh broker.
    kernel.run("%load_ext jupyter_fsbroker\n%reload_ext jupyter_fsbroker")
    assert kernel.value("fsb.get_broker() is not broker and not fsb.get_broker().closed")
    kernel.run("b2 = fsb.get_broker()\n%reload_ext jupyter_fsbroker")
    assert kernel.value("b2.closed and fsb.get_broker() is not b2")
    kernel.run("%fsbroker root data=./data\n%fsbroker status")
    kernel.run("%unload_ext jupyter_fsbroker")
    assert kernel.value(f"sorted({THREADS} - before)") == []


def test_settings_from_ipython_config_and_config_magic(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel(
        ipython_config=(
            "c.FSBroker.consent_timeout = 60\n"
            "c.FSBroker.roots = ['data=./data']\n"
            "c.FSBroker.read_only_roots = ['raw=./data/raw']\n"
            "c.FSBroker.allow = ['raw:read,watch']\n"
            "c.FSBroker.limits = {'max_list_entries': 500}\n"
            "c.FSBroker.advertise_roots = False\n"
        )
    )
    kernel.run("%load_ext jupyter_fsbroker\nimport jupyter_fsbroker as fsb\nbroker = fsb.get_broker()")
    assert kernel.value("broker.core.config.limits.consent_timeout") == 60
    assert kernel.value("broker.core.config.limits.max_list_entries") == 500
    assert kernel.value("broker.core.config.advertise_roots") is False
    assert kernel.value("sorted((r.name, r.read_only) for r in broker.roots)") == [
        ("data", False),
        ("raw", True),
    ]
    assert kernel.value("[(g.path, g.operations) for g in broker.grants()]") == [("raw", ("read", "watch"))]

    kernel.run("%config FSBroker.consent_timeout = 3\n%config FSBroker.permanent_delete = True")
    assert kernel.value("broker.core.config.limits.consent_timeout") == 3
    assert kernel.value("broker.core.config.permanent_delete") is True
    error = kernel.wait(kernel.submit("%config FSBroker.consent_timeout = -1"))
    assert "positive" in error.stdout + error.stderr
    assert kernel.value("broker.core.config.limits.consent_timeout") == 3
    help_text = kernel.run("%config FSBroker").stdout
    assert "consent_timeout" in help_text and "stdin_fallback" in help_text

    # Values set with %config survive %reload_ext.
    kernel.run("%reload_ext jupyter_fsbroker\nbroker = fsb.get_broker()")
    assert kernel.value("broker.core.config.limits.consent_timeout") == 3


def test_magic_documents_itself_and_reports_usage_errors(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    kernel.run("%load_ext jupyter_fsbroker")
    page = kernel.run("%fsbroker?").reply
    assert page is not None
    text = "".join(p["data"]["text/plain"] for p in page.get("payload", []) if p.get("source") == "page")
    for usage in (
        "root [NAME=]DIR [--read-only]",
        "unroot NAME",
        "allow PATH [OPS]",
        "connect NAME --url URL [--header 'K: V']",
        '--command "CMD ARGS"',
        "call NAME TOOL [JSON]",
        "disconnect NAME",
        "revoke NAME [PATH]",
        "status",
    ):
        assert usage in text, usage
    # Plain text, as IPython's pager shows it: no reStructuredText markup.
    assert "::" not in text and "``" not in text, text
    cell = kernel.run_fail("%%fsbroker\nroot data=./data")
    assert cell["ename"] == "UsageError" and "%fsbroker is a line magic" in cell["evalue"]
    assert "%fsbroker connect" in cell["evalue"] and "%fsbroker status" in cell["evalue"]
    for line in (
        "%fsbroker",
        "%fsbroker frobnicate",
        "%fsbroker root ./missing",
        "%fsbroker unroot nope",
        "%fsbroker allow /etc read",
        "%fsbroker allow data bogus",
        "%fsbroker connect x",
        "%fsbroker connect x --url ftp://example.org",
        "%fsbroker call nobody tool {}",
        "%fsbroker revoke nobody",
        "%fsbroker root data=./data\n%fsbroker call nobody tool [1, 2]",
    ):
        error = kernel.run_fail(line)
        assert error["ename"] == "UsageError", (line, error)
    shared = kernel.run("%fsbroker root ./data/raw --read-only\n%fsbroker root ./data/raw --read-only")
    assert shared.stdout.count("as raw (read-only)") == 2  # re-running a cell is harmless
    assert "UsageError" in kernel.run_fail("%fsbroker root ./data/raw")["ename"]  # not read-only: a clash
    assert "No longer sharing raw" in kernel.run("%fsbroker unroot raw").stdout


def test_kernel_shutdown_closes_connections_and_releases_locks(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    load(kernel)
    kernel.run("broker.allow('data', ops=('read',))")
    kernel.run(f"analysis = broker.connect('analysis', command={STDIO_COMMAND})")
    kernel.run("analysis.connection.handle('files/read', {'path': 'data/sales.csv', 'keepLocked': True})")
    (lock_file,) = held_lock_files(kernel)
    assert lock_file.exists()
    kernel.shutdown(now=False)  # a graceful shutdown runs the atexit hook
    assert not lock_file.exists(), "the atexit hook did not release the lock"


def test_importing_the_package_loads_no_jupyter_and_no_mcp() -> None:
    code = (
        "import sys, jupyter_fsbroker as f\n"
        "assert callable(f.load_ipython_extension) and callable(f.unload_ipython_extension)\n"
        "assert callable(f.get_broker)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('IPython', 'ipykernel', 'ipywidgets', 'mcp', 'traitlets', 'jupyter_fsbroker.kernel'))\n"
        "bad += [m for m in sys.modules if m.startswith('jupyter_fsbroker.kernel')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


#: Runs in the kernel: the warm-up's modules not yet imported whole when the cell started.
UNFINISHED_WARM_UP = """
import sys as _sys
from jupyter_fsbroker.kernel.servers import _WARM_MODULES

def _unfinished():
    found = []
    for name in _WARM_MODULES:
        module = _sys.modules.get(name)
        if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
            found.append(name)
    return found

unfinished = _unfinished()
"""


def test_the_cell_after_load_ext_never_runs_beside_the_warm_up(start_kernel: Callable[..., Kernel]) -> None:
    # The warm-up imports mcp and jsonschema on a thread once the loading cell is over. A cell
    # importing them meanwhile met that import in Python's deadlock detection and got a module
    # half made (ImportError "partially initialized module 'mcp.client._input_required'", or
    # _DeadlockError), in 4 of 6 fresh kernels: the next cell now starts once the warm-up ended.
    kernel = start_kernel()
    kernel.run("%load_ext jupyter_fsbroker")
    imported = kernel.run(
        UNFINISHED_WARM_UP
        + "from mcp.client.session import ClientSession\nfrom mcp import types\nprint('imported')"
    )
    assert imported.stdout.strip() == "imported"
    assert kernel.value("unfinished") == []
