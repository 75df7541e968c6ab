"""Roots and pre-approvals as users spell them, applied the one way the CLI, settings and magics share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.core.specs import SpecProblem, add_root_spec, allow_spec, apply_specs


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    for name in ("data", "ref", "other/data"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "data" / "raw").mkdir()
    return tmp_path


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))) as b:
        yield b


def test_everything_applies_in_order(broker: Broker, folders: Path) -> None:
    problems = apply_specs(
        broker,
        roots=[f"data={folders / 'data'}"],
        read_only_roots=[str(folders / "ref")],
        allow=["data/raw:read,watch", "ref"],
    )
    assert problems == ()
    assert [(r.name, r.read_only) for r in broker.roots.snapshot()] == [("data", False), ("ref", True)]
    assert [(g.path, g.operations) for g in broker.grants.grants()] == [
        ("data/raw", ("read", "watch")),
        ("ref", ("read",)),
    ]


def test_every_problem_is_reported_and_the_rest_applies(broker: Broker, folders: Path) -> None:
    problems = apply_specs(
        broker,
        roots=[str(folders / "missing"), f"data={folders / 'data'}", f"data={folders / 'other' / 'data'}"],
        read_only_roots=["/"],
        allow=["data:read,fly", "/etc:read", "data/raw"],
    )
    assert [(p.kind, p.spec) for p in problems] == [
        ("root", str(folders / "missing")),
        ("root", f"data={folders / 'other' / 'data'}"),
        ("read-only root", "/"),
        ("pre-approval", "data:read,fly"),
        ("pre-approval", "/etc:read"),
    ]
    assert "no such directory" in problems[0].message and "exists already" in problems[1].message
    assert str(problems[3]).startswith("pre-approval 'data:read,fly': ") and "unknown operation" in str(
        problems[3]
    )
    assert [r.name for r in broker.roots.snapshot()] == ["data"]
    assert [g.path for g in broker.grants.grants()] == ["data/raw"]


def test_roots_that_existed_before_are_not_problems(broker: Broker, folders: Path) -> None:
    """Settings applied again must not complain about a root the user has changed since."""
    broker.add_root(folders / "other" / "data", "data")
    spec = f"data={folders / 'data'}"
    assert apply_specs(broker, roots=[spec], existing_roots={"data"}) == ()
    assert [p.kind for p in apply_specs(broker, roots=[spec])] == ["root"]
    unnamed = str(folders / "other" / "data")  # named after its folder: always reported
    assert [p.spec for p in apply_specs(broker, roots=[unnamed], existing_roots={"data"})] == [unnamed]


def test_one_spec_at_a_time(broker: Broker, folders: Path) -> None:
    root = add_root_spec(broker, f" data = {folders / 'data'} ", read_only=True)
    assert (root.name, root.read_only) == ("data", True)
    grant = allow_spec(broker, "data/raw:watch")
    assert (grant.path, grant.operations) == ("data/raw", ("watch",))
    with pytest.raises(ConfigError):
        allow_spec(broker, "/etc:read")  # outside every root


def test_a_problem_reads_as_one_line() -> None:
    problem = SpecProblem("read-only root", "ref=./ref", "cannot add root '/x/ref': no such directory")
    assert str(problem) == "read-only root 'ref=./ref': cannot add root '/x/ref': no such directory"
