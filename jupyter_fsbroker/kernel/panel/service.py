"""The kernel side of the JupyterLab panel: the ``jupyter_fsbroker.panel`` comm target.

:class:`PanelService` is started by ``%load_ext jupyter_fsbroker`` in a kernel
and closed when the extension unloads. Each panel (a JupyterLab or Notebook 7
page) opens its own comm to the target; the service answers it with snapshots
of the broker (:mod:`.state`), re-sent at most every
:data:`REFRESH_INTERVAL` seconds while things change, and carries out the
panel's actions — Disconnect, Revoke, Force release, answering a consent,
cancelling a call in flight —
through the notebook broker's public API, and the sign-ins' Sign out and relayed
redirects (:mod:`..sign_ins`). The messages are
``labextension/PROTOCOL.md``'s (:mod:`.messages`).

Threading: JupyterLab sends a comm's messages on a kernel subshell, so the
handlers run on that subshell's thread while the main shell may be blocked in
a cell; they only read thread-safe state and call methods that return at once
(closing a connection, revoking, resolving a consent future). Snapshots go out
from the notebook's views' thread (coalesced there: the broker's threads that
report a change pay a queue ``put``), in a context detached from any request, and
each comm's routing is freed so that nothing pins it to the main shell
(:mod:`..ipykernel_compat`). The service starts no thread. Nothing here decides
what a server may do.

Starting the service announces it on IOPub (:data:`.messages.ANNOUNCE_ID`): a
panel opens its comm then, while the cell that loaded the extension may still
block in a call, instead of waiting for that cell to end.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ...console.status import grant_holder
from ...core.consent import ConsentDecision
from ...core.errors import BrokerError, FilesError
from .. import ipykernel_compat as ipk
from ..sign_ins import PanelPage
from . import messages as proto
from .state import PanelState

__all__ = ["REFRESH_INTERVAL", "PanelService"]

log = logging.getLogger(__name__)

#: Seconds between two snapshots while the state keeps changing (and while a connection is in transit).
REFRESH_INTERVAL = 0.25


def _announce() -> None:
    """Publish the announcement (:data:`.messages.ANNOUNCE_ID`) from the running cell."""
    from IPython.display import publish_display_data

    publish_display_data(  # type: ignore[no-untyped-call]
        {proto.ANNOUNCE_MIME: proto.announce()}, transient={"display_id": proto.ANNOUNCE_ID}, update=True
    )


class _Peer:
    """One panel's comm, and whether its last message was handled on a subshell."""

    def __init__(self, comm: Any, client: str) -> None:
        self.comm = comm
        self.client = client
        self.used_subshell = ipk.on_subshell()


class PanelService:
    """Serves the panels of one notebook broker over the ``jupyter_fsbroker.panel`` comm target.

    Parameters
    ----------
    broker
        The notebook broker (a :class:`~..notebook.NotebookBroker`); the
        snapshots go out on its views' thread.
    kernel
        The ipykernel kernel whose comm manager gets the target.

    Notes
    -----
    Use :meth:`start`: it returns ``None`` outside a kernel.
    """

    def __init__(self, broker: Any, kernel: Any) -> None:
        self._broker = broker
        self._kernel = kernel
        self._lock = threading.Lock()
        self._peers: dict[str, _Peer] = {}
        self._seq = 0
        self._closed = False
        self._views = broker.views_thread
        self._state = PanelState(broker, self.schedule)
        ipk.register_comm_target(kernel, proto.TARGET, self._open)
        broker.sign_ins.set_prober(self.probe)
        # Now, not when the cell ends: a cell that loads the extension and then blocks in a call
        # must already have the panels, their badge and their consent dialog.
        _announce()

    @classmethod
    def start(cls, broker: Any) -> PanelService | None:
        """Register the comm target of *broker*'s panels; ``None`` where there is no kernel."""
        kernel = ipk.get_kernel()
        if getattr(kernel, "comm_manager", None) is None:
            return None
        return cls(broker, kernel)

    @property
    def panels(self) -> int:
        """How many panels are attached now."""
        with self._lock:
            return len(self._peers)

    # -- comms (the shell or subshell thread that received the message) -----------------------

    def _open(self, comm: Any, msg: dict[str, Any]) -> None:
        ipk.free_comm(comm)
        try:
            hello = proto.parse(msg.get("content", {}).get("data"))
            if hello.type != "hello":
                raise proto.ProtocolError("the first message must be hello")
        except proto.ProtocolError as exc:
            # Say why in the close itself: a panel of another version reads it there.
            comm.close(data=proto.error(exc.code, str(exc)))
            return
        peer = _Peer(comm, hello.client)
        comm.on_msg(lambda message: self._message(peer, message))
        comm.on_close(lambda message: self._forget(peer))
        with self._lock:
            if self._closed:
                comm.close(data=proto.closing(""))  # the panel says "closed" itself
                return
            self._peers[comm.comm_id] = peer
        if hello.origin:  # where the sign-ins' redirect may come back (see ..sign_ins)
            page = PanelPage(hello.origin, hello.base_url, hello.callback_page)
            self._broker.sign_ins.panel_attached(comm.comm_id, page)
        self._send(peer, self._snapshot(peer))

    def _message(self, peer: _Peer, msg: dict[str, Any]) -> None:
        peer.used_subshell = ipk.on_subshell()
        try:
            incoming = proto.parse(msg.get("content", {}).get("data"))
        except proto.ProtocolError as exc:
            self._send(peer, proto.error(exc.code, str(exc)))
            return
        if incoming.type == "action":
            try:
                ok, text = self._act(incoming)
            except Exception as exc:  # a broken action must answer, not hang the panel
                log.exception("panel action %s failed", incoming.action)
                ok, text = False, f"{incoming.action} failed: {exc}"
            self._send(peer, proto.result(incoming.id, ok, text))
        self._send(peer, self._snapshot(peer))
        self.schedule()  # the other panels follow

    def _forget(self, peer: _Peer) -> None:
        with self._lock:
            self._peers.pop(peer.comm.comm_id, None)
        self._broker.sign_ins.panel_detached(peer.comm.comm_id)

    # -- actions -------------------------------------------------------------------------------

    def _act(self, incoming: proto.Incoming) -> tuple[bool, str]:
        broker = self._broker
        if broker.closed:
            return False, "The file broker is closed."
        if incoming.action == "disconnect":
            conn = next((c for c in broker.connections.values() if c.id == incoming.target), None)
            if conn is None:
                return False, "That connection is gone."
            if conn.closed:
                return True, f"{conn.name} was already disconnected."
            conn.close()  # the kill switch: returns at once, everything of the connection ends now
            return True, f"Disconnected {conn.name}."
        if incoming.action == "revoke":
            try:
                grant = broker.core.grants.revoke(incoming.target)
            except FilesError:
                return False, "That grant was already gone."
            return True, f"Revoked {', '.join(grant.operations)} on {grant.path} for {grant_holder(grant)}."
        if incoming.action == "sign_out":
            return self._sign_out(incoming.target)
        if incoming.action == "sign_in_response":
            return broker.sign_ins.respond(incoming.target, incoming.address)  # type: ignore[no-any-return]
        if incoming.action == "cancel_call":
            call = broker.cancel_call(incoming.target)
            if call is None:
                return False, "That call already ended."
            return True, f"Cancelling {call.server} · {call.tool}."
        if incoming.action == "force_unlock":
            try:
                broker.force_unlock(incoming.target)
            except (FilesError, BrokerError):
                return False, "That lock was already released."
            return True, "Lock released."
        return self._answer(incoming)

    def _sign_out(self, target: str) -> tuple[bool, str]:
        """Sign out of the connection whose id (or placeholder's id, see :mod:`.state`) is *target*."""
        broker = self._broker
        conn = next((c for c in broker.connections.values() if c.id == target), None)
        name = conn.name if conn is not None else self._state.signing_in_name(target)
        if name is None:
            return False, "That connection is gone."
        broker.sign_out(name)
        return True, f"Signed out of {name}."

    def _answer(self, incoming: proto.Incoming) -> tuple[bool, str]:
        request = next((r for r in self._state.pending() if r.id == incoming.target), None)
        if request is None:
            outcome = self._state.outcome_of(incoming.target)
            said = f": {outcome.text}" if outcome is not None else ""
            return False, f"That request no longer waits{said}."
        asked = {item.path: item.grantable(request.operations_of(item)) for item in request.items}
        chosen = {
            a.path: tuple(op for op in a.operations if op in asked[a.path])
            for a in incoming.approved
            if a.path in asked
        }
        chosen = {path: ops for path, ops in chosen.items() if ops}
        if len(set(chosen.values())) <= 1:  # the same operations on every path: a flat answer
            decision = ConsentDecision(tuple(chosen), next(iter(chosen.values()), ()), incoming.duration)
        else:
            decision = ConsentDecision.per_path(chosen, duration=incoming.duration)
        if not self._state.answer(request, decision):
            outcome = self._state.outcome_of(request.id)
            said = f": {outcome.text}" if outcome is not None else ""
            return False, f"The notebook answered first{said}."
        outcome = self._state.outcome_of(request.id)
        return True, outcome.text if outcome is not None else "Answered."

    # -- snapshots -----------------------------------------------------------------------------

    def _snapshot(self, peer: _Peer) -> dict[str, Any]:
        state = self._state.snapshot(used_subshell=peer.used_subshell)
        with self._lock:
            self._seq += 1
            return proto.snapshot(self._seq, state)

    def _send(self, peer: _Peer, data: dict[str, Any]) -> None:
        try:
            # Detached: a publish from a request's context would pin the comm's routing to its shell.
            ipk.run_detached(peer.comm.send, data)
        except Exception:
            log.debug("could not send to panel %s", peer.comm.comm_id, exc_info=True)

    def probe(self, url: str) -> None:
        """Ask every panel to fetch *url* (a panel on a loopback page does; see ..loopback_probe)."""
        with self._lock:
            peers = [] if self._closed else list(self._peers.values())
        for peer in peers:
            self._send(peer, proto.probe(url))

    def schedule(self) -> None:
        """Send every panel a snapshot soon (coalesced: at most one per interval). Never blocks."""
        with self._lock:
            if self._closed or not self._peers:
                return
        self._views.coalesce(self, self._broadcast, REFRESH_INTERVAL)

    def _broadcast(self) -> None:
        with self._lock:
            if self._closed:
                return
            peers = list(self._peers.values())
        try:
            # Asked before the snapshots are taken: a connection that ends (closing → closed, which
            # comes with no event) while they are sent was still in transit, so one more follows.
            again = self._state.transitional()
            for peer in peers:
                self._send(peer, self._snapshot(peer))
        except Exception:  # a broken snapshot must never break the broker's threads
            log.exception("the panel snapshot failed")
            again = False
        if again:
            self.schedule()

    # -- lifetime ------------------------------------------------------------------------------

    def close(self, reason: str = "") -> None:
        """Unregister the target and close every panel's comm, saying *reason*. Idempotent.

        With no *reason*, the panel says only that the broker was closed.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            peers, self._peers = list(self._peers.values()), {}
        ipk.unregister_comm_target(self._kernel, proto.TARGET, self._open)
        self._broker.sign_ins.set_prober(None)
        self._state.close()
        for peer in peers:
            try:
                ipk.run_detached(peer.comm.close, data=proto.closing(reason))
            except Exception:
                log.debug("could not close panel %s", peer.comm.comm_id, exc_info=True)
