"""The sandbox is a layer of its own: the standard library and its own modules, imported relatively."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.sources import PACKAGE, absolute_imports, parse

FOLDER = PACKAGE / "sandbox"


def test_the_sandbox_imports_only_the_standard_library_and_itself() -> None:
    files = sorted(FOLDER.glob("*.py"))
    assert files
    offenders = {
        path.name: sorted(
            m for m in absolute_imports(parse(path)) if m.split(".")[0] not in sys.stdlib_module_names
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_its_relative_imports_stay_in_its_folder() -> None:
    """``from .x import y`` only: the launcher loads this folder as a package of its own."""
    beyond = [
        f"{path.name}:{node.lineno}"
        for path in sorted(FOLDER.glob("*.py"))
        for node in ast.walk(parse(path))
        if isinstance(node, ast.ImportFrom) and node.level > 1
    ]
    assert beyond == []


def test_the_launchers_modules_import_nothing_heavy(tmp_path: Path) -> None:
    from jupyter_fsbroker.sandbox.launch import launcher_command

    code = (
        "import sys; print(sorted(m for m in sys.modules if m.startswith(('jupyter_fsbroker', 'fsbroker'))))"
    )
    policy = tmp_path / "policy.json"
    policy.write_text('{"format": 1, "level": "files", "connectPorts": null, "rules": []}')
    command = launcher_command(str(policy), [sys.executable, "-c", code])
    # Run the bootstrap without the exec: the same modules load, the policy is read, then stop.
    bootstrap = command[command.index("-c") + 1].replace(
        "sys.exit(main(sys.argv[2:]))", "print(sorted(sys.modules))"
    )
    done = subprocess.run([*command[:4], bootstrap, *command[5:]], capture_output=True, text=True, check=True)
    loaded = eval(done.stdout)
    ours = sorted(m for m in loaded if "sandbox" in m or m.startswith("jupyter_fsbroker"))
    assert ours == [
        "fsbroker_sandbox",
        "fsbroker_sandbox.confine",
        "fsbroker_sandbox.landlock",
        "fsbroker_sandbox.policy",
        "fsbroker_sandbox.run",
    ]
    assert not {"subprocess", "shutil", "logging", "asyncio"} & set(loaded)


def test_every_public_name_resolves_and_is_documented() -> None:
    import jupyter_fsbroker.sandbox as sandbox

    assert sorted(sandbox.__all__) == sorted(sandbox._WHERE)
    for name in sandbox.__all__:
        value = getattr(sandbox, name)
        assert (value.__doc__ or "").strip(), name
        assert not value.__doc__.startswith(f"{name}("), f"{name} has only the generated dataclass docstring"
