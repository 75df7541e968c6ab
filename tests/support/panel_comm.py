"""The JupyterLab panel's side of its comm to a kernel, played by a test.

:class:`Panel` opens a comm to ``jupyter_fsbroker.panel`` the way the extension does
(optionally on a kernel subshell, as JupyterLab 4.6 sends comms), reads the snapshots and
results the kernel sends on it, and sends actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jupyter_fsbroker.kernel.panel import messages as proto
from tests.kernel.harness import Kernel

__all__ = ["Panel"]


class Panel:
    """One panel's comm to the kernel, and everything the kernel sent on it."""

    def __init__(self, kernel: Kernel, *, subshell_id: str | None = None, version: int = 1) -> None:
        self.kernel = kernel
        self.subshell_id = subshell_id
        msg = kernel.kc.session.msg(
            "comm_open",
            {
                "comm_id": f"panel-{len(kernel.iopub_log)}-{id(self)}",
                "target_name": proto.TARGET,
                "data": {"version": version, "type": "hello", "client": "test"},
            },
        )
        self.comm_id = msg["content"]["comm_id"]
        self._send(msg)
        self._actions = 0

    def _send(self, msg: dict[str, Any]) -> None:
        if self.subshell_id is not None:
            msg["header"]["subshell_id"] = self.subshell_id
        self.kernel.kc.shell_channel.send(msg)

    def messages(self) -> list[dict[str, Any]]:
        """What the kernel sent on this comm (``comm_msg`` data), oldest first."""
        return [
            m["content"]["data"]
            for m in self.kernel.iopub_log
            if m["msg_type"] == "comm_msg" and m["content"].get("comm_id") == self.comm_id
        ]

    def closed(self) -> dict[str, Any] | None:
        """The data of the kernel's ``comm_close``, once it closed the comm."""
        for m in self.kernel.iopub_log:
            if m["msg_type"] == "comm_close" and m["content"].get("comm_id") == self.comm_id:
                return dict(m["content"].get("data") or {})
        return None

    def state(
        self, condition: Callable[[dict[str, Any]], Any] = bool, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The newest snapshot's state once *condition(state)* holds."""

        def newest() -> dict[str, Any] | None:
            snapshots = [m for m in self.messages() if m.get("type") == "snapshot"]
            if snapshots and condition(snapshots[-1]["state"]):
                return dict(snapshots[-1]["state"])
            return None

        found: dict[str, Any] = self.kernel.wait_for(newest, timeout, "a snapshot that shows it")
        return found

    def send(self, data: dict[str, Any]) -> None:
        self._send(self.kernel.kc.session.msg("comm_msg", {"comm_id": self.comm_id, "data": data}))

    def act(self, action: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Send an action; return its result message."""
        self._actions += 1
        ident = f"a{self._actions}"
        self.send({"version": 1, "type": "action", "id": ident, "action": action, **fields})

        def answered() -> dict[str, Any] | None:
            return next((m for m in self.messages() if m.get("type") == "result" and m["id"] == ident), None)

        result: dict[str, Any] = self.kernel.wait_for(answered, timeout, f"the result of {action}")
        return result
