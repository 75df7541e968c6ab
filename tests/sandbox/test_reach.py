"""What a server may reach, computed from its command: never a folder that holds a root, the home or /tmp."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox.policy import AccessMode, Policy, PolicyError, Rule
from jupyter_fsbroker.sandbox.reach import SandboxError, plan
from tests.sandbox.conftest import environment
from tests.support.ci import cannot_run


def rules_of(policy: Policy) -> dict[str, AccessMode]:
    return {rule.path: rule.access for rule in policy.rules}


def make_plan(
    tmp_path: Path, command: list[str], **kwargs: object
) -> tuple[dict[str, AccessMode], tuple[str, ...]]:
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    options: dict[str, object] = {
        "env": environment(),
        "cwd": str(tmp_path),
        "roots": (),
        "private_tmp": str(private),
    }
    options.update(kwargs)
    found = plan(command, **options)  # type: ignore[arg-type]
    return rules_of(found.policy), found.notes


def test_the_strict_base_no_home_no_shared_tmp_no_etc_no_proc(tmp_path: Path) -> None:
    rules, _ = make_plan(tmp_path, [sys.executable, "-c", "pass"])
    home, tmp = os.path.realpath(Path.home()), os.path.realpath("/tmp")
    for path in rules:
        assert path != "/" and not path.startswith("/etc/shadow") and path != "/etc"
        assert not home.startswith(path.rstrip("/") + "/") and path != home, path
        assert path != tmp and path != "/proc" and not path.startswith("/proc/1"), path
    assert rules["/usr"] is AccessMode.READ_EXECUTE
    assert rules["/proc/self"] is AccessMode.READ
    assert rules["/dev/null"] is AccessMode.DEVICE
    assert rules[os.path.realpath(tmp_path / "private")] is AccessMode.READ_WRITE
    assert rules[os.path.realpath(sys.prefix)] is AccessMode.READ_EXECUTE
    # Only the private folder is writable.
    assert [p for p, a in rules.items() if a is AccessMode.READ_WRITE] == [
        os.path.realpath(tmp_path / "private")
    ]


def test_a_script_folder_that_holds_a_root_is_narrowed_to_the_script(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    script = project / "server.py"
    script.write_text("print('hi')\n")
    rules, _ = make_plan(tmp_path, [sys.executable, str(script)], roots=[(str(project / "data"), False)])
    assert str(project) not in rules
    assert rules[str(script)] is AccessMode.READ
    rules, _ = make_plan(tmp_path, [sys.executable, "-u", str(script)])
    assert rules[str(project)] is AccessMode.READ, "without a root inside, the script's folder is granted"


def test_a_script_inside_a_root_is_not_granted(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    script = root / "server.py"
    script.write_text("")
    rules, notes = make_plan(tmp_path, [sys.executable, str(script)], roots=[(str(root), True)])
    assert not [p for p in rules if p.startswith(str(root))]
    assert any("overlaps the root" in note for note in notes)


def test_a_node_script_gets_its_outermost_node_modules(tmp_path: Path) -> None:
    package = tmp_path / "app" / "node_modules" / "@scope" / "server" / "node_modules" / "dep" / "dist"
    package.mkdir(parents=True)
    (package / "index.js").write_text("")
    node = shutil.which("node")
    if node is None:
        cannot_run("node is not installed")
    rules, _ = make_plan(tmp_path, [node, "--no-warnings", str(package / "index.js")])
    assert rules[str(tmp_path / "app" / "node_modules")] is AccessMode.READ
    assert str(tmp_path / "app") not in rules


def test_a_console_script_runs_with_its_shebangs_interpreter(tmp_path: Path) -> None:
    bin_folder = tmp_path / "venv" / "bin"
    bin_folder.mkdir(parents=True)
    script = bin_folder / "my-server"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    rules, _ = make_plan(tmp_path, [str(script)])
    assert rules[str(tmp_path / "venv")] is AccessMode.READ_EXECUTE
    assert rules[os.path.realpath(sys.prefix)] is AccessMode.READ_EXECUTE


def test_paths_the_user_adds(tmp_path: Path) -> None:
    root, cache = tmp_path / "data", tmp_path / "cache"
    root.mkdir()
    cache.mkdir()
    rules, _ = make_plan(tmp_path, [sys.executable, "-c", ""], paths=[str(cache)], roots=[(str(root), False)])
    assert rules[str(cache)] is AccessMode.READ
    for bad, reason in [(tmp_path, "overlaps the root"), (Path.home(), "contains"), ("/", "contains /")]:
        with pytest.raises(SandboxError, match=reason):
            make_plan(tmp_path, [sys.executable, "-c", ""], paths=[str(bad)], roots=[(str(root), False)])
    with pytest.raises(SandboxError, match="does not exist"):
        make_plan(tmp_path, [sys.executable, "-c", ""], paths=[str(tmp_path / "nope")])


def test_roots_level_grants_roots_with_their_mode(tmp_path: Path) -> None:
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    roots = [(str(ro), True), (str(rw), False)]
    files, _ = make_plan(tmp_path, [sys.executable, "-c", ""], roots=roots)
    assert str(ro) not in files and str(rw) not in files
    granted, _ = make_plan(tmp_path, [sys.executable, "-c", ""], roots=roots, level="roots")
    assert granted[str(ro)] is AccessMode.READ and granted[str(rw)] is AccessMode.READ_WRITE


def test_a_command_not_found(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="command not found: no-such-server"):
        make_plan(tmp_path, ["no-such-server"])


def test_the_policy_travels_as_json_and_nothing_unknown_is_accepted() -> None:
    policy = Policy(
        (Rule("/usr", AccessMode.READ_EXECUTE, "system"), Rule("/dev/null", AccessMode.DEVICE)),
        (443,),
        "roots",
    )
    assert Policy.from_json(policy.to_json()) == policy
    for text, message in [
        ('{"format": 2, "level": "files", "connectPorts": null, "rules": []}', "format 2"),
        (
            '{"format": 1, "level": "files", "connectPorts": null, "rules": [], "extra": 1}',
            "expected the fields",
        ),
        ('{"format": 1, "level": "files", "connectPorts": [true], "rules": []}', "not a TCP port"),
        (
            '{"format": 1, "level": "files", "connectPorts": null, "rules": '
            '[{"path": "/", "access": "everything", "why": "", "required": false}]}',
            "not a sandbox policy",
        ),
        (
            '{"format": 1, "level": "files", "connectPorts": null, "rules": '
            '[{"path": "etc", "access": "read", "why": "", "required": false}]}',
            "absolute",
        ),
    ]:
        with pytest.raises(PolicyError, match=message):
            Policy.from_json(text)


def test_a_read_only_root_inside_a_writable_one_cannot_be_kept_read_only(tmp_path: Path) -> None:
    outer, inner = tmp_path / "work", tmp_path / "work" / "reference"
    inner.mkdir(parents=True)
    roots = [(str(outer), False), (str(inner), True)]
    with pytest.raises(SandboxError, match=r"cannot keep the read-only root .*reference read-only"):
        make_plan(tmp_path, [sys.executable, "-c", ""], roots=roots, level="roots")
    granted, _ = make_plan(
        tmp_path, [sys.executable, "-c", ""], roots=[(str(outer), True), (str(inner), False)]
    )
    assert str(outer) not in granted, "the files level grants no root, nested or not"


def test_a_root_inside_what_the_server_must_read_is_said(tmp_path: Path) -> None:
    _, notes = make_plan(tmp_path, [sys.executable, "-c", ""], roots=[("/usr/share", True)])
    assert any("the root /usr/share lies inside /usr" in note for note in notes)
