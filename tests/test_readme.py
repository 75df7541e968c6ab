"""The README's first screen says what the project really does, and its examples run as written.

The first screen: one sentence, the two fresh-machine commands (the test command is the one CI
runs) and the consent screenshot. Then each example is taken from the README itself and run: the
plain-Python one prints exactly the output shown under it, the notebook one runs in a fresh
kernel (``jupyter execute``), and the server of "For server authors" answers the command-line
calls shown next to it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

from tests.kernel.harness import isolated_env
from tests.support.env import REPO, server_env

README = (REPO / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SALES = "region,total\nnorth,120\nsouth,95\neast,87\n"


def _blocks(lang: str | None = None) -> list[tuple[int, str, str]]:
    """``(offset, language, code)`` of each fenced block of the README, in order."""
    found = [(m.start(), m[1], m[2]) for m in FENCE.finditer(README)]
    return [block for block in found if lang is None or block[1] == lang]


def _section(heading: str) -> tuple[int, int]:
    """Where the ``## heading`` section of the README starts and ends."""
    start = README.index(f"\n## {heading}\n")
    following = README.find("\n## ", start + 1)
    return start, len(README) if following < 0 else following


def _blocks_in(heading: str, lang: str) -> list[str]:
    start, end = _section(heading)
    return [code for offset, kind, code in _blocks(lang) if start < offset < end]


def _commands(script: str) -> list[str]:
    """The commands of a shell block: comments dropped, continuation lines joined."""
    joined = script.replace("\\\n", " ")
    return [
        line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    """An environment where ``python`` and ``jupyter-fsbroker`` are this interpreter and checkout.

    Both are scripts that run the interpreter where it is: a link to it elsewhere would no longer
    be inside its virtual environment, and would not find its packages. They put this checkout
    first on ``PYTHONPATH`` themselves, since stdio servers start with a bare environment.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = shlex.quote(server_env()["PYTHONPATH"])
    for name, args in (("python", ""), ("jupyter-fsbroker", " -m jupyter_fsbroker")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nPYTHONPATH={path} exec {shlex.quote(sys.executable)}{args} "$@"\n')
        shim.chmod(0o755)
    env = {**isolated_env(tmp_path / "home"), **server_env()}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def _ci_run(tmp_path: Path, readme: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``.ci/run`` itself, run in *tmp_path* on a checkout whose README is *readme*.

    The machine's packages are not its business here: ``scripts/system-packages.sh`` does nothing,
    and fails under ``--print``, so that a ``.ci/run`` that ignored it would stop there.
    """
    (tmp_path / ".ci").mkdir(exist_ok=True)
    (tmp_path / ".ci" / "run").write_text((REPO / ".ci" / "run").read_text())
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / "scripts" / "system-packages.sh").write_text("exit 1\n" if "--print" in args else "exit 0\n")
    (tmp_path / "README.md").write_text(readme)
    env = {**os.environ, "PATH": os.pathsep.join([str(tmp_path / "bin"), os.environ["PATH"]])}
    return subprocess.run(
        ["bash", ".ci/run", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def _data(tmp_path: Path) -> Path:
    """A ``data`` folder holding ``sales.csv``, as the README's examples expect."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.csv").write_text(SALES)
    return tmp_path


# -- the first screen ---------------------------------------------------------------------------


def test_the_first_screen_is_one_sentence_two_commands_and_the_consent_screenshot(tmp_path: Path) -> None:
    first_screen = README[: README.index("\n## ")]
    title, intro = first_screen.split("\n", 1)
    assert title == "# jupyter_fsbroker"
    sentence = intro[: intro.index("```")].strip()
    assert sentence.count(". ") == 0 and sentence.endswith("."), sentence
    offset, lang, script = _blocks()[0]
    assert lang == "bash" and offset < len(first_screen)
    try_it, test_it = _commands(script)
    # A virtual environment first (system Pythons refuse pip install), then the quickstart notebook.
    steps = [step.strip() for step in try_it.split("&&")]
    assert steps[0] == "python3 -m venv .venv" and steps[1] == ". .venv/bin/activate"
    # Both distributions of this repository, editable: the server kit and the package that requires it.
    assert steps[2].startswith("pip install -e ./packaging/serverkit -e . ")
    assert steps[3] == "jupyter lab notebooks/01_quickstart.ipynb"
    assert (REPO / "notebooks" / "01_quickstart.ipynb").is_file()
    # The JupyterLab it installs is one the test extra (which the browser tests use) allows.
    [lab] = [Requirement(arg.strip('"')) for arg in shlex.split(steps[2]) if arg.startswith("jupyterlab")]
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    [tested] = [Requirement(r) for r in extra if Requirement(r).name == "jupyterlab"]
    assert lab.specifier and all(str(spec) in str(tested.specifier) for spec in lab.specifier)
    # CI runs these very commands, read from this block as it runs: the set-up line without the
    # step that would block (JupyterLab), then the test command, which installs the test extra.
    assert test_it == "bash scripts/test.sh"
    ci = _ci_run(tmp_path, README, "--print")
    assert ci.returncode == 0, ci.stderr
    assert ci.stdout.splitlines() == [" && ".join(steps[:-1]), test_it]
    assert (
        'pip install -q -e ./packaging/serverkit -e ".[test]"' in (REPO / "scripts" / "test.sh").read_text()
    )
    # The consent screenshot: the per-path one, in both themes.
    images = re.findall(r'(?:src|srcset)="([^"]+)"', first_screen)
    assert sorted(images) == ["docs/images/consent-dark.png", "docs/images/consent-light.png"]
    assert all((REPO / image).is_file() for image in images)


def test_ci_runs_the_first_block_line_by_line_in_one_shell_and_stops_at_a_failing_step(
    tmp_path: Path,
) -> None:
    # A `jupyter` that says when it runs: CI must not start JupyterLab, which would block.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "jupyter").write_text('#!/bin/sh\necho ran > "$PWD/jupyter-ran"\n')
    (tmp_path / "bin" / "jupyter").chmod(0o755)
    readme = "# x\n\nA sentence.\n\n```bash\n{}```\n\n```bash\necho later > later\n```\n"
    set_up = "export STEP=set-up && echo one > one \\\n    && jupyter lab notebooks/x.ipynb"
    done = _ci_run(tmp_path, readme.format(f'# Set up.\n{set_up}\n\n# Test.\necho "$STEP" > two\n'))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "one").read_text() == "one\n"
    assert (tmp_path / "two").read_text() == "set-up\n"  # the same shell: what the first line set holds
    assert not (tmp_path / "jupyter-ran").exists() and not (tmp_path / "later").exists()

    failed = _ci_run(tmp_path, readme.format("true && false && echo three > three\necho four > four\n"))
    assert failed.returncode != 0
    assert not (tmp_path / "three").exists() and not (tmp_path / "four").exists()


@pytest.mark.parametrize(
    "page", ["README.md", "CONTRIBUTING.md", "docs/security.md", "docs/notebook.md", "docs/server-helper.md"]
)
def test_every_local_link_and_image_exists(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) + re.findall(r'src(?:set)?="([^"]+)"', text)
    local = [t for t in targets if not re.match(r"\w+://", t)]
    folder = (REPO / page).parent
    assert local and [t for t in local if not (folder / t).exists()] == []


# -- the examples -------------------------------------------------------------------------------


def test_the_plain_python_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    [code] = _blocks_in("How it works", "python")
    [shown] = _blocks_in("How it works", "")
    (tmp_path / "secret.txt").write_text("outside every root\n")
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown


@pytest.mark.slow
def test_the_notebook_example_runs_in_a_fresh_kernel(tmp_path: Path) -> None:
    [code] = _blocks_in("In a notebook", "python")
    assert code.startswith("%load_ext jupyter_fsbroker\n")
    notebook = _data(tmp_path) / "example.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), notebook)
    # What `jupyter execute example.ipynb` runs, with a kernel start as patient as the run's own
    # timeout: its default, 60 s, is met on a loaded machine.
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from nbclient.cli import main; main()",
            "--inplace",
            "--startup_timeout=240",
            notebook.name,
        ],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    [cell] = nbformat.read(notebook, as_version=4).cells
    printed = "".join(output.get("text", "") for output in cell.outputs if output["output_type"] == "stream")
    assert printed == f"{SALES.count(chr(10)) - 1} rows\n"


def test_server_authors_install_the_kits_own_distribution() -> None:
    install, _ = _blocks_in("For server authors", "bash")
    [command] = _commands(install)
    kit = REPO / "packaging" / "serverkit"
    name = tomllib.loads((kit / "pyproject.toml").read_text())["project"]["name"]
    assert command == f"pip install {name}"
    # From a clone, the same distribution built from its folder.
    assert "# From a clone of this repository: pip install ./packaging/serverkit\n" in install
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert name in {Requirement(r).name for r in dependencies}  # and a notebook install has it


def test_the_server_authors_example_answers_the_command_shown_with_it(tmp_path: Path) -> None:
    [server] = _blocks_in("For server authors", "python")
    _, example = _blocks_in("For server authors", "bash")
    [command] = _commands(example)
    assert command.endswith("-- python line_counter.py")
    (_data(tmp_path) / "line_counter.py").write_text(server)
    assert len([line for line in server.splitlines() if line.strip()]) <= 16  # "a ~15-line server"
    out = subprocess.run(
        command, shell=True, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["structuredContent"] == {"result": SALES.count("\n")}


def test_the_command_line_example_calls_the_example_server(tmp_path: Path) -> None:
    commands = _commands("\n".join(_blocks_in("From a terminal: `jupyter-fsbroker`", "bash")))
    local = [c for c in commands if "--call" in c]
    assert len(local) == 1 and len(commands) == 2  # the other one needs a real remote server
    out = subprocess.run(
        local[0],
        shell=True,
        cwd=_data(tmp_path),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    profile = json.loads(out.stdout)["structuredContent"]
    assert profile["rows"] == SALES.count("\n") - 1 and [c["name"] for c in profile["columns"]] == [
        "region",
        "total",
    ]


# -- the reference sections ---------------------------------------------------------------------


def test_the_configuration_table_lists_exactly_the_notebook_settings() -> None:
    from jupyter_fsbroker.kernel.settings import FSBroker

    start, end = _section("Configuration")
    rows = [line for line in README[start:end].splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert listed == set(FSBroker.class_trait_names(config=True))


def test_the_command_line_section_lists_exactly_the_options_of_connect(tmp_path: Path) -> None:
    start, end = _section("From a terminal: `jupyter-fsbroker`")
    options = README[start:end].split("The options (`jupyter-fsbroker connect --help`):", 1)[1]
    listed = set(re.findall(r"`(-{1,2}[a-z][\w-]*)", options))
    shown = subprocess.run(
        [sys.executable, "-m", "jupyter_fsbroker", "connect", "--help"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    usage = shown[: shown.index("\n\n")]  # the usage lines name every option once, short form first
    known = set(re.findall(r"\[(-{1,2}[a-z][\w-]*)", usage)) - {"-h"}
    assert listed == known
