"""The capability the client sends is the one the kit reads; the method names are the ones the
core answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_fsbroker import serverkit as kit
from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.core.errors import FilesError, MethodNotFound
from jupyter_fsbroker.protocol import middleware
from jupyter_fsbroker.wire import brokering, methods


def test_the_clients_initialize_advertises_what_the_kit_reads() -> None:
    params = {"capabilities": {"roots": middleware.ROOTS_CAPABILITY}}
    assert kit.advertises_brokering(params)
    assert kit.brokering_features(params) == {brokering.PER_PATH_CONSENT}


def test_each_roots_capability_is_a_fresh_value() -> None:
    first = brokering.roots_capability()
    first[brokering.BROKERING_FEATURES].append("somethingElse")
    assert brokering.roots_capability()[brokering.BROKERING_FEATURES] == [brokering.PER_PATH_CONSENT]


@pytest.mark.parametrize(
    "roots",
    [None, {}, {"filesystemBrokering": "yes"}, {"filesystemBrokering": 1}],
    ids=["no-roots", "empty", "string", "number"],
)
def test_only_a_true_capability_counts(roots: object) -> None:
    assert not brokering.advertises_brokering({"capabilities": {"roots": roots}})


def test_features_that_are_not_a_list_of_strings_count_as_none() -> None:
    read = brokering.brokering_features
    assert read({"capabilities": {"roots": {brokering.BROKERING_FEATURES: "perPathConsent"}}}) == set()
    assert read({"capabilities": {"roots": {brokering.BROKERING_FEATURES: [1, "x"]}}}) == {"x"}


def test_the_core_answers_every_method_of_the_contract_and_no_other(tmp_path: Path) -> None:
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker, broker.connect("methods") as conn:
        for method in sorted(methods.FILES_METHODS):
            assert method.startswith(methods.FILES_PREFIX)
            try:
                conn.handle(method, {})  # empty params: refused, but by the method itself
            except FilesError as error:
                assert not isinstance(error, MethodNotFound), method
        with pytest.raises(MethodNotFound):
            conn.handle(f"{methods.FILES_PREFIX}frobnicate", {})
