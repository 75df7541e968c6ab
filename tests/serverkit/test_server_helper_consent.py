"""The helper's consent with clients that do and do not list ``perPathConsent``.

A tool (or a server author) asks for ``{path: operations}``. A client that lists
``perPathConsent`` in ``capabilities.roots.filesystemBrokeringFeatures`` gets one
``files/consent`` with per-path items; any other client gets the same as flat
requests (only strings in ``requestedPaths``), one per set of operations, and the
tool sees one merged answer either way. The clients are ``rawclient`` answering
through the real core (which takes both forms), with and without the feature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker import serverkit as helper
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.serverkit.requester import flat_groups
from tests.protocol.rawclient import StdioClient, python_argv
from tests.protocol.servers.harness import Consents, node_folder
from tests.serverkit.test_server_helper import APP, call
from tests.support.brokers import make_broker
from tests.support.env import server_env

pytestmark = pytest.mark.anyio

ANALYSIS = python_argv("-m", "jupyter_fsbroker.examples.analysis_server")


# -- grouping and merging ------------------------------------------------------------------------


def test_paths_are_grouped_by_the_set_of_operations_they_need() -> None:
    assert flat_groups({"data/a.csv": ["read"], "data/a.md": ["write"]}) == [
        (("read",), ("data/a.csv",)),
        (("write",), ("data/a.md",)),
    ]
    # The same set in another order, or with a repeat, is the same request; the order is stable.
    access = {
        "data/z": ["write", "read"],
        "data/b": ["delete"],
        "data/a": ["read", "write", "read"],
        "data/c": ["delete"],
    }
    assert flat_groups(access) == [
        (("write", "read"), ("data/z", "data/a")),
        (("delete",), ("data/b", "data/c")),
    ]
    assert flat_groups(access) == flat_groups(dict(access))


def flat(result: dict[str, Any], paths: tuple[str, ...], ops: tuple[str, ...]) -> helper.ConsentResult:
    return helper.ConsentResult.from_result(result, paths, ops)


def test_flat_answers_merge_into_what_was_approved_on_each_path() -> None:
    read = flat(
        {"granted": True, "approvedPaths": ["data/a.csv"], "operations": ["read"]}, ("data/a.csv",), ("read",)
    )
    # SEP-1708's own answer: no operations (the ones asked for), no expiry.
    write = flat({"granted": True, "approvedPaths": ["data/a.md"]}, ("data/a.md",), ("write",))
    merged = helper.PathConsentResult.merged([read, write])
    assert merged == helper.PathConsentResult(
        granted=True,
        approved_paths=("data/a.csv", "data/a.md"),
        operations=("read", "write"),
        expires_at=None,
        approved=(("data/a.csv", ("read",)), ("data/a.md", ("write",))),
    )
    assert merged.operations_on(["data/a.csv"]) == ("read",)
    assert merged.operations_on(["data/a.md"]) == ("write",)
    assert merged.operations_on(["data/a.csv", "data/a.md"]) == ()


def test_a_refused_flat_answer_approves_nothing_in_the_merge() -> None:
    refused = flat({"granted": False, "approvedPaths": [], "operations": []}, ("data/a.csv",), ("read",))
    write = flat(
        {"granted": True, "approvedPaths": ["data/a.md"], "operations": ["write"]}, ("data/a.md",), ("write",)
    )
    merged = helper.PathConsentResult.merged([refused, write])
    assert (merged.granted, merged.approved, merged.operations) == (
        True,
        (("data/a.md", ("write",)),),
        ("write",),
    )
    assert merged.operations_on(["data/a.md"]) == ("write",)
    nothing = helper.PathConsentResult.merged([refused, refused])
    assert (nothing.granted, nothing.approved_paths, nothing.operations, nothing.approved) == (
        False,
        (),
        (),
        (),
    )


def test_the_merged_answer_expires_with_the_first_grant() -> None:
    def answer(path: str, expires: str | None) -> helper.ConsentResult:
        result = {"granted": True, "approvedPaths": [path], "operations": ["read"], "expiresAt": expires}
        return flat(result, (path,), ("read",))

    later, sooner = answer("data/a", "2026-11-29T22:00:00Z"), answer("data/b", "2026-11-29T21:30:00+00:00")
    assert helper.PathConsentResult.merged([later, sooner]).expires_at == "2026-11-29T21:30:00+00:00"
    assert (
        helper.PathConsentResult.merged([answer("data/a", None), later]).expires_at == "2026-11-29T22:00:00Z"
    )


def test_the_features_are_read_from_the_raw_initialize_params() -> None:
    def params(roots: Any) -> dict[str, Any]:
        return {"capabilities": {"roots": roots}}

    listed = params(
        {"filesystemBrokering": True, "filesystemBrokeringFeatures": ["perPathConsent", "later", 3]}
    )
    assert helper.brokering_features(listed) == {"perPathConsent", "later"}
    assert helper.brokering_features(params({"filesystemBrokering": True})) == frozenset()
    assert helper.brokering_features(params({"filesystemBrokeringFeatures": "perPathConsent"})) == frozenset()
    assert helper.brokering_features(params(None)) == frozenset()
    assert helper.brokering_features(None) == frozenset()


# -- against the core, over stdio ----------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("consent")
    (base / "data").mkdir()
    return base


@pytest.fixture(scope="module")
def broker(workdir: Path) -> Iterator[Broker]:
    with make_broker(workdir, limits=Limits(lock_wait=0.3)) as b:
        b.add_root(workdir / "data", name="data")
        yield b


async def start(argv: list[str], broker: Broker, consents: Consents, **kwargs: Any) -> StdioClient:
    consenter = CallbackConsenter(consents.decide)
    return await StdioClient.start(argv, broker, env=server_env(), consenter=consenter, **kwargs)


@pytest.fixture(scope="module")
async def flat_client(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    """A client whose ``initialize`` lists no feature (the key is missing)."""
    async with await start(python_argv(APP), broker, consents, name="flat", features=None) as c:
        yield c


@pytest.fixture(scope="module")
async def per_path_client(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    async with await start(python_argv(APP), broker, consents, name="per-path") as c:
        assert c.features == ("perPathConsent",)
        yield c


@pytest.fixture
def folder(request: pytest.FixtureRequest, workdir: Path) -> str:
    """A fresh folder ``data/<test>``, granted to nobody; its root-relative path."""
    name = node_folder(request)
    (workdir / "data" / name).mkdir()
    return f"data/{name}"


def wire_consents(client: StdioClient) -> list[dict[str, Any]]:
    return [answered.params for answered in client.requests("files/consent")]


def grants(client: StdioClient, folder: str) -> set[tuple[str, tuple[str, ...]]]:
    return {(g.path, g.operations) for g in client.conn.grants() if g.path.startswith(folder)}


async def test_a_flat_only_client_gets_one_flat_request_per_set_of_operations(
    flat_client: StdioClient, folder: str, consents: Consents
) -> None:
    flat_client.reset()
    before = len(consents.requests)
    access = {f"{folder}/in.csv": ["read"], f"{folder}/out.csv": ["write"], f"{folder}/log": ["write"]}
    answer = await call(flat_client, "consent", args={"message": "Filter the rows", "paths": access})
    assert wire_consents(flat_client) == [
        {"message": "Filter the rows", "requestedPaths": [f"{folder}/in.csv"], "operations": ["read"]},
        {
            "message": "Filter the rows",
            "requestedPaths": [f"{folder}/out.csv", f"{folder}/log"],
            "operations": ["write"],
        },
    ]
    assert len(consents.requests) == before + 2  # one prompt each
    assert answer["ok"] == {
        "granted": True,
        "approved_paths": [f"{folder}/in.csv", f"{folder}/out.csv", f"{folder}/log"],
        "operations": ["read", "write"],
        "expires_at": None,
        "approved": [
            [f"{folder}/in.csv", ["read"]],
            [f"{folder}/out.csv", ["write"]],
            [f"{folder}/log", ["write"]],
        ],
    }
    assert grants(flat_client, folder) == {
        (f"{folder}/in.csv", ("read",)),
        (f"{folder}/out.csv", ("write",)),
        (f"{folder}/log", ("write",)),
    }


async def test_a_flat_only_client_refusing_one_request_and_approving_the_other(
    flat_client: StdioClient, folder: str, consents: Consents
) -> None:
    flat_client.reset()
    consents.deny.add(f"{folder}/in.csv")
    access = {f"{folder}/in.csv": ["read"], f"{folder}/out.csv": ["write"]}
    answer = await call(flat_client, "consent", args={"message": "m", "paths": access})
    assert len(wire_consents(flat_client)) == 2
    assert answer["ok"]["granted"] is True
    assert answer["ok"]["approved"] == [[f"{folder}/out.csv", ["write"]]]
    assert (answer["ok"]["approved_paths"], answer["ok"]["operations"]) == ([f"{folder}/out.csv"], ["write"])
    assert grants(flat_client, folder) == {(f"{folder}/out.csv", ("write",))}


async def test_an_empty_request_is_one_request_to_either_client(
    flat_client: StdioClient, per_path_client: StdioClient
) -> None:
    for client in (flat_client, per_path_client):
        client.reset()
        answer = await call(client, "consent", args={"message": "m", "paths": {}})
        assert wire_consents(client) == [{"message": "m", "requestedPaths": []}]
        assert (answer["error"]["class"], answer["error"]["reason"]) == ("InvalidParamsError", "bad_value")


async def test_a_client_that_lists_per_path_consent_gets_one_request_with_per_path_items(
    per_path_client: StdioClient, folder: str, consents: Consents
) -> None:
    per_path_client.reset()
    before = len(consents.requests)
    access = {f"{folder}/in.csv": ["read"], f"{folder}/out.csv": ["write"]}
    answer = await call(per_path_client, "consent", args={"message": "m", "paths": access})
    assert wire_consents(per_path_client) == [
        {
            "message": "m",
            "requestedPaths": [
                {"path": f"{folder}/in.csv", "operations": ["read"]},
                {"path": f"{folder}/out.csv", "operations": ["write"]},
            ],
        }
    ]
    assert len(consents.requests) == before + 1
    assert answer["ok"]["approved"] == [[f"{folder}/in.csv", ["read"]], [f"{folder}/out.csv", ["write"]]]


async def test_a_tools_consent_access_works_the_same_with_a_flat_only_client(
    flat_client: StdioClient, workdir: Path, folder: str, consents: Consents
) -> None:
    (workdir / folder / "in.csv").write_text("a,b\n1,2\n")
    flat_client.reset()
    before = len(consents.requests)
    access = {f"{folder}/in.csv": ["read"], f"{folder}/out.csv": ["write"]}
    got = await call(
        flat_client,
        "read_text",
        args={"path": f"{folder}/in.csv"},
        consent_message="Copy",
        consent_access=access,
    )
    assert got == {"ok": "a,b\n1,2\n"}
    methods = [answered.method for answered in flat_client.answered]
    assert methods == ["files/read", "files/consent", "files/consent", "files/read"]
    assert [(r.items[0].path, r.operations) for r in consents.requests[before:]] == [
        (f"{folder}/in.csv", ("read",)),
        (f"{folder}/out.csv", ("write",)),
    ]
    # The write the tool asked for is granted already: no further prompt.
    written = await call(
        flat_client,
        "write_text",
        args={"path": f"{folder}/out.csv", "text": "1,2\n"},
        consent_message="Copy",
        consent_access=access,
    )
    assert written["ok"]["bytes_written"] == 4 and len(consents.requests) == before + 2
    assert grants(flat_client, folder) == {(f"{folder}/in.csv", ("read",)), (f"{folder}/out.csv", ("write",))}


async def test_the_example_servers_write_report_with_a_flat_only_client(
    broker: Broker, workdir: Path, folder: str, consents: Consents
) -> None:
    (workdir / folder / "sales.csv").write_text("region,amount\nnorth,1.5\nsouth,2\n")
    async with await start(ANALYSIS, broker, consents, name="analysis", features=None) as client:
        result = await client.tool_json("write_report", {"path": f"{folder}/sales.csv"})
        assert result["report"] == f"{folder}/sales.report.md" and result["rows"] == 2
        assert all(isinstance(p, str) for c in wire_consents(client) for p in c["requestedPaths"])
        assert [c["operations"] for c in wire_consents(client)] == [["read"], ["write"]]
        # Still never write on the data itself.
        assert grants(client, folder) == {
            (f"{folder}/sales.csv", ("read",)),
            (f"{folder}/sales.report.md", ("write",)),
        }
    assert (workdir / folder / "sales.report.md").read_text().startswith(f"# Profile of `{folder}/sales.csv`")
