"""The panel protocol's messages, as the kernel reads and writes them.

The contract is ``labextension/PROTOCOL.md``; this module is its Python mirror
(the JupyterLab extension's is ``labextension/src/protocol.ts``). It builds the
messages the kernel sends and checks the ones it receives; it never sends
anything, never touches a broker, and imports nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACTIONS",
    "ANNOUNCE_ID",
    "ANNOUNCE_MIME",
    "PROTOCOL_VERSION",
    "TARGET",
    "Approval",
    "Incoming",
    "ProtocolError",
    "closing",
    "error",
    "parse",
    "probe",
    "result",
    "snapshot",
]

#: The version of the panel protocol this kernel speaks; every message carries it.
PROTOCOL_VERSION = 1

#: The comm target registered at ``%load_ext jupyter_fsbroker``.
TARGET = "jupyter_fsbroker.panel"

#: The display id and MIME type of the announcement the kernel publishes when the extension loads:
#: an ``update_display_data`` of a display that was never shown, so no frontend renders it, while
#: the panels see it on IOPub (read while a cell still blocks) and open their comms at once.
ANNOUNCE_ID = "jupyter_fsbroker.announce"
ANNOUNCE_MIME = "application/vnd.jupyter-fsbroker.announce+json"

#: The actions a panel may ask for.
ACTIONS = (
    "disconnect",
    "revoke",
    "force_unlock",
    "answer_consent",
    "sign_out",
    "sign_in_response",
    "cancel_call",
)

_OPERATIONS = ("read", "write", "delete", "watch")

#: The longest consent duration a panel may ask for, in seconds (a day).
_MAX_DURATION = 86_400.0


class ProtocolError(ValueError):
    """A message the kernel cannot act on.

    Attributes
    ----------
    code
        ``version_mismatch`` or ``bad_message``.
    """

    def __init__(self, message: str, code: str = "bad_message") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Approval:
    """One path of a consent answer and the operations approved on it."""

    path: str
    operations: tuple[str, ...]


@dataclass(frozen=True)
class Incoming:
    """A checked message from a panel.

    Attributes
    ----------
    type
        ``hello``, ``refresh`` or ``action``.
    id
        The action's id, echoed in its result.
    action
        One of :data:`ACTIONS` (actions only).
    target
        What the action is about: a connection, grant, lock, consent or call id.
    approved
        The paths and operations approved (``answer_consent``; empty: deny).
    duration
        Seconds the consent's grants last; ``None``: as long as the connection.
    client
        Who the panel is (``jupyterlab``, ``notebook``), from ``hello``.
    origin, base_url, callback_page
        Where the panel's page is (``location.origin``, JupyterLab's base URL ending in ``/``)
        and whether its extension serves the sign-in callback page, from ``hello``.
    address
        The address a sign-in's redirect ended on (``sign_in_response``); never echoed.
    """

    type: str
    id: str = ""
    action: str = ""
    target: str = ""
    approved: tuple[Approval, ...] = ()
    duration: float | None = None
    client: str = ""
    origin: str = ""
    base_url: str = ""
    callback_page: bool = False
    address: str = field(default="", repr=False)


_TARGET_FIELDS = {
    "disconnect": "connection",
    "revoke": "grant",
    "force_unlock": "lock",
    "answer_consent": "consent",
    "sign_out": "connection",
    "sign_in_response": "signIn",
    "cancel_call": "call",
}


def _string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"{key!r} must be a non-empty string")
    return value


def _approvals(value: object) -> tuple[Approval, ...]:
    if not isinstance(value, list):
        raise ProtocolError("'approved' must be a list")
    approvals = []
    for entry in value:
        if not isinstance(entry, dict):
            raise ProtocolError("each approval must be an object")
        path = _string(entry, "path")
        ops = entry.get("operations")
        if not isinstance(ops, list) or not all(isinstance(op, str) and op in _OPERATIONS for op in ops):
            raise ProtocolError(f"the operations of {path!r} must be some of {', '.join(_OPERATIONS)}")
        approvals.append(Approval(path, tuple(op for op in _OPERATIONS if op in ops)))
    return tuple(approvals)


def _duration(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= _MAX_DURATION:
        raise ProtocolError(f"'duration' must be null or between 0 and {_MAX_DURATION:g} seconds")
    return float(value)


def _hello(data: dict[str, Any]) -> Incoming:
    """``hello``: who the panel is and, optionally, where its page is (an unusable one is ignored)."""
    client, origin, base_url = data.get("client"), data.get("origin"), data.get("baseUrl")
    page = (
        isinstance(origin, str)
        and origin.startswith(("http://", "https://"))
        and isinstance(base_url, str)
        and base_url.startswith("/")
    )
    return Incoming(
        "hello",
        client=client if isinstance(client, str) else "",
        origin=str(origin) if page else "",
        base_url=str(base_url) if page else "",
        callback_page=page and data.get("callbackPage") is True,
    )


def parse(data: object) -> Incoming:
    """Check a message from a panel.

    Raises
    ------
    ProtocolError
        It speaks another version (``code == "version_mismatch"``), or is not
        a message of this protocol.
    """
    if not isinstance(data, dict):
        raise ProtocolError("a message must be an object")
    version = data.get("version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"this kernel's jupyter_fsbroker speaks panel protocol {PROTOCOL_VERSION}, the panel {version!r}",
            "version_mismatch",
        )
    kind = data.get("type")
    if kind == "hello":
        return _hello(data)
    if kind == "refresh":
        return Incoming("refresh")
    if kind != "action":
        raise ProtocolError(f"unknown message type {kind!r}")
    ident = _string(data, "id")
    action = data.get("action")
    if action not in _TARGET_FIELDS:
        raise ProtocolError(f"unknown action {action!r}")
    target = _string(data, _TARGET_FIELDS[action])
    if action == "sign_in_response":
        return Incoming("action", ident, action, target, address=_string(data, "address"))
    if action != "answer_consent":
        return Incoming("action", ident, action, target)
    return Incoming(
        "action",
        ident,
        action,
        target,
        approved=_approvals(data.get("approved")),
        duration=_duration(data.get("duration")),
    )


def snapshot(seq: int, state: dict[str, Any]) -> dict[str, Any]:
    """The full state (see ``PROTOCOL.md``), numbered so a panel drops an overtaken one."""
    return {"version": PROTOCOL_VERSION, "type": "snapshot", "seq": seq, "state": state}


def result(ident: str, ok: bool, message: str) -> dict[str, Any]:
    """The outcome of the action *ident*, in words for the user."""
    return {"version": PROTOCOL_VERSION, "type": "result", "id": ident, "ok": ok, "message": message}


def error(code: str, message: str) -> dict[str, Any]:
    """A message the kernel could not act on (``version_mismatch`` says which versions it speaks)."""
    body: dict[str, Any] = {"version": PROTOCOL_VERSION, "type": "error", "code": code, "message": message}
    if code == "version_mismatch":
        body["supported"] = [PROTOCOL_VERSION]
    return body


def probe(url: str) -> dict[str, Any]:
    """Ask a panel on a loopback page to fetch *url* (``no-cors``): does its browser reach the kernel?"""
    return {"version": PROTOCOL_VERSION, "type": "probe", "url": url}


def announce() -> dict[str, Any]:
    """The announcement's content under :data:`ANNOUNCE_MIME`: the protocol's version and target."""
    return {"version": PROTOCOL_VERSION, "type": "announce", "target": TARGET}


def closing(reason: str) -> dict[str, Any]:
    """The data of the ``comm_close`` the kernel sends when its broker goes away."""
    return {"version": PROTOCOL_VERSION, "type": "closing", "reason": reason}
