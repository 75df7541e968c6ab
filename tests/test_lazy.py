"""The lazy-import helper of the packages' ``__init__`` (``jupyter_fsbroker._lazy``)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from jupyter_fsbroker import _lazy
from tests.support.env import REPO, run_python
from tests.support.sources import absolute_imports, parse


def fake_package() -> tuple[types.ModuleType, dict[str, Any]]:
    """A package ``fake`` whose ``dumps`` comes from :mod:`json` on first use."""
    module = types.ModuleType("fake")
    namespace = vars(module)
    module.__getattr__, module.__dir__ = _lazy.lazy_exports(  # type: ignore[method-assign]
        "fake", namespace, {"dumps": "json", "JSONDecodeError": "json.decoder"}
    )
    return module, namespace


def test_a_name_is_imported_on_first_use_and_then_cached() -> None:
    import json

    module, namespace = fake_package()
    assert "dumps" not in namespace
    assert module.dumps is json.dumps
    assert namespace["dumps"] is json.dumps  # the next lookup never reaches __getattr__


def test_an_unknown_name_is_an_attribute_error() -> None:
    module, _ = fake_package()
    with pytest.raises(AttributeError, match="module 'fake' has no attribute 'loads'"):
        _ = module.loads
    assert not hasattr(module, "loads")


def test_dir_lists_the_lazy_names_before_they_are_used() -> None:
    module, _ = fake_package()
    assert {"dumps", "JSONDecodeError"} <= set(dir(module))


def test_relative_modules_resolve_against_the_package() -> None:
    namespace: dict[str, Any] = {}
    getattr_, _ = _lazy.lazy_exports("jupyter_fsbroker.console", namespace, {"status_text": ".status"})
    from jupyter_fsbroker.console.status import status_text

    assert getattr_("status_text") is status_text


def test_the_helper_imports_only_the_standard_library() -> None:
    modules = set(absolute_imports(parse(REPO / "jupyter_fsbroker" / "_lazy.py")))
    assert modules <= set(sys.stdlib_module_names), modules


def test_the_lazy_packages_load_their_heavy_modules_only_when_asked() -> None:
    code = (
        "import sys, jupyter_fsbroker.kernel, jupyter_fsbroker.protocol, jupyter_fsbroker.widgets\n"
        "print(sorted(m for m in ('IPython', 'ipywidgets', 'mcp') if m in sys.modules))\n"
        "jupyter_fsbroker.widgets.Dashboard\n"
        "print('ipywidgets' in sys.modules)\n"
    )
    out = run_python(code, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_a_moved_name_still_resolves_and_warns_at_each_use() -> None:
    import json

    module = types.ModuleType("fake")
    namespace = vars(module)
    module.__getattr__, module.__dir__ = _lazy.lazy_exports(  # type: ignore[method-assign]
        "fake", namespace, {"dumps": "json"}, moved={"loads": "json"}
    )
    for _ in range(2):
        with pytest.warns(DeprecationWarning, match=r"fake\.loads is now json\.loads"):
            assert module.loads is json.loads
    assert "loads" not in namespace
    assert "loads" not in dir(module)


def test_the_text_views_moved_out_of_the_widgets_and_still_resolve_there() -> None:
    import jupyter_fsbroker.console as console
    import jupyter_fsbroker.widgets as widgets

    for name in ("TerminalConsenter", "status_text", "ConnectionView"):
        with pytest.warns(
            DeprecationWarning, match=f"jupyter_fsbroker.widgets.{name} is now jupyter_fsbroker.console"
        ):
            assert getattr(widgets, name) is getattr(console, name)
