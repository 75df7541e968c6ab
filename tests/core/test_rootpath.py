"""RootPath: the one spelling of a path inside a root, root-relative and absolute."""

from __future__ import annotations

import pytest

from jupyter_fsbroker.core.rootpath import RootPath
from jupyter_fsbroker.core.roots import Root

DATA = Root(name="data", path="/home/ana/data", given_path="/home/ana/link-to-data", id=1)
DATA_AGAIN = Root(name="data", path="/home/ana/data", given_path="/home/ana/data", id=2)


def test_spellings() -> None:
    where = RootPath(DATA, ("sales", "2024.csv"))
    assert where.rel == "data/sales/2024.csv"
    assert where.key == "/home/ana/data/sales/2024.csv"
    assert where.name == "2024.csv"
    assert not where.is_root


def test_the_root_itself() -> None:
    root = RootPath(DATA)
    assert (root.rel, root.key, root.name, root.is_root) == ("data", "/home/ana/data", None, True)
    with pytest.raises(ValueError, match="no parent"):
        _ = root.parent


def test_parent() -> None:
    where = RootPath(DATA, ("sales", "2024.csv"))
    assert where.parent == RootPath(DATA, ("sales",))
    assert where.parent.parent == RootPath(DATA)


def test_contains_and_overlaps() -> None:
    sales = RootPath(DATA, ("sales",))
    inside = RootPath(DATA, ("sales", "2024.csv"))
    sibling = RootPath(DATA, ("sales-old", "x"))
    assert sales.contains(sales) and sales.contains(inside)
    assert not inside.contains(sales)
    assert not sales.contains(sibling)
    assert RootPath(DATA).contains(sibling)
    assert sales.overlaps(inside) and inside.overlaps(sales)
    assert not sales.overlaps(sibling)
    # Another addition of a root of the same name and folder is another root.
    assert not RootPath(DATA_AGAIN, ("sales",)).contains(inside)


@pytest.mark.parametrize(
    ("absolute", "parts"),
    [
        ("/home/ana/data/x.csv", ("x.csv",)),
        ("/home/ana/data/a/b", ("a", "b")),
        ("/home/ana/data", None),
        ("/home/ana/data/", None),
        ("/home/ana/data-old/x", None),
        ("/home/ana/data/a//b", None),
        ("/home/ana/data/a/../b", None),
        ("/elsewhere/x", None),
    ],
)
def test_below(absolute: str, parts: tuple[str, ...] | None) -> None:
    found = RootPath.below(DATA, absolute)
    assert (None if found is None else found.parts) == parts
    if found is not None:
        assert found.key == absolute
