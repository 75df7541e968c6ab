"""Without a kernel: a plain IPython shell (text instead of widgets) and a plain Python script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.env import server_env
from tests.support.notebook_kernel import make_workdir

from .conftest import SERVER_MODULE

IPYTHON_SCRIPT = f"""
import sys, threading
from IPython.core.interactiveshell import InteractiveShell

ip = InteractiveShell.instance()
before = {{t.ident for t in threading.enumerate()}}
ip.run_line_magic("load_ext", "jupyter_fsbroker")
ip.run_line_magic("fsbroker", "root data=./data")
ip.run_line_magic("fsbroker", "allow data read")
ip.run_line_magic("fsbroker", "connect analysis --command '{sys.executable} -m {SERVER_MODULE}'")
data = ip.run_line_magic("fsbroker", 'call analysis profile_csv {{"path": "data/sales.csv"}}')
print("rows", data["rows"])
ip.run_line_magic("fsbroker", "status")
import jupyter_fsbroker as fsb
broker = fsb.get_broker()
print("consenter", type(broker.consenter).__name__)
print("dashboard", repr(broker.dashboard()).splitlines()[0])
ip.run_line_magic("unload_ext", "jupyter_fsbroker")
print("left", sorted(t.name for t in threading.enumerate() if t.ident not in before))
"""

SCRIPT = f"""
import sys
import jupyter_fsbroker as fsb

broker = fsb.get_broker()
broker.add_root("./data", name="data")
broker.allow("data", ops="read")
conn = broker.connect("analysis", command=[sys.executable, "-m", "{SERVER_MODULE}"])
print("rows", conn.call_tool("profile_csv", {{"path": "data/sales.csv"}}).data["rows"])
print("same", fsb.get_broker() is broker)
print("ipython", "IPython" in sys.modules)
from jupyter_fsbroker.core.lockfiles import lock_path
import os
lock_file = lock_path(broker.core.locks.lock_dir, os.path.realpath("data/sales.csv"))
print("lock file", os.path.exists(lock_file), lock_file)
# no close: the atexit hook stops the server and the loop
"""


CLOSED_BY_HAND_SCRIPT = """
import threading
from IPython.core.interactiveshell import InteractiveShell
import jupyter_fsbroker as fsb

ip = InteractiveShell.instance()
before = {t.ident for t in threading.enumerate()}
ip.run_line_magic("load_ext", "jupyter_fsbroker")
first = fsb.get_broker()
first.close()
second = fsb.get_broker()
print("fresh", second is not first and not second.closed and fsb.get_broker() is second)
ip.run_line_magic("fsbroker", "root data=./data")
print("roots", [r.name for r in second.roots])
ip.run_line_magic("unload_ext", "jupyter_fsbroker")
print("closed", second.closed)
print("left", sorted(t.name for t in threading.enumerate() if t.ident not in before))
"""


def run(script: str, tmp_path: Path) -> str:
    work = make_workdir(tmp_path)
    env = {
        **os.environ,
        **server_env(),
        "HOME": str(tmp_path),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "XDG_RUNTIME_DIR": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "share"),
    }
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_plain_ipython_shows_text_and_leaves_no_threads(tmp_path: Path) -> None:
    out = run(IPYTHON_SCRIPT, tmp_path)
    assert "rows 4" in out
    assert "jupyter_fsbroker: 1 shared folder, 1 connection" in out  # %fsbroker status as text
    assert "consenter DenyingConsenter" in out  # no terminal to ask on: refuse
    assert "dashboard jupyter_fsbroker:" in out
    assert "left []" in out


def test_plain_python_script_gets_a_broker_that_closes_at_exit(tmp_path: Path) -> None:
    out = run(SCRIPT, tmp_path)
    assert "rows 4" in out and "same True" in out and "ipython False" in out
    # The read's lock file stays, idle, for the next lock of the file, until the broker closes.
    (line,) = (line for line in out.splitlines() if line.startswith("lock file "))
    assert line.startswith("lock file True ")
    assert not Path(line.removeprefix("lock file True ")).exists()


def test_a_broker_closed_by_hand_is_replaced_with_the_extension_loaded(tmp_path: Path) -> None:
    out = run(CLOSED_BY_HAND_SCRIPT, tmp_path)
    assert "fresh True" in out and "roots ['data']" in out and "closed True" in out and "left []" in out
