"""JupyterLab on 127.0.0.1 in a throw-away home, and every process it starts.

:class:`JupyterLab` runs ``python -m jupyterlab`` with a random token on a port
the server chooses itself (``--ServerApp.port=0``, read back from its runtime
file: nobody hands it a number that another process could take meanwhile), with
``HOME``, the XDG folders, the Jupyter and IPython folders and the JupyterLab
settings all under one temporary folder, nothing fetched from the network (no
news, no update check, no extension manager) and no terminals. It creates
notebooks through the contents REST API and, when stopped, shuts the server
down through the REST API, then makes sure that no process it started (kernels,
the MCP servers the kernels spawned) is still alive.

With ``labextension=True`` it serves this checkout's build of the JupyterLab
extension (``jupyter_fsbroker/labextension``, made by ``pip install -e .``),
linked into the throw-away data folder, which JupyterLab searches first: the
page runs this checkout's extension whatever else is installed. Otherwise the
extension is disabled (page config), so the notebook's widgets are tested on
their own, as in a frontend without it. The page exposes the application as
``window.jupyterapp`` so that tests can run its commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.env import REPO, server_env
from tests.support.processes import Proc, descendants

#: Seconds JupyterLab gets to answer its REST API after it was started.
STARTUP_TIMEOUT = 60.0
#: Seconds JupyterLab gets to exit after ``POST /api/shutdown`` (it shuts its kernels down first).
SHUTDOWN_TIMEOUT = 30.0
#: This checkout's built JupyterLab extension (``pip install -e .``, or ``npm run build`` in labextension/).
LABEXTENSION = REPO / "jupyter_fsbroker" / "labextension"

# JupyterLab's user settings: nothing fetched from the network, nothing that pops up.
_USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

# Server settings that keep it quiet and offline.
_SERVER_CONFIG = {
    # jupyter-lsp would look for language servers all over the machine: not needed here.
    "LanguageServerManager": {"autodetect": False},
}


def isolated_env(base: Path) -> dict[str, str]:
    """The environment of the server, its kernels and the browser: every per-user folder under *base*."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("JUPYTER", "JPY_", "IPYTHON")) and key != "PYTHONPATH"
    }
    folders = {
        "HOME": "home",
        "XDG_CONFIG_HOME": "xdg/config",
        "XDG_DATA_HOME": "xdg/data",
        "XDG_CACHE_HOME": "xdg/cache",
        "XDG_STATE_HOME": "xdg/state",
        "XDG_RUNTIME_DIR": "xdg/runtime",
        "JUPYTER_CONFIG_DIR": "jupyter/config",
        "JUPYTER_DATA_DIR": "jupyter/data",
        "JUPYTER_RUNTIME_DIR": "jupyter/runtime",
        "IPYTHONDIR": "ipython",
        "JUPYTERLAB_SETTINGS_DIR": "lab/settings",
        "JUPYTERLAB_WORKSPACES_DIR": "lab/workspaces",
    }
    for key, relative in folders.items():
        path = base / relative
        path.mkdir(parents=True, exist_ok=True)
        env[key] = str(path)
    os.chmod(env["XDG_RUNTIME_DIR"], 0o700)
    env.update(
        # Kernels and the servers they start import this checkout, whatever is installed.
        server_env(),
        JUPYTER_PLATFORM_DIRS="1",
        # In a virtualenv jupyter_core puts the environment's folders before the user's: the
        # extension installed there (another checkout's build) would win over this checkout's.
        JUPYTER_PREFER_ENV_PATH="0",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
        PYTHONUNBUFFERED="1",
    )
    return env


# -- the server --------------------------------------------------------------------------------


class JupyterLabError(AssertionError):
    """JupyterLab did not start, answer or stop as it should."""


class JupyterLab:
    """One JupyterLab server; :meth:`start` it, use it, :meth:`stop` it.

    Parameters
    ----------
    base
        An empty folder: the server's home, settings and notebook folder go here.
    app
        ``"jupyterlab"`` (JupyterLab) or ``"notebook"`` (Notebook 7, the same server with its own pages).
    theme
        The JupyterLab theme to start with (``"JupyterLab Light"`` or ``"JupyterLab Dark"``).
    labextension
        Serve this checkout's JupyterLab extension (else it is disabled).
    base_url
        The server's ``ServerApp.base_url`` (a JupyterHub user's ``/user/<name>/``, say).
    server_args
        More command-line options for the server (``--KernelManager.transport=ipc``, say).

    Attributes
    ----------
    root
        The notebook folder (``ServerApp.root_dir``); kernels start in it.
    env
        The environment of the server and its kernels (for the browser too).
    token
        The random token every request carries.
    """

    def __init__(
        self,
        base: Path,
        *,
        app: str = "jupyterlab",
        theme: str | None = None,
        labextension: bool = False,
        base_url: str = "/",
        server_args: tuple[str, ...] = (),
    ) -> None:
        if not (base_url.startswith("/") and base_url.endswith("/")):
            raise ValueError(f"base_url must start and end with '/': {base_url!r}")
        self.app = app
        self.base_url = base_url
        self.server_args = server_args
        self.base = base
        self.root = base / "notebooks"
        self.root.mkdir(parents=True, exist_ok=True)
        self.env = isolated_env(base)
        self.token = secrets.token_hex(24)
        self.port = 0
        self.log_path = base / "jupyterlab.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._seen: dict[tuple[int, int], Proc] = {}
        self._outside: list[Path] = []
        settings = Path(self.env["JUPYTERLAB_SETTINGS_DIR"])
        wanted = dict(_USER_SETTINGS)
        if theme is not None:
            wanted["@jupyterlab/apputils-extension/themes.jupyterlab-settings"] = {"theme": theme}
        for relative, values in wanted.items():
            path = settings / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")
        config = Path(self.env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
        config.write_text(json.dumps(_SERVER_CONFIG), encoding="utf-8")
        if labextension:
            labextensions = Path(self.env["JUPYTER_DATA_DIR"]) / "labextensions"
            labextensions.mkdir(parents=True, exist_ok=True)
            (labextensions / "jupyter_fsbroker").symlink_to(LABEXTENSION, target_is_directory=True)
        else:
            page_config = Path(self.env["JUPYTER_CONFIG_DIR"]) / "labconfig" / "page_config.json"
            page_config.parent.mkdir(parents=True, exist_ok=True)
            page_config.write_text(json.dumps({"disabledExtensions": {"jupyter_fsbroker": True}}), "utf-8")

    @property
    def url(self) -> str:
        """The server's base URL, ending with ``/``."""
        return f"http://127.0.0.1:{self.port}{self.base_url}"

    def command(self) -> list[str]:
        lab_only = [
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            f"--LabApp.user_settings_dir={self.env['JUPYTERLAB_SETTINGS_DIR']}",
            f"--LabApp.workspaces_dir={self.env['JUPYTERLAB_WORKSPACES_DIR']}",
        ]
        return [
            sys.executable,
            "-m",
            self.app,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",  # the server binds a port the OS chooses and writes it down
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.terminals_enabled=False",
            "--ServerApp.allow_root=True",  # containers and CI often run as root
            # A safety net should the test process die without stopping it.
            "--ServerApp.shutdown_no_activity_timeout=600",
            f"--ServerApp.base_url={self.base_url}",
            *(lab_only if self.app == "jupyterlab" else []),
            # window.jupyterapp, for tests that run the application's commands
            f"--{'LabApp' if self.app == 'jupyterlab' else 'JupyterNotebookApp'}.expose_app_in_browser=True",
            *self.server_args,
        ]

    def data_folder(self, name: str = "data") -> Path:
        """A new folder *name* in :attr:`root`, kept in a plain temporary folder and linked from there.

        The dashboard and the sidebar show where a shared folder is: for a folder made here they
        show ``<temp>/sales-…/data``, not the test's own temporary path (screenshots for the docs
        are taken of them). :meth:`stop` removes it.
        """
        outside = Path(tempfile.mkdtemp(prefix="sales-"))
        self._outside.append(outside)
        folder = outside / name
        folder.mkdir()
        link = self.root / name
        link.symlink_to(folder, target_is_directory=True)
        return link

    # -- lifetime ------------------------------------------------------------------------------

    def start(self, timeout: float = STARTUP_TIMEOUT, attempts: int = 3) -> None:
        """Start the server and wait until its REST API answers.

        jupyter_server checks port 0 by binding and closing it before it
        listens, so in a rare race another process can still take the port
        in between: the server then exits saying so, and is started again.
        """
        for attempt in range(attempts):
            self.port = 0
            with self.log_path.open("ab") as log:
                log.write(f"\n--- attempt {attempt + 1}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(
                    self.command(),
                    cwd=self.root,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C in the test's terminal is the test's business
                )
            if self._wait_ready(timeout):
                return
            self._reap()
            if "is already in use" not in self.log_tail():
                break
        raise JupyterLabError(f"JupyterLab did not answer (waited up to {timeout:g} s):\n{self.log_tail()}")

    def _runtime_port(self) -> int:
        """The port the server wrote in its runtime file (``jpserver-<pid>.json``), or 0 before that."""
        assert self.proc is not None
        info = Path(self.env["JUPYTER_RUNTIME_DIR"]) / f"jpserver-{self.proc.pid}.json"
        try:
            port = json.loads(info.read_text(encoding="utf-8"))["port"]
        except (OSError, ValueError, KeyError):  # not written yet, or half written
            return 0
        return int(port)

    def _wait_ready(self, timeout: float) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            self.port = self.port or self._runtime_port()
            try:
                if not self.port:
                    raise OSError("the server has not written its port yet")
                self.api("GET", "api/status", timeout=2)
            except (OSError, JupyterLabError):
                time.sleep(0.2)
                continue
            return True
        return False

    def stop(self) -> list[Proc]:
        """Shut the server down (kernels first), then kill what is left; return what was left.

        Returns the processes the server started (kernels, and what they
        started) that were still alive once the server had exited: each was
        killed, and a test should fail when there are any.
        """
        if self.proc is None:
            self._remove_outside()
            return []
        self.remember_processes()
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, JupyterLabError):  # then the signal in _reap does it
                self.api("POST", "api/shutdown", timeout=10)
            try:
                self.proc.wait(SHUTDOWN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._reap()
        # Kernels take a moment to end the servers they started.
        deadline = time.monotonic() + 10.0
        left = [p for p in self._seen.values() if p.alive()]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [p for p in left if p.alive()]
        for proc in left:
            proc.kill()
        self.proc = None
        self._remove_outside()
        return left

    def _remove_outside(self) -> None:
        for outside in self._outside:
            shutil.rmtree(outside, ignore_errors=True)
        self._outside.clear()

    def _reap(self) -> None:
        """End the server process by signal: TERM, then KILL."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self.remember_processes()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def remember_processes(self) -> list[Proc]:
        """Note every process the server has started until now (:meth:`stop` checks they end)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        found = descendants(self.proc.pid)
        for proc in found:
            self._seen[proc.pid, proc.started] = proc
        return found

    def log_tail(self, chars: int = 6000) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return text[-chars:]

    # -- REST ----------------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0) -> Any:
        """Call the server's REST API; return the decoded JSON answer (``None`` when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:2000]
            raise JupyterLabError(f"{method} /{path}: HTTP {exc.code}: {detail}") from None
        return json.loads(raw) if raw.strip() else None

    def create_notebook(self, name: str, cells: list[str], *, kernel: str = "python3") -> str:
        """Save a Python notebook *name* (in :attr:`root`) made of *cells*, for the kernelspec *kernel*;
        return its path for the URL."""
        notebook = {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {
                "kernelspec": {
                    "name": kernel,
                    "display_name": "Python 3 (ipykernel)",
                    "language": "python",
                },
                "language_info": {"name": "python"},
            },
            "cells": [
                {
                    "cell_type": "code",
                    "id": f"cell-{index}",
                    "metadata": {},
                    "execution_count": None,
                    "outputs": [],
                    "source": source,
                }
                for index, source in enumerate(cells)
            ],
        }
        model = self.api(
            "PUT", f"api/contents/{name}", {"type": "notebook", "format": "json", "content": notebook}
        )
        return str(model["path"])

    def lab_url(self, path: str) -> str:
        """The URL that opens *path* in JupyterLab or Notebook 7 (with the token, so no login page)."""
        if self.app == "notebook":
            return f"{self.url}notebooks/{path}?token={self.token}"
        return f"{self.url}lab/tree/{path}?token={self.token}"

    def tree_url(self) -> str:
        """The URL of Notebook 7's file browser (with the token, so no login page)."""
        return f"{self.url}tree?token={self.token}"
