"""A real kernel as the kernel tests start it: its own home, a notebook folder, the extension loaded.

:func:`start_notebook_kernel` starts one (:class:`tests.kernel.harness.Kernel`) in a folder of
its own with :func:`make_workdir`'s notebook folder; :func:`load` loads the extension in it and
shares ``./data``; :func:`saved_notebook` saves what it ran as a frontend saves a notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tests.kernel.harness import Kernel, isolated_env

from .env import REPO, server_env

__all__ = ["SALES_CSV", "load", "make_workdir", "saved_notebook", "start_notebook_kernel"]

SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"


def make_workdir(base: Path) -> Path:
    """A notebook folder with ``data/sales.csv`` and ``data/raw/``.

    Stdio servers get a clean environment (no ``PYTHONPATH``) and start in this
    folder: the link to this checkout's package here makes ``python -m
    jupyter_fsbroker...`` run this checkout's server, as the kernel runs its broker.
    """
    work = base / "work"
    (work / "data" / "raw").mkdir(parents=True)
    (work / "data" / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    (work / "data" / "raw" / "one.csv").write_text(SALES_CSV, encoding="utf-8")
    (work / "jupyter_fsbroker").symlink_to(REPO / "jupyter_fsbroker", target_is_directory=True)
    return work


def start_notebook_kernel(
    base: Path, *, ipython_config: str | None = None, log: Path | None = None
) -> Kernel:
    """A kernel with its home and notebook folder under *base*; the caller shuts it down.

    With *log*, the kernel process's own stdout and stderr are written to that file.
    """
    env = isolated_env(base)
    env.update(server_env())
    if ipython_config is not None:
        profile = Path(env["IPYTHONDIR"]) / "profile_default"
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "ipython_config.py").write_text(ipython_config, encoding="utf-8")
    return Kernel(env, make_workdir(base), log=log)


def load(kernel: Kernel, *, consent_timeout: float | None = None) -> None:
    """``%load_ext jupyter_fsbroker``, share ``./data`` as ``data``, and name the broker ``broker``."""
    cells = ["%load_ext jupyter_fsbroker", "import jupyter_fsbroker as fsb", "broker = fsb.get_broker()"]
    cells.append('broker.add_root("./data", name="data")')
    if consent_timeout is not None:
        cells.append(f"%config FSBroker.consent_timeout = {consent_timeout}")
    kernel.run("\n".join(cells))


#: The IOPub messages a notebook keeps as a cell's outputs.
_OUTPUTS = ("stream", "display_data", "execute_result", "error")


def saved_notebook(kernel: Kernel, path: Path) -> str:
    """Save what *kernel* ran as a notebook at *path* (nbformat), as a frontend saves one; its text.

    A code cell for each ``execute_input`` on IOPub, with the outputs published for it, and the
    state of every widget the kernel opened in the notebook's metadata, as JupyterLab's "Save
    Widget State Automatically" keeps it.
    """
    notebook = nbformat.v4.new_notebook()
    cells: dict[str, nbformat.NotebookNode] = {}
    for msg in kernel.iopub_log:
        parent = msg.get("parent_header", {}).get("msg_id")
        if msg["msg_type"] == "execute_input":
            cells[parent] = nbformat.v4.new_code_cell(msg["content"]["code"])
            notebook.cells.append(cells[parent])
        elif msg["msg_type"] in _OUTPUTS and parent in cells:
            cells[parent].outputs.append(nbformat.v4.output_from_msg(msg))
    models = {
        comm_id: {
            "model_name": widget.state.get("_model_name"),
            "model_module": widget.state.get("_model_module"),
            "model_module_version": widget.state.get("_model_module_version"),
            "state": widget.state,
        }
        for comm_id, widget in kernel.widgets.items()
    }
    notebook.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": models}
    }
    nbformat.write(notebook, path)
    return path.read_text(encoding="utf-8")
