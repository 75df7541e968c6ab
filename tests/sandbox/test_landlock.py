"""The ctypes binding: the kernel's struct layouts, the rights of each ABI, and rulesets of every ABI."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox import landlock
from jupyter_fsbroker.sandbox.landlock import AccessFS, AccessNet, RestrictFlag, Scope
from tests.sandbox.conftest import PROBE, environment


def test_struct_layouts_match_the_kernels_header() -> None:
    # <linux/landlock.h>: landlock_path_beneath_attr is packed (12 bytes); the others are u64s.
    assert ctypes.sizeof(landlock._PathBeneathAttr) == 12
    assert landlock._PathBeneathAttr.parent_fd.offset == 8
    assert ctypes.sizeof(landlock._NetPortAttr) == 16
    assert ctypes.sizeof(landlock._RulesetAttr) == 24


def test_each_abi_knows_the_rights_it_introduced() -> None:
    first = AccessFS(0x1FFF)  # EXECUTE .. MAKE_SYM
    assert landlock.fs_rights(1) == first
    assert landlock.fs_rights(2) == first | AccessFS.REFER
    assert landlock.fs_rights(3) == landlock.fs_rights(4) == first | AccessFS.REFER | AccessFS.TRUNCATE
    assert landlock.fs_rights(5) == landlock.fs_rights(7) == AccessFS(0xFFFF)
    assert landlock.net_rights(3) == AccessNet(0)
    assert landlock.net_rights(4) == AccessNet.BIND_TCP | AccessNet.CONNECT_TCP
    assert landlock.scopes(5) == Scope(0)
    assert landlock.scopes(6) == Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL
    assert landlock.restrict_flags(6) == RestrictFlag(0)
    assert landlock.restrict_flags(7) == RestrictFlag(0b111)


def test_the_kernel_accepts_the_ruleset_of_every_abi_up_to_its_own(abi: int) -> None:
    for version in range(1, abi + 1):
        fd = landlock.create_ruleset(
            version, landlock.fs_rights(version), landlock.net_rights(version), landlock.scopes(version)
        )
        try:
            assert not os.get_inheritable(fd)
        finally:
            os.close(fd)


def test_a_right_the_abi_does_not_know_is_refused_before_the_kernel_sees_it() -> None:
    with pytest.raises(ValueError, match="ABI 2"):
        landlock.create_ruleset(2, AccessFS.TRUNCATE, AccessNet(0), Scope(0))
    with pytest.raises(ValueError, match="ABI 5"):
        landlock.create_ruleset(5, AccessFS.READ_FILE, AccessNet(0), Scope.SIGNAL)


def test_no_environment_variable_makes_landlock_look_unavailable(
    abi: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The switch the tests once used: any process could set it for a kernel's servers.
    monkeypatch.setenv("FSBROKER_SANDBOX_SIMULATE_UNAVAILABLE", "no Landlock on this test machine")
    assert landlock.abi_version() == abi


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (errno.ENOSYS, "this kernel has no Landlock system calls"),
        (errno.EOPNOTSUPP, "not enabled at boot"),
        (errno.EPERM, "blocked here (a container's seccomp profile"),
        (errno.EINVAL, "the Landlock version query failed"),
    ],
)
def test_what_the_kernel_answers_is_said_in_words(
    code: int, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused() -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(landlock, "_query_abi", refused)
    with pytest.raises(landlock.LandlockUnavailable) as info:
        landlock.abi_version()
    assert info.value.errno == code and says in str(info.value.strerror)


_OLD_KERNEL = """
import json, runpy, sys
from jupyter_fsbroker.sandbox import confine, landlock
from jupyter_fsbroker.sandbox.policy import Policy
abi = int(sys.argv[1])
landlock.abi_version = lambda: abi  # the fault injected: a kernel of an older ABI
with open(sys.argv[2]) as f:
    done = confine.confine(Policy.from_json(f.read()))
print(json.dumps([done.abi, done.scoped]), flush=True)
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("version", range(1, 8))
def test_a_policy_confines_on_every_older_abi(version: int, abi: int, tmp_path: Path) -> None:
    """Each ABI's ruleset, as an older kernel would get it, still refuses what it must."""
    if version > abi:
        pytest.skip(f"this kernel offers ABI {abi}")
    from jupyter_fsbroker.sandbox import choose, prepare

    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    env = environment()
    with prepare([sys.executable, str(PROBE)], choose(True), env=env) as launch:
        policy_file = launch.command[launch.command.index("--policy") + 1]
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _OLD_KERNEL,
                str(version),
                policy_file,
                str(PROBE),
                f"read:{secret}",
                "tmpfile",
            ],
            capture_output=True,
            text=True,
            env={**env, **launch.env},
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    header, results = done.stdout.splitlines()
    assert header == f"[{version}, {'true' if version >= 6 else 'false'}]"
    assert f'"read:{secret}": "EACCES"' in results
    assert '"tmpfile": "ok:' in results
