"""The one directory walker, :class:`OpenDirs`, in the two ways the core uses it.

Tree walks reopen a closed level by name themselves; a resolution gets the names back
(``pop(rewalk=True)``) to walk them again through its own checks, owns its root's
descriptor and hands its deepest one over. Either way no descriptor is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_fsbroker.core.descent import OpenDirs
from jupyter_fsbroker.core.posix import DIR_WALK_FLAGS


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a" / "b" / "c" / "d").mkdir(parents=True)
    return tmp_path


def walk_down(dirs: OpenDirs, names: list[str]) -> None:
    for name in names:
        dirs.push(name, os.open(name, DIR_WALK_FLAGS | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dirs.fd()))


def test_pop_rewalk_gives_back_the_names_of_levels_no_longer_held(tree: Path) -> None:
    before = open_fds()
    base = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    with OpenDirs(base, keep=1, flags=DIR_WALK_FLAGS, owns_base=True) as dirs:
        walk_down(dirs, ["a", "b", "c", "d"])
        # Only the deepest level is held besides the base: going up from d lands on c, closed.
        assert dirs.pop(rewalk=True) == ["a", "b", "c"]
        assert dirs.names == []
        assert os.path.samestat(os.fstat(dirs.fd()), os.stat(tree))
        walk_down(dirs, ["a", "b"])
        # Without rewalk the closed level is reopened by name when asked for.
        assert dirs.pop() == []
        assert os.path.samestat(os.fstat(dirs.fd()), os.stat(tree / "a"))
    assert open_fds() == before  # the owned base too


def test_take_deepest_hands_one_descriptor_over_and_closes_the_rest(tree: Path) -> None:
    before = open_fds()
    base = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    dirs = OpenDirs(base, keep=2, flags=DIR_WALK_FLAGS, owns_base=True)
    walk_down(dirs, ["a", "b", "c"])
    dirs.to_base()
    assert dirs.names == [] and os.path.samestat(os.fstat(dirs.fd()), os.stat(tree))
    walk_down(dirs, ["a", "b"])
    taken = dirs.take_deepest()
    assert open_fds() - before == {taken}
    assert os.path.samestat(os.fstat(taken), os.stat(tree / "a" / "b"))
    os.close(taken)
    dirs.close()  # idempotent after the hand-over
    assert open_fds() == before


def test_a_base_the_caller_owns_is_never_closed_nor_handed_over(tree: Path) -> None:
    base = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        dirs = OpenDirs(base)
        with pytest.raises(ValueError, match="caller"):
            dirs.take_deepest()
        walk_down(dirs, ["a"])
        dirs.close()
        os.fstat(base)  # still open
    finally:
        os.close(base)
