"""The server helper's copies of the wire contract equal the core's, so the two can never drift.

The helper (``jupyter_fsbroker/serverkit/``) must stand alone, so it
copies what it relies on of PROTOCOL.md instead of importing the core: error
names and codes, the operations, the chunk caps, the watch event kinds and the
change event's shape, the notification's name, the capability key, the key
of the features and the feature names, the key of the roots' names in
``roots/list``, and the two ``data.reason`` values it acts on. Each test below
compares one copy with the core's (or the client side's) and names the copy to
fix when they differ.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker import serverkit as helper
from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.core import errors as core_errors
from jupyter_fsbroker.core.grants import OPERATIONS as CORE_OPERATIONS
from jupyter_fsbroker.core.limits import MAX_CHUNK_BYTES as CORE_MAX_CHUNK_BYTES
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.core.watch import EVENTS as CORE_EVENTS
from jupyter_fsbroker.core.watch import ChangeEvent as CoreChangeEvent
from jupyter_fsbroker.protocol import middleware as client_side
from jupyter_fsbroker.protocol import roots_offer
from jupyter_fsbroker.serverkit import contract
from jupyter_fsbroker.serverkit.writing import ContentCap

CONTRACT = "jupyter_fsbroker/serverkit/contract.py"
ERRORS = "jupyter_fsbroker/serverkit/exceptions.py"
RESULTS = "jupyter_fsbroker/serverkit/answers.py"


def drift(what: str, helper_value: object, core_value: object, fix: str, side: str = "the core") -> str:
    return (
        f"the server helper's copy of {what} drifted from {side}: the helper has {helper_value!r}, "
        f"{side} {core_value!r}. Update {fix} (PROTOCOL.md decides which side is right)."
    )


def core_files_errors() -> list[type[core_errors.FilesError]]:
    """Every error class the core can put on the wire."""
    found: list[type[core_errors.FilesError]] = []
    pending = [core_errors.FilesError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def helper_error(name: str) -> type[helper.FilesError] | None:
    value = getattr(helper, name, None) if name in helper.__all__ else None
    return value if isinstance(value, type) and issubclass(value, helper.FilesError) else None


# -- error names and codes ----------------------------------------------------------------------


@pytest.mark.parametrize("core_cls", core_files_errors(), ids=lambda cls: cls.__name__)
def test_every_core_error_has_the_same_name_and_code_in_the_helper(
    core_cls: type[core_errors.FilesError],
) -> None:
    mine = helper_error(core_cls.__name__)
    assert mine is not None, (
        f"the core answers with {core_cls.__name__} ({core_cls.name or 'no name'}, {core_cls.code}) "
        f"but the server helper has no such error: add it to {ERRORS}"
    )
    assert (mine.default_name, mine.default_code) == (core_cls.name, core_cls.code), drift(
        f"{core_cls.__name__}'s (name, code)",
        (mine.default_name, mine.default_code),
        (core_cls.name, core_cls.code),
        ERRORS,
    )


def test_the_helper_names_no_error_the_core_does_not_know() -> None:
    core_names = {cls.name for cls in core_files_errors() if cls.name is not None}
    helper_names = {
        cls.default_name
        for name in helper.__all__
        if (cls := helper_error(name)) is not None and cls.default_name is not None
    }
    assert helper_names <= core_names, drift(
        "the PROTOCOL.md error names", sorted(helper_names), sorted(core_names), ERRORS
    )


def test_codes_of_the_helpers_own_errors_are_no_core_codes() -> None:
    """RequestTimeout and ConnectionClosed are mcp's; a core code there would be misread."""
    core_codes = {cls.code for cls in core_files_errors()}
    for cls in (helper.RequestTimeout, helper.ConnectionClosed):
        assert cls.default_code not in core_codes, (
            f"{cls.__name__}'s code {cls.default_code} is also a core error code: "
            f"error_from_jsonrpc in {ERRORS} would misread the core's answers"
        )


# The base class answers -32603 like InternalError, and is read as that.
@pytest.mark.parametrize(
    "core_cls",
    [cls for cls in core_files_errors() if cls is not core_errors.FilesError],
    ids=lambda cls: cls.__name__,
)
def test_a_core_error_on_the_wire_reads_as_its_helper_twin(core_cls: type[core_errors.FilesError]) -> None:
    wire = core_errors.to_jsonrpc_error(core_cls("a message", path="data/x.csv", maxBytes=10))
    mine = helper.error_from_jsonrpc(wire["code"], wire["message"], wire["data"], method="files/read")
    assert type(mine).__name__ == core_cls.__name__, drift(
        f"the class of a {core_cls.__name__} answer", type(mine).__name__, core_cls.__name__, ERRORS
    )
    expected = (core_cls.code, core_cls.name, core_cls.default_reason, "data/x.csv", 10)
    got = (mine.code, mine.name, mine.reason, mine.path, mine.data.get("maxBytes"))
    assert got == expected, drift(f"how a {core_cls.__name__} answer reads", got, expected, ERRORS)


# -- operations, events, caps, names ------------------------------------------------------------

CORE, CLIENT = "the core", "the client side (protocol/middleware.py)"
COPIES: list[Any] = [
    pytest.param(contract.OPERATIONS, CORE_OPERATIONS, CORE, id="OPERATIONS"),
    pytest.param(frozenset(contract.WATCH_EVENTS), CORE_EVENTS, CORE, id="WATCH_EVENTS"),
    pytest.param(len(contract.WATCH_EVENTS), len(CORE_EVENTS), CORE, id="WATCH_EVENTS-no-repeats"),
    pytest.param(contract.MAX_CHUNK_BYTES, CORE_MAX_CHUNK_BYTES, CORE, id="MAX_CHUNK_BYTES"),
    pytest.param(
        contract.MAX_CHUNK_BYTES, Limits().max_chunk_bytes, CORE, id="MAX_CHUNK_BYTES-default-limit"
    ),
    pytest.param(contract.DEFAULT_CHUNK_BYTES, Limits().default_read_bytes, CORE, id="DEFAULT_CHUNK_BYTES"),
    pytest.param(contract.NOT_GRANTED, core_errors.PermissionDenied.default_reason, CORE, id="NOT_GRANTED"),
    pytest.param(
        contract.CHANGED_NOTIFICATION, client_side.CHANGED_NOTIFICATION, CLIENT, id="CHANGED_NOTIFICATION"
    ),
    pytest.param(
        contract.BROKERING_FEATURES, client_side.BROKERING_FEATURES, CLIENT, id="BROKERING_FEATURES"
    ),
    pytest.param(contract.PER_PATH_CONSENT, client_side.PER_PATH_CONSENT, CLIENT, id="PER_PATH_CONSENT"),
    pytest.param(
        contract.ROOTS_META,
        roots_offer.BROKERING_META,
        "the client side (protocol/roots_offer.py)",
        id="ROOTS_META",
    ),
]


@pytest.mark.parametrize(("mine", "theirs", "side"), COPIES)
def test_contract_constant(mine: object, theirs: object, side: str, request: pytest.FixtureRequest) -> None:
    name = request.node.callspec.id
    assert mine == theirs, drift(name, mine, theirs, CONTRACT, side)


def test_the_public_constants_are_the_contract_copies() -> None:
    for name in (
        "OPERATIONS",
        "WATCH_EVENTS",
        "MAX_CHUNK_BYTES",
        "DEFAULT_CHUNK_BYTES",
        "CHANGED_NOTIFICATION",
    ):
        assert getattr(helper, name) is getattr(contract, name), f"helper.{name} is not {CONTRACT}'s"


def test_the_client_sides_capability_is_what_the_helper_reads() -> None:
    roots = client_side.ROOTS_CAPABILITY
    assert roots.get(contract.BROKERING_CAPABILITY) is True, drift(
        "the capability key", contract.BROKERING_CAPABILITY, sorted(roots), CONTRACT, CLIENT
    )
    assert helper.advertises_brokering({"capabilities": {"roots": roots}})


def test_the_client_side_lists_the_features_the_helper_reads() -> None:
    """Our client lists perPathConsent (the core takes per-path items), under the key the helper reads."""
    roots = client_side.ROOTS_CAPABILITY
    features = helper.brokering_features({"capabilities": {"roots": roots}})
    assert contract.PER_PATH_CONSENT in features, drift(
        "the features' key or the per-path feature",
        (contract.BROKERING_FEATURES, contract.PER_PATH_CONSENT),
        roots,
        CONTRACT,
        CLIENT,
    )


# -- the change event's wire shape --------------------------------------------------------------


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


@pytest.mark.parametrize("old_path", ["data/old.csv", None], ids=["moved", "modified"])
def test_a_core_change_event_reads_field_for_field(old_path: str | None) -> None:
    event = "moved" if old_path else "modified"
    core = CoreChangeEvent("w_1", "data/new.csv", event, 1_790_000_000.123, old_path)
    params = core.to_params()
    mine = helper.ChangeEvent.from_params(params)
    assert mine is not None, drift("the change event's shape", None, params, RESULTS)
    expected = {_snake(key): value for key, value in params.items()}
    fields = {field.name for field in dataclasses.fields(helper.ChangeEvent)}
    if old_path is not None:
        assert set(expected) == fields, drift(
            "the change event's members", sorted(fields), sorted(expected), RESULTS
        )
    got = {name: value for name, value in dataclasses.asdict(mine).items() if name in expected}
    assert got == expected, drift("the change event's values", got, expected, RESULTS)


# -- the reasons the helper acts on, as the core sends them --------------------------------------


@pytest.fixture
def core_connection(tmp_path: Path) -> Iterator[Any]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "granted").mkdir()
    (data / "ungranted.txt").write_text("not granted")
    limits = Limits(max_chunk_bytes=1024, default_read_bytes=1024)
    config = BrokerConfig(
        lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"), limits=limits
    )
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data/granted", ops=("read", "write"))
        yield broker.connect("contract")


def _answer(conn: Any, method: str, params: dict[str, Any]) -> helper.FilesError:
    with pytest.raises(core_errors.FilesError) as info:
        conn.handle(method, params)
    wire = core_errors.to_jsonrpc_error(info.value)
    return helper.error_from_jsonrpc(wire["code"], wire["message"], wire["data"], method=method)


def test_not_granted_is_the_reason_the_core_gives_for_a_missing_grant(core_connection: Any) -> None:
    mine = _answer(core_connection, "files/read", {"path": "data/ungranted.txt"})
    assert isinstance(mine, helper.PermissionDenied)
    assert mine.reason == contract.NOT_GRANTED, drift(
        "NOT_GRANTED", contract.NOT_GRANTED, mine.reason, CONTRACT
    )


def test_request_too_large_is_the_reason_the_core_gives_with_its_cap(core_connection: Any) -> None:
    params = {"path": "data/granted/big.bin", "content": "x" * 2000, "encoding": "utf-8"}
    mine = _answer(core_connection, "files/write", params)
    assert isinstance(mine, helper.TooLarge)
    assert mine.reason == contract.REQUEST_TOO_LARGE, drift(
        "REQUEST_TOO_LARGE", contract.REQUEST_TOO_LARGE, mine.reason, CONTRACT
    )
    cap = ContentCap()
    assert cap.learn(mine) and cap.limit == 1024, f"the helper did not learn the core's cap from {mine.data}"


# -- PROTOCOL.md itself -------------------------------------------------------------------------

PROTOCOL = Path(__file__).resolve().parents[2] / "PROTOCOL.md"


def test_the_error_table_of_protocol_md_is_the_cores() -> None:
    """Every named error of PROTOCOL.md's table has the core's code, and the core has no other."""
    documented = dict(re.findall(r"^\| ([A-Z_]+) \| (-\d+) \|", PROTOCOL.read_text(encoding="utf-8"), re.M))
    core = {cls.name: str(cls.code) for cls in core_files_errors() if cls.name is not None}
    assert documented, f"no error table found in {PROTOCOL}"
    assert documented == core, "PROTOCOL.md's error table and core/errors.py disagree"
