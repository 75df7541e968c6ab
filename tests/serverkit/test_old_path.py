"""The server kit's old import path, ``jupyter_fsbroker.protocol.server``: it still works, and warns.

Each check runs in a fresh interpreter: only a first import warns, and this process has imported
the kit already.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.env import server_env


def python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **server_env()},
    )


def test_the_old_path_warns_once_and_gives_the_kits_own_objects() -> None:
    """The kit's old module names and its exceptions' old names resolve to the kit's objects; the
    old exception names exist on the old path only."""
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import jupyter_fsbroker.protocol.server as old\n"
        "    import jupyter_fsbroker.protocol.server.errors as old_errors\n"
        "    from jupyter_fsbroker.protocol.server.client import FilesClient\n"
        "    import jupyter_fsbroker.protocol.server\n"
        "import jupyter_fsbroker.serverkit as kit\n"
        "from jupyter_fsbroker.serverkit import exceptions, files_client\n"
        "print(sorted({(w.category.__name__, str(w.message)) for w in caught}))\n"
        "print(len(caught))\n"
        "print(old.FilesClient is kit.FilesClient is FilesClient is files_client.FilesClient)\n"
        "from jupyter_fsbroker.protocol.server.errors import NotFound, error_from_jsonrpc\n"
        "print(old_errors is old.errors, NotFound is old.NotFound is kit.NotFoundError,\n"
        "      error_from_jsonrpc is exceptions.error_from_jsonrpc,\n"
        "      old.FilesError is kit.FilesRequestError)\n"
        "print(sorted(set(old.__all__) - set(kit.__all__)) == sorted(old._RENAMED),\n"
        "      all(getattr(old, a) is getattr(kit, b) for a, b in old._RENAMED.items()),\n"
        "      not any(hasattr(kit, a) for a in old._RENAMED))\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    warned, count, same, modules, names = out.stdout.splitlines()
    assert warned == (
        "[('DeprecationWarning', 'jupyter_fsbroker.protocol.server is now jupyter_fsbroker.serverkit; "
        "the old name goes in the next release')]"
    )
    assert count == "1"
    assert same == "True"
    assert modules == "True True True True"
    assert names == "True True True"


def test_the_old_path_fails_where_deprecations_are_errors() -> None:
    out = python("import jupyter_fsbroker.protocol.server", "-W", "error::DeprecationWarning")
    assert out.returncode != 0
    assert (
        "DeprecationWarning: jupyter_fsbroker.protocol.server is now jupyter_fsbroker.serverkit" in out.stderr
    )


def test_the_new_path_does_not_warn() -> None:
    out = python("import jupyter_fsbroker.serverkit", "-W", "error::DeprecationWarning")
    assert out.returncode == 0, out.stderr
