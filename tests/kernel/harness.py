"""A real IPython kernel driven over ZMQ, the way a notebook frontend drives it.

:class:`Kernel` starts ``ipykernel`` with ``jupyter_client`` in an isolated
home (temporary ``HOME``, XDG folders and ``IPYTHONDIR``), executes cells,
answers ``input_request``\\ s, reads IOPub, keeps the state of every widget it
has seen (from ``comm_open`` and ``update`` messages), and clicks buttons by
sending ``comm_msg`` — optionally on a kernel subshell, as JupyterLab does.

Nothing here sleeps to wait: every wait reads the kernel's channels with a
deadline and fails with a message naming what did not happen.
"""

from __future__ import annotations

import os
import queue
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client import BlockingKernelClient, KernelManager

WIDGET_TARGET = "jupyter.widget"


@dataclass
class Result:
    """What one execute request produced."""

    msg_id: str
    stdout: str = ""
    stderr: str = ""
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] | None = None
    done: bool = False

    @property
    def text(self) -> str:
        """``text/plain`` of the cell's result, or ``""``."""
        if self.result is None:
            return ""
        return str(self.result.get("text/plain", ""))

    @property
    def failure(self) -> dict[str, Any] | None:
        """The error (``ename``, ``evalue``, ``traceback``), from IOPub or the reply; ``None`` if none.

        IPython reports a ``UsageError`` on stderr and in the reply only.
        """
        if self.error is not None:
            return self.error
        if self.reply is not None and self.reply.get("status") == "error":
            return self.reply
        return None

    def check(self) -> Result:
        failure = self.failure
        if failure is not None:
            trace = "\n".join(failure.get("traceback", []))
            raise AssertionError(
                f"the cell failed: {failure.get('ename')}: {failure.get('evalue')}\n{trace}\n{self.stderr}"
            )
        return self


@dataclass
class Widget:
    comm_id: str
    state: dict[str, Any]
    closed: bool = False
    updates: int = 0

    @property
    def classes(self) -> list[str]:
        return list(self.state.get("_dom_classes", []))


def isolated_env(base: Path) -> dict[str, str]:
    """Environment variables giving a kernel its own home, caches, runtime and IPython profile.

    The broker's lock files are not moved by them: they go to the user account's lock folder
    (``default_lock_dir``), shared with every other process of the user, as they must be.
    """
    folders = {}
    for name in ("home", "cache", "data", "config", "runtime", "ipython"):
        path = base / name
        path.mkdir(parents=True, exist_ok=True)
        folders[name] = str(path)
    os.chmod(folders["runtime"], 0o700)
    env = dict(os.environ)
    env.update(
        HOME=folders["home"],
        XDG_CACHE_HOME=folders["cache"],
        XDG_DATA_HOME=folders["data"],
        XDG_CONFIG_HOME=folders["config"],
        XDG_RUNTIME_DIR=folders["runtime"],
        IPYTHONDIR=folders["ipython"],
        JUPYTER_PLATFORM_DIRS="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    env.pop("JPY_PARENT_PID", None)
    return env


class Kernel:
    """One kernel and a blocking client on all its channels."""

    def __init__(
        self, env: dict[str, str], cwd: Path, *, startup_timeout: float = 120.0, log: Path | None = None
    ) -> None:
        self.env = env
        self.cwd = cwd
        # A graceful shutdown gets as long as a start: jupyter_client's default (5 s, SIGTERM after
        # half of it) is shorter than the exit of a kernel that imported mcp and widgets takes on a
        # loaded machine (its final garbage collection alone: 1-3 s), and a test of what the
        # process does when it exits would see it cut short.
        self.km = KernelManager(kernel_name="python3", shutdown_wait_time=startup_timeout)
        # Cells run at once on the main shell and a subshell race for the same history row in
        # IPython's SQLite history and print "Session/line number was not unique" into a cell's
        # output; no test reads the history.
        # With *log*, the process's own stdout and stderr (what does not go to IOPub) go there.
        sink = None if log is None else log.open("ab")
        output: dict[str, Any] = {} if sink is None else {"stdout": sink, "stderr": subprocess.STDOUT}
        try:
            self.km.start_kernel(
                env=env, cwd=str(cwd), extra_arguments=["--HistoryManager.enabled=False"], **output
            )
        finally:
            if sink is not None:
                sink.close()  # the kernel has its own copy
        self.kc: BlockingKernelClient = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=startup_timeout)
        self.results: dict[str, Result] = {}
        self.widgets: dict[str, Widget] = {}
        self.iopub_log: list[dict[str, Any]] = []
        self.stdin_requests: queue.Queue[dict[str, Any]] = queue.Queue()
        #: Comm ids a test has dealt with already (so a later one is not mistaken for it).
        self.seen: set[str] = set()
        self._replies: dict[str, dict[str, Any]] = {}
        self._statuses: defaultdict[str, list[str]] = defaultdict(list)

    # -- channels ------------------------------------------------------------------------------

    def _record(self, msg: dict[str, Any]) -> None:
        self.iopub_log.append(msg)
        kind = msg["msg_type"]
        content = msg["content"]
        parent = msg.get("parent_header", {}).get("msg_id")
        if kind in ("comm_open", "comm_msg", "comm_close"):
            self._record_comm(kind, content)
        result = self.results.get(parent) if parent else None
        if kind == "status" and parent:
            self._statuses[parent].append(content["execution_state"])
        if result is None:
            return
        if kind == "stream":
            if content["name"] == "stdout":
                result.stdout += content["text"]
            else:
                result.stderr += content["text"]
        elif kind == "error":
            result.error = content
        elif kind == "execute_result":
            result.result = content["data"]
        elif kind == "display_data":
            result.displays.append(content)
        elif kind == "status" and content["execution_state"] == "idle":
            result.done = True

    def _record_comm(self, kind: str, content: dict[str, Any]) -> None:
        comm_id = content.get("comm_id")
        if not comm_id:
            return
        if kind == "comm_open":
            if content.get("target_name") == WIDGET_TARGET:
                state = dict(content.get("data", {}).get("state", {}))
                self.widgets[comm_id] = Widget(comm_id, state)
            return
        widget = self.widgets.get(comm_id)
        if widget is None:
            return
        if kind == "comm_close":
            widget.closed = True
            return
        data = content.get("data", {})
        if data.get("method") in ("update", "echo_update") and isinstance(data.get("state"), dict):
            widget.state.update(data["state"])
            widget.updates += 1

    def pump(self, timeout: float) -> bool:
        """Read whatever arrives within *timeout* seconds on IOPub, shell and stdin; whether anything did."""
        got = False
        deadline = time.monotonic() + timeout
        while True:
            for channel, handler in (
                (self.kc.shell_channel, self._on_shell),
                (self.kc.stdin_channel, self.stdin_requests.put),
                (self.kc.iopub_channel, self._record),
            ):
                while channel.msg_ready():
                    handler(channel.get_msg(timeout=0))
                    got = True
            if got:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                msg = self.kc.iopub_channel.get_msg(timeout=min(remaining, 0.05))
            except queue.Empty:
                continue
            self._record(msg)
            return True

    def drain(self, seconds: float) -> None:
        """Read the channels for *seconds* (a bounded look at what arrives meanwhile)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self.pump(remaining)

    def _on_shell(self, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        if parent:
            self._replies[parent] = msg
            result = self.results.get(parent)
            if result is not None:
                result.reply = msg["content"]

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        """Pump the channels until *condition()* is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            self.pump(min(remaining, 0.2))

    # -- cells ---------------------------------------------------------------------------------

    def submit(self, code: str, *, allow_stdin: bool = False, subshell_id: str | None = None) -> Result:
        """Send an execute request; return its (growing) result at once."""
        msg = self.kc.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": allow_stdin,
                "stop_on_error": True,
            },
        )
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        result = Result(msg["header"]["msg_id"])
        self.results[result.msg_id] = result
        self.kc.shell_channel.send(msg)
        return result

    def wait(self, result: Result, timeout: float = 60.0) -> Result:
        """Wait until the request's reply and its idle status arrived."""
        self.wait_for(lambda: result.done and result.reply is not None, timeout, f"the cell {result.msg_id}")
        return result

    def run(self, code: str, timeout: float = 60.0, *, allow_stdin: bool = False) -> Result:
        """Execute *code* and wait; fail on an error."""
        return self.wait(self.submit(code, allow_stdin=allow_stdin), timeout).check()

    def run_fail(self, code: str, timeout: float = 60.0) -> dict[str, Any]:
        """Execute *code*, which must raise; return the error content."""
        result = self.wait(self.submit(code), timeout)
        failure = result.failure
        assert failure is not None, f"expected an error from {code!r}, got {result.stdout!r}"
        return failure

    def value(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate *expression* in the kernel and return it (it must be a literal)."""
        import ast

        out = self.run(f"print(repr({expression}))", timeout)
        return ast.literal_eval(out.stdout.strip())

    # -- widgets -------------------------------------------------------------------------------

    def find_widgets(self, dom_class: str, *, open_only: bool = True) -> list[Widget]:
        return [w for w in self.widgets.values() if dom_class in w.classes and not (open_only and w.closed)]

    def wait_widget(self, dom_class: str, timeout: float = 30.0, *, exclude: Iterable[str] = ()) -> Widget:
        """The first open widget with *dom_class* not in *exclude* (comm ids), once it appears."""
        skip = set(exclude)

        def found() -> Widget | None:
            for widget in self.find_widgets(dom_class):
                if widget.comm_id not in skip:
                    return widget
            return None

        widget: Widget = self.wait_for(found, timeout, f"a widget with class {dom_class!r}")
        return widget

    def child(self, parent: Widget, dom_class: str) -> Widget:
        """The descendant of *parent* that has *dom_class*."""
        for widget in self.descendants(parent):
            if dom_class in widget.classes:
                return widget
        raise AssertionError(f"no widget with class {dom_class!r} below {parent.comm_id}")

    def descendants(self, parent: Widget) -> list[Widget]:
        out: list[Widget] = []
        stack = [parent]
        seen: set[str] = set()
        while stack:
            widget = stack.pop()
            if widget.comm_id in seen:
                continue
            seen.add(widget.comm_id)
            out.append(widget)
            for ref in widget.state.get("children", []) or []:
                if isinstance(ref, str) and ref.startswith("IPY_MODEL_"):
                    child = self.widgets.get(ref.removeprefix("IPY_MODEL_"))
                    if child is not None:
                        stack.append(child)
        return out

    def text_of(self, parent: Widget) -> str:
        """The ``value`` and ``description`` of *parent* and everything below it, joined."""
        parts = []
        for widget in self.descendants(parent):
            for key in ("description", "value"):
                value = widget.state.get(key)
                if isinstance(value, str) and value:
                    parts.append(value)
        return "\n".join(parts)

    def click(self, widget: Widget | str, *, subshell_id: str | None = None) -> None:
        """Click a button the way a frontend does: a custom ``click`` comm message."""
        comm_id = widget if isinstance(widget, str) else widget.comm_id
        msg = self.kc.session.msg(
            "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        )
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        self.kc.shell_channel.send(msg)

    # -- subshells, stdin, lifetime ------------------------------------------------------------

    def create_subshell(self, timeout: float = 60.0) -> str:
        """Create a kernel subshell on the control channel, as JupyterLab does for comms."""
        msg = self.kc.session.msg("create_subshell_request", {})
        self.kc.control_channel.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.kc.control_channel.get_msg(timeout=max(0.01, deadline - time.monotonic()))
            if reply.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]:
                return str(reply["content"]["subshell_id"])

    def wait_stdin_request(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next ``input_request`` from the kernel."""
        got: dict[str, Any] = self.wait_for(
            lambda: None if self.stdin_requests.empty() else self.stdin_requests.get(),
            timeout,
            "an input_request",
        )
        return got

    def answer_stdin(self, value: str) -> None:
        self.kc.input(value)

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def shutdown(self, *, now: bool = False) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=now)

    @property
    def pid(self) -> int:
        provisioner = self.km.provisioner
        assert provisioner is not None
        return int(provisioner.process.pid)  # type: ignore[attr-defined]
