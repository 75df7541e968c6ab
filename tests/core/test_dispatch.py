"""The dispatch's envelope: what a request that meets a part of the broker closing under it answers."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import PermissionDenied, to_jsonrpc_error

from .conftest import error_of


def test_a_request_meeting_a_closed_broker_part_is_refused_as_connection_closed(
    data: Path, broker: Broker, conn: Connection, caplog: pytest.LogCaptureFixture
) -> None:
    # Broker.close() closes the connections, then the watch manager: a files/watch that passed
    # the envelope before the close meets the closed manager. The server must learn that the
    # connection closed (-32101 connection_closed), not read an internal error, and the notebook's
    # log must not hold a traceback for what is an ordinary end.
    (data / "seen").mkdir()
    broker.watches.close()
    with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker"):
        error = error_of(conn, "files/watch", {"path": "data/seen"})
    assert isinstance(error, PermissionDenied)
    wire = to_jsonrpc_error(error)
    info = wire["data"]
    assert (wire["code"], info["reason"], info["path"]) == (-32101, "connection_closed", "data/seen")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    record = broker.audit.records()[-1]
    assert (record.method, record.decision, record.error, record.reason) == (
        "files/watch",
        "deny",
        "PERMISSION_DENIED",
        "connection_closed",
    )
