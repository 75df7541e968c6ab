"""Property tests of path resolution: whatever the input, the result is inside a root or an error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_fsbroker.core.errors import FilesError, InvalidParams, PermissionDenied
from jupyter_fsbroker.core.paths import _collapse, parse
from jupyter_fsbroker.core.resolve import resolve
from jupyter_fsbroker.core.roots import Root, RootSet


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, RootSet]]:
    base = tmp_path_factory.mktemp("paths")
    data = base / "data"
    (data / "a" / "b").mkdir(parents=True)
    (data / "a" / "f.txt").write_text("in")
    (data / "a" / "b" / "g.txt").write_text("in")
    (base / "outside" / "o").mkdir(parents=True)
    (base / "outside" / "secret").write_text("out")
    (data / "up").symlink_to("..")
    (data / "a" / "up2").symlink_to("../..")
    (data / "a" / "self").symlink_to(".")
    (data / "a" / "in").symlink_to("b/g.txt")
    (data / "a" / "abs_in").symlink_to(data / "a")
    (data / "abs_out").symlink_to(base / "outside")
    (data / "rel_out").symlink_to("../outside/o")
    (data / "dotdot_link").symlink_to("a/../../outside")
    (data / "loop").symlink_to("loop")
    other = base / "other"
    other.mkdir()
    (other / "x").write_text("other")
    (data / "to_other").symlink_to(other)
    roots = RootSet()
    roots.add(data, name="data")
    roots.add(other, name="other")
    yield base, roots
    roots.close()


SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "a",
        "b",
        "f.txt",
        "g.txt",
        "up",
        "up2",
        "self",
        "in",
        "abs_in",
        "abs_out",
        "rel_out",
        "dotdot_link",
        "loop",
        "to_other",
        "outside",
        "secret",
        "o",
        "data",
        "other",
        "%2e%2e",
        "%2F",
        "x",
        "a..b",
        "..x",
        "\x00",
        "~",
        "data-old",
    ]
)


def _inside(fd: int, name: str | None, root: Root) -> bool:
    location = os.readlink(f"/proc/self/fd/{fd}")
    full = location if name is None else os.path.join(location, name)
    return full == root.path or full.startswith(root.path + os.sep)


def _spellings(base: Path, parts: list[str]) -> list[str]:
    rel = "/".join(parts)
    return [rel, f"{base}/data/{rel}", f"file://{base}/data/{rel}", f"/{rel}", f"data/{rel}", f"other/{rel}"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=8), follow=st.booleans())
def test_resolution_stays_inside_a_root(world: tuple[Path, RootSet], parts: list[str], follow: bool) -> None:
    base, roots = world
    for raw in _spellings(base, parts):
        try:
            target = parse(raw, roots)
            with resolve(roots, target, check=lambda root, p: None, follow_last=follow, raw=raw) as res:
                assert res.root == target.root
                assert _inside(res.dir_fd, None, res.root)
                if res.name is not None:
                    assert "/" not in res.name and res.name not in ("", ".", "..")
                    assert _inside(res.dir_fd, res.name, res.root)
                    if res.st is not None and follow:
                        # What the descriptor names is the object described.
                        assert os.path.samestat(
                            res.st, os.stat(res.name, dir_fd=res.dir_fd, follow_symlinks=False)
                        )
        except FilesError as exc:
            assert isinstance(exc, (PermissionDenied, InvalidParams)) or exc.name in (
                "NOT_FOUND",
                "WRONG_TYPE",
            )
            # Messages echo at most the request's own path, never where a link led.
            assert str(base / "outside") not in exc.message.replace(raw, "")
            assert str(base) not in exc.message.replace(raw, "")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.text(max_size=40))
def test_any_text_is_inside_or_refused(world: tuple[Path, RootSet], raw: str) -> None:
    _, roots = world
    try:
        target = parse(raw, roots)
    except FilesError:
        return
    assert ".." not in target.parts and "" not in target.parts and "." not in target.parts
    try:
        with resolve(roots, target, check=lambda root, p: None, raw=raw) as res:
            assert _inside(res.dir_fd, res.name, res.root)
    except FilesError:
        pass


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(["..", ".", "a", "b"]), max_size=10))
def test_lexical_collapse_never_climbs_out(parts: list[str]) -> None:
    depth = 0
    escaped = False
    for p in parts:
        if p == "..":
            depth -= 1
            escaped |= depth < 0
        elif p != ".":
            depth += 1
    if escaped:
        with pytest.raises(PermissionDenied):
            _collapse(parts, "x")
    else:
        assert len(_collapse(parts, "x")) == depth
