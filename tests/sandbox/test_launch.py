"""Starting a server confined: the launcher's failures, Landlock unavailable, the private folder, Node."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox import Sandbox, SandboxUnavailable, choose, prepare
from jupyter_fsbroker.sandbox.launch import launcher_command
from jupyter_fsbroker.sandbox.run import CANNOT_CONFINE, NOT_FOUND
from tests.sandbox.conftest import PROBE, environment, run_launch
from tests.support import without_landlock
from tests.support.ci import cannot_run

SIMULATED = "this kernel is too old (test)"


@pytest.fixture
def no_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without Landlock, simulated (an older kernel, macOS, a container that blocks it)."""
    without_landlock.simulate(monkeypatch, SIMULATED)


@pytest.mark.usefixtures("no_landlock")
def test_asked_for_and_unavailable_is_an_error_that_says_why() -> None:
    for value in (True, "roots", Sandbox(connect_ports=(443,))):
        with pytest.raises(
            SandboxUnavailable, match=r"the sandbox was asked for, but this kernel is too old"
        ):
            prepare([sys.executable, str(PROBE)], choose(value), env=environment())


@pytest.mark.usefixtures("no_landlock")
def test_a_default_sandbox_unavailable_is_one_warning_and_never_a_claim(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker.sandbox"):
        launch = prepare([sys.executable, str(PROBE)], choose(None, default=Sandbox()), env=environment())
    with launch:
        assert launch.command == [sys.executable, str(PROBE)]
        assert not launch.status.confined
        assert launch.status.describe() == f"not sandboxed (sandbox unavailable: {SIMULATED})"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert "without the default sandbox" in warnings[0].getMessage()


def test_the_launcher_never_runs_the_command_unconfined(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    with prepare(command, choose(True), env=environment()) as launch:
        simulated = run_launch(launch, without_landlock.launcher(SIMULATED, launch.command))
    assert simulated.returncode == CANNOT_CONFINE
    assert simulated.stderr.startswith(
        "jupyter-fsbroker sandbox: Landlock is unavailable, the server was not started"
    )
    broken = tmp_path / "policy.json"
    broken.write_text('{"format": 1, "rules": "all"}')
    unreadable = subprocess.run(
        launcher_command(str(broken), command), capture_output=True, text=True, check=False
    )
    assert unreadable.returncode == CANNOT_CONFINE
    assert "cannot read the policy" in unreadable.stderr
    assert not marker.exists()


@pytest.mark.usefixtures("abi")
def test_a_command_the_sandbox_cannot_execute_is_named(tmp_path: Path) -> None:
    with prepare([sys.executable, str(PROBE)], choose(True), env=environment()) as launch:
        command = [*launch.command[:-2], "/bin/no-such-program"]
        done = run_launch(launch, command)
        outside = [*launch.command[:-2], str(shutil.copy(sys.executable, tmp_path / "python"))]
        refused = run_launch(launch, outside)
    assert done.returncode == NOT_FOUND
    assert "cannot execute '/bin/no-such-program' inside the sandbox" in done.stderr
    assert refused.returncode == NOT_FOUND and "Permission denied" in refused.stderr


@pytest.mark.usefixtures("abi")
def test_the_launcher_is_isolated_from_the_servers_python_environment() -> None:
    """A server's PYTHONPATH or PYTHONHOME cannot change the launcher (``-I -S``), only the server."""
    with prepare([sys.executable, str(PROBE), "import:json"], choose(True), env=environment()) as launch:
        done = run_launch(launch, PYTHONSTARTUP="/nonexistent", PYTHONWARNINGS="error")
    assert done.returncode == 0, done.stderr
    assert launch.command[1:3] == ["-I", "-S"]


@pytest.mark.usefixtures("abi")
def test_the_private_folder_goes_even_when_the_server_is_killed() -> None:
    launch = prepare([sys.executable, "-c", "import time; time.sleep(60)"], choose(True), env=environment())
    with launch:
        private = launch.private_folder
        assert private is not None and os.path.isdir(private)
        assert oct(os.stat(private).st_mode & 0o777) == "0o700"
        process = subprocess.Popen(launch.command, env={**environment(), **launch.env})
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert not os.path.exists(private)


@pytest.mark.usefixtures("abi")
def test_folders_of_a_killed_broker_are_removed_by_the_next_one() -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tempfile.mkdtemp(prefix=f"fsbroker-sandbox-{int(dead.stdout)}-")
    Path(stale, "tmp").mkdir()
    live = tempfile.mkdtemp(prefix=f"fsbroker-sandbox-{os.getpid()}-")
    try:
        with prepare([sys.executable, str(PROBE)], choose(True), env=environment()):
            assert not os.path.exists(stale)
            assert os.path.isdir(live), "a folder of a live broker stays"
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)


@pytest.mark.usefixtures("abi")
def test_node_starts_and_runs_under_the_sandbox(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        cannot_run("node is not installed")
    script = tmp_path / "server" / "main.js"
    script.parent.mkdir()
    script.write_text(
        "const fs = require('fs'), os = require('os');\n"
        "let shadow;\n"
        "try { fs.readFileSync('/etc/shadow'); shadow = 'read'; } catch (e) { shadow = e.code; }\n"
        "const tmp = fs.mkdtempSync(require('path').join(os.tmpdir(), 'x-'));\n"
        "fs.writeFileSync(tmp + '/f', 'x');\n"
        "console.log(JSON.stringify({shadow, cpus: os.cpus().length > 0,"
        " tmp: tmp.includes('fsbroker-sandbox-'), crypto: require('crypto').randomUUID().length}));\n"
    )
    with prepare([node, str(script)], choose(True), env=environment()) as launch:
        done = run_launch(launch)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '{"shadow":"EACCES","cpus":true,"tmp":true,"crypto":36}'


@pytest.mark.usefixtures("abi")
def test_an_ordinary_user_is_confined_too() -> None:
    """CI runs as root, where CAP_SYS_ADMIN would do without no_new_privs: check the ordinary path too."""
    python, setpriv = shutil.which("python3", path="/usr/bin"), shutil.which("setpriv")
    if os.geteuid() != 0 or python is None or setpriv is None:
        pytest.skip("needs root (to become nobody), setpriv and the system's python3")
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True
    )
    if version.stdout.strip() != b"True":
        pytest.skip("the system's python3 is older than 3.11")
    # A folder the user nobody can reach (pytest's are root's only): the sandbox, a policy, a secret.
    shared = Path(tempfile.mkdtemp(prefix="fsbroker-sandbox-test-"))
    try:
        _confine_nobody(python, setpriv, shared)
    finally:
        shutil.rmtree(shared)


def _confine_nobody(python: str, setpriv: str, shared: Path) -> None:
    from jupyter_fsbroker.sandbox import launch as launch_module
    from jupyter_fsbroker.sandbox.policy import AccessMode, Policy, Rule

    shutil.copytree(Path(launch_module.__file__).parent, shared / "sandbox")
    private = shared / "private"
    private.mkdir()
    os.chown(private, 65534, 65534)
    (shared / "secret.txt").write_text("x")
    rules = [Rule(p, AccessMode.READ_EXECUTE) for p in ("/usr", "/lib", "/lib64")]
    rules += [Rule("/etc/ld.so.cache", AccessMode.READ), Rule("/proc/self", AccessMode.READ)]
    policy = Policy((*rules, Rule(str(private), AccessMode.READ_WRITE)))
    (shared / "policy.json").write_text(policy.to_json())
    shared.chmod(0o755)
    code = (
        "import os\n"
        f"open('{private}/f', 'w').write('x')\n"
        f"try:\n    open('{shared}/secret.txt').read(); print('read')\nexcept OSError as e: print(e.errno)\n"
        "status = open('/proc/self/status').read()\n"
        "print(os.getuid(), status.split('NoNewPrivs:')[1].split()[0])\n"
    )
    command = launch_module.launcher_command(str(shared / "policy.json"), [python, "-c", code])
    command[0], command[5] = python, str(shared / "sandbox")
    done = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["13", "65534", "1"]
    assert (private / "f").read_text() == "x"
