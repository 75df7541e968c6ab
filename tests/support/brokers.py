"""Brokers for tests: their lock files and trash live in the test's folder, never in the user's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_fsbroker.core.broker import Broker, BrokerConfig

#: Every grantable operation.
ALL_OPS = ("read", "write", "delete", "watch")


def make_broker(base: Path, **config: Any) -> Broker:
    """A broker whose lock files and trash live in *base* (``.locks``, ``.trash``).

    Parameters
    ----------
    base
        A temporary folder of the test (``tmp_path``), outside every root.
    **config
        Any other :class:`~jupyter_fsbroker.core.broker.BrokerConfig` field.
    """
    return Broker(BrokerConfig(lock_dir=str(base / ".locks"), trash_dir=str(base / ".trash"), **config))
