"""The error catalogue is the contract's: PROTOCOL.md's table, the core's errors and the kit's
exceptions are all built from it, and an answer keeps its kind, code, name, reason, path and data
from the core's encoder to the kit's reader.
"""

from __future__ import annotations

import ast
import pickle
import re
from collections import defaultdict

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from jupyter_fsbroker import serverkit as kit
from jupyter_fsbroker.core import errors as core_errors
from jupyter_fsbroker.serverkit import exceptions as kit_exceptions
from jupyter_fsbroker.wire import catalogue
from jupyter_fsbroker.wire.catalogue import ErrorKind, error_object, kind_of
from tests.support.env import REPO
from tests.support.sources import PACKAGE, package_modules, parse

PROTOCOL = REPO / "PROTOCOL.md"


def _binders(base: type) -> dict[ErrorKind, list[type]]:
    """``{kind: the classes under base that bind it}`` (a subclass that only inherits a kind does not)."""
    found: dict[ErrorKind, list[type]] = defaultdict(list)
    pending = [base]
    while pending:
        cls = pending.pop()
        if "kind" in vars(cls) and cls is not base:
            found[cls.kind].append(cls)
        pending.extend(cls.__subclasses__())
    return found


CORE_CLASSES = _binders(core_errors.FilesError)
KIT_CLASSES = _binders(kit.FilesRequestError)


def test_the_error_table_of_protocol_md_is_the_catalogues() -> None:
    """Every named error of PROTOCOL.md's table has the catalogue's code, and the catalogue no other."""
    documented = dict(re.findall(r"^\| ([A-Z_]+) \| (-\d+) \|", PROTOCOL.read_text(encoding="utf-8"), re.M))
    named = {kind.name: str(kind.code) for kind in catalogue.KINDS if kind.name is not None}
    assert documented, f"no error table found in {PROTOCOL}"
    assert documented == named


def test_the_catalogue_holds_each_kind_once() -> None:
    assert len({kind.key for kind in catalogue.KINDS}) == len(catalogue.KINDS)
    assert len({kind.code for kind in catalogue.KINDS}) == len(catalogue.KINDS)
    for kind in catalogue.KINDS:
        assert kind.reasons[0] == kind.default_reason, kind.key
        assert len(set(kind.reasons)) == len(kind.reasons), kind.key
        assert kind.name in (None, kind.key), kind.key


def test_each_kind_is_bound_by_exactly_one_class_of_each_tree() -> None:
    assert {kind: len(classes) for kind, classes in CORE_CLASSES.items()} == dict.fromkeys(catalogue.KINDS, 1)
    assert {kind: len(classes) for kind, classes in KIT_CLASSES.items()} == dict.fromkeys(catalogue.KINDS, 1)


def _reason_other_than_the_default(kind: ErrorKind) -> str:
    return kind.reasons[1] if len(kind.reasons) > 1 else kind.default_reason


@pytest.mark.parametrize("kind", catalogue.KINDS, ids=lambda kind: kind.key)
def test_a_core_error_reads_in_the_kit_as_its_kind(kind: ErrorKind) -> None:
    """What the client's core raises is, in a server's tool, the kit's class of the same kind."""
    (core_cls,) = CORE_CLASSES.get(kind, [None])
    (kit_cls,) = KIT_CLASSES.get(kind, [None])
    assert core_cls is not None and kit_cls is not None, f"{kind.key} has no class in one of the trees"
    reason = _reason_other_than_the_default(kind)
    error = core_cls("a message", reason=reason, path="data/x.csv", maxBytes=10)
    assert (error.name, error.code) == (kind.name, kind.code)
    answer = error_object(error.kind, error.message, reason=error.reason, path=error.path, **error.data)
    assert answer == core_errors.to_jsonrpc_error(error)

    read = kit.error_from_jsonrpc(answer["code"], answer["message"], answer["data"], method="files/read")

    assert type(read) is kit_cls
    assert (read.code, read.name, read.reason, read.path) == (kind.code, kind.name, reason, "data/x.csv")
    assert read.data == answer["data"] and read.data["maxBytes"] == 10
    assert (read.message, read.method) == ("a message", "files/read")


def test_error_object_spells_the_wire_members() -> None:
    named = error_object(catalogue.NOT_FOUND, "gone", path="data/a", lockId="l_1")
    assert named == {
        "code": -32102,
        "message": "gone",
        "data": {"error": "NOT_FOUND", "reason": "not_found", "path": "data/a", "lockId": "l_1"},
    }
    plain = error_object(catalogue.INVALID_PARAMS, "bad", reason="bad_offset", expectedOffset=4)
    assert plain == {
        "code": -32602,
        "message": "bad",
        "data": {"reason": "bad_offset", "expectedOffset": 4},
    }


def test_kind_of_reads_the_name_then_a_message_that_is_a_name_then_the_code() -> None:
    assert kind_of(-32603, "x", {"error": "FILE_LOCKED"}) is catalogue.FILE_LOCKED
    # SEP-1708's reference client: the name as the message, a -32602 code.
    assert kind_of(-32602, " PERMISSION_DENIED ", None) is catalogue.PERMISSION_DENIED
    assert kind_of(-32602, "bad", {}) is catalogue.INVALID_PARAMS
    # An unknown name leaves the decision to the code, not to the message.
    assert kind_of(-32102, "FILE_LOCKED", {"error": "NO_SUCH_NAME"}) is catalogue.NOT_FOUND
    assert kind_of(-32099, "odd", None) is None


def test_the_kits_own_failures_use_no_code_of_the_catalogue() -> None:
    """A timeout and a closed connection are mcp's codes; a catalogue code there would be misread."""
    codes = {kind.code for kind in catalogue.KINDS}
    for cls in (kit.RequestTimeoutError, kit.ClientDisconnectedError):
        assert cls.kind is None and cls.default_code not in codes, cls.__name__
        assert type(kit.error_from_jsonrpc(cls.default_code, "no answer")) is cls
    assert type(kit.error_from_jsonrpc(-32099, "odd")) is kit.FilesRequestError


def _core_error_calls() -> dict[str, set[str]]:
    """``{core error class name: the reasons written where the package raises it}``."""
    names = {cls.__name__ for classes in CORE_CLASSES.values() for cls in classes}
    found: dict[str, set[str]] = defaultdict(set)
    for path in package_modules().values():
        if path.is_relative_to(PACKAGE / "serverkit"):
            continue
        for node in ast.walk(parse(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called not in names:
                continue
            for keyword in node.keywords:
                if keyword.arg == "reason" and isinstance(keyword.value, ast.Constant):
                    found[called].add(keyword.value.value)
    return found


def test_every_reason_the_package_sends_is_in_the_catalogue_under_its_kind() -> None:
    calls = _core_error_calls()
    assert calls["PermissionDenied"] >= {"not_granted", "outside_roots"}, "the scan found nothing"
    by_name = {cls.__name__: kind for kind, classes in CORE_CLASSES.items() for cls in classes}
    missing = {
        name: sorted(reasons - set(by_name[name].reasons))
        for name, reasons in calls.items()
        if reasons - set(by_name[name].reasons)
    }
    assert missing == {}, "reasons sent but not in jupyter_fsbroker/wire/catalogue.py"


def test_the_reason_constants_belong_to_their_kinds() -> None:
    assert catalogue.PERMISSION_DENIED.default_reason == catalogue.NOT_GRANTED
    assert catalogue.CONNECTION_CLOSED in catalogue.PERMISSION_DENIED.reasons
    assert catalogue.REQUEST_TOO_LARGE in catalogue.TOO_LARGE.reasons
    assert catalogue.MEMORY_BUDGET in catalogue.RATE_LIMITED.reasons


# -- the kit's exceptions as Python exceptions ---------------------------------------------------

KIT_ERRORS = [
    cls
    for name in kit_exceptions.__all__
    if isinstance(cls := getattr(kit_exceptions, name), type) and issubclass(cls, kit.FilesRequestError)
]


@pytest.mark.parametrize("cls", KIT_ERRORS, ids=lambda cls: cls.__name__)
def test_a_kit_exception_is_a_tool_error_named_as_python_names_errors(cls: type) -> None:
    assert issubclass(cls, ToolError)
    assert cls.__name__.endswith("Error")
    assert not hasattr(core_errors, cls.__name__), "a class name of the core's tree"


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (kit.NotFoundError, FileNotFoundError),
        (kit.PermissionDeniedError, PermissionError),
        (kit.AlreadyExistsError, FileExistsError),
        (kit.RequestTimeoutError, TimeoutError),
        (kit.ClientDisconnectedError, ConnectionError),
        (kit.InvalidParamsError, ValueError),
        (kit.ContentEncodingError, ValueError),
        (kit.MethodNotFoundError, NotImplementedError),
    ],
    ids=lambda value: value.__name__,
)
def test_the_builtin_catches_the_kit_exception_and_it_survives_pickling(cls: type, builtin: type) -> None:
    data = {"error": cls.default_name, "reason": "some_reason", "path": "data/x.csv"}
    error = cls("a message", data=data, method="files/stat")
    with pytest.raises(builtin) as info:
        raise error
    assert info.value is error
    assert str(error) == f"{cls.default_name or cls.default_code}: a message"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert (copy.message, copy.code, copy.reason, copy.path, copy.method) == (
        "a message",
        cls.default_code,
        "some_reason",
        "data/x.csv",
        "files/stat",
    )
