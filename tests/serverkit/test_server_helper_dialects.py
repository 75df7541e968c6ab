"""The server helper against clients that speak other dialects than PROTOCOL.md, or lie.

The helper is lenient in what it accepts and strict about integrity: a client
that follows the SEP-1708 draft's examples (a consent without ``operations``, a
read answered with only ``content``, ``size`` and ``mimeType``, a refusal as
``-32602 PERMISSION_DENIED`` with no ``data``) must work; a client whose answer
cannot be true (a ``bytesRead`` that is not the content's length) must make the
tool fail, never compute from the wrong data.

The client here is ``rawclient`` answering through the real core; an
interceptor rewrites the core's answers into the other dialect (as a client
written from the draft would send them).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.consent import CallbackConsenter
from jupyter_fsbroker.core.errors import PermissionDenied as CorePermissionDenied
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.examples.analysis_server import CsvProfiler
from tests.protocol.rawclient import Interceptor, StdioClient, WireError, python_argv
from tests.protocol.servers.harness import Consents, node_folder
from tests.serverkit.test_server_helper import APP, call
from tests.support.env import server_env

pytestmark = pytest.mark.anyio

ANALYSIS = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("dialects")
    (base / "data").mkdir()
    (base / "ref").mkdir()
    return base


@pytest.fixture(scope="module")
def broker(workdir: Path) -> Iterator[Broker]:
    config = BrokerConfig(
        lock_dir=str(workdir / "locks"), trash_dir=str(workdir / "trash"), limits=Limits(lock_wait=0.3)
    )
    with Broker(config) as b:
        b.add_root(workdir / "data", name="data")
        b.add_root(workdir / "ref", name="ref", read_only=True)
        yield b


@pytest.fixture(scope="module")
async def client(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    consenter = CallbackConsenter(consents.decide)
    async with await StdioClient.start(python_argv(APP), broker, env=server_env(), consenter=consenter) as c:
        yield c


@pytest.fixture
def folder(request: pytest.FixtureRequest, workdir: Path, client: StdioClient) -> Path:
    """A fresh folder ``data/<test>``, granted to nobody."""
    path = workdir / "data" / node_folder(request)
    path.mkdir()
    client.reset()
    return path


def sep_dialect(client: StdioClient, *, refusal: dict[str, Any] | None = None) -> Interceptor:
    """Answer as a client written from SEP-1708's examples would, from the core's real answers.

    Consent: ``granted`` and ``approvedPaths`` only. Reads: ``content``,
    ``size``, ``mimeType`` (and ``lockId``). Writes: ``bytesWritten`` (and
    ``lockId``). A path not granted: *refusal* (default the reference
    client's ``-32602 PERMISSION_DENIED`` without ``data``).
    """
    refused = refusal or {"code": -32602, "message": "PERMISSION_DENIED"}

    async def intercept(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            result = await client.conn.ahandle(method, params)
        except CorePermissionDenied as exc:
            if exc.reason == "not_granted":
                raise WireError(refused) from None
            raise
        keep = {
            "files/consent": ("granted", "approvedPaths"),
            "files/read": ("content", "size", "mimeType", "lockId"),
            "files/write": ("bytesWritten", "lockId"),
        }.get(method)
        return result if keep is None else {key: result[key] for key in keep if key in result}

    return intercept


# -- lenient ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "refusal",
    [
        None,  # the reference client: -32602 "PERMISSION_DENIED", no data
        {"code": -32101, "message": "denied", "data": {"error": "PERMISSION_DENIED"}},  # no reason
        {"code": -32602, "message": "Invalid params"},  # a bare -32602
    ],
    ids=["sep-reference", "no-reason", "bare-32602"],
)
async def test_the_sep_drafts_dialect_reads_consents_and_writes(
    client: StdioClient, folder: Path, workdir: Path, consents: Consents, refusal: dict[str, Any] | None
) -> None:
    text = "zürich;münchen;€\n" * 400  # multi-byte characters across 1000-byte chunks
    (folder / "a.txt").write_text(text, encoding="utf-8")
    path = (folder / "a.txt").relative_to(workdir).as_posix()
    client.intercept = sep_dialect(client, refusal=refusal)
    before = len(consents.requests)
    got = await call(
        client,
        "read_text",
        args={"path": path, "chunk_size": 1000},
        consent_message="Read a.txt",
        consent_operations=["read", "write"],
    )
    assert got == {"ok": text}
    [asked] = consents.requests[before:]
    assert asked.operations == ("read", "write")
    methods = [a.method for a in client.answered]
    assert methods[:3] == ["files/read", "files/consent", "files/read"]
    assert set(methods[3:]) == {"files/read"}
    # The consent answered without operations granted the ones asked: the write needs no prompt.
    written = await call(client, "write_text", args={"path": path, "text": "ünï\n"}, consent_message="x")
    assert written["ok"]["bytes_written"] == written["ok"]["size"] == len("ünï\n".encode())
    assert (folder / "a.txt").read_text(encoding="utf-8") == "ünï\n"
    assert len(consents.requests) == before + 1


async def test_a_consent_without_operations_grants_those_asked(client: StdioClient, folder: Path) -> None:
    client.intercept = sep_dialect(client)
    answer = await call(client, "consent", args={"message": "m", "paths": ["data/x"], "operations": ["read"]})
    assert answer["ok"]["granted"] and answer["ok"]["operations"] == ["read"]
    everything = await call(client, "consent", args={"message": "m", "paths": ["data/y"]})
    assert everything["ok"]["operations"] == ["read", "write", "delete", "watch"]
    assert everything["ok"]["approved_paths"] == ["data/y"]


async def test_a_real_bad_params_error_asks_consent_once_then_is_raised(
    client: StdioClient, folder: Path, workdir: Path, consents: Consents
) -> None:
    (folder / "a.txt").write_text("x")
    path = (folder / "a.txt").relative_to(workdir).as_posix()

    async def always_bad(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "files/read":
            raise WireError({"code": -32602, "message": "Invalid params"})
        return None

    client.intercept = always_bad
    before = len(consents.requests)
    result = await call(client, "read_text", args={"path": path}, consent_message="Read it")
    assert result["error"]["class"] == "InvalidParamsError"
    assert [a.method for a in client.answered] == ["files/read", "files/consent", "files/read"]
    assert len(consents.requests) == before + 1


async def test_reasons_that_consent_cannot_cure_ask_nothing(
    client: StdioClient, folder: Path, workdir: Path
) -> None:
    (workdir / "ref" / "r.txt").write_text("read-only")
    client.intercept = None
    result = await call(client, "write_text", args={"path": "ref/r.txt", "text": "x"}, consent_message="m")
    assert (result["error"]["class"], result["error"]["reason"]) == ("PermissionDeniedError", "read_only")
    assert [a.method for a in client.answered] == ["files/write"]  # no consent asked
    assert (workdir / "ref" / "r.txt").read_text() == "read-only"


# -- strict ----------------------------------------------------------------------------------------


def lying(client: StdioClient, field: str, change: Any) -> Interceptor:
    """Answer reads through the core, then *change* their *field* (``offset`` from the second chunk on)."""

    async def intercept(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        result = await client.conn.ahandle(method, params)
        if method == "files/read" and (field != "offset" or result["offset"] > 0):
            result[field] = change(result[field])
        return result

    return intercept


@pytest.mark.parametrize(
    ("field", "change", "says"),
    [
        ("bytesRead", lambda n: n + 1, "bytes read"),
        ("bytesRead", lambda n: n - 1, "bytes read"),
        ("offset", lambda n: 0, "answered for offset 0"),
    ],
    ids=["bytesRead-more", "bytesRead-less", "offset"],
)
async def test_an_answer_that_cannot_be_true_is_an_integrity_error(
    client: StdioClient, folder: Path, workdir: Path, broker: Broker, field: str, change: Any, says: str
) -> None:
    (folder / "a.bin").write_bytes(bytes(range(256)) * 40)
    path = (folder / "a.bin").relative_to(workdir).as_posix()
    broker.allow(path, ops=("read",))
    client.intercept = lying(client, field, change)
    result = await call(client, "read_bytes", args={"path": path, "chunk_size": 4096})
    error = result["error"]
    assert error["class"] == "IntegrityError" and says in error["text"], error
    assert error["text"].startswith("the client's answer cannot be trusted")


# -- the example server ----------------------------------------------------------------------------


@pytest.fixture
async def analysis(broker: Broker, consents: Consents) -> AsyncIterator[StdioClient]:
    c = await StdioClient.start(
        ANALYSIS, broker, env=server_env(), name="analysis", consenter=CallbackConsenter(consents.decide)
    )
    try:
        yield c
    finally:
        await c.close()


def sales(folder: Path) -> tuple[Path, str]:
    rows = ["region,amount,units"] + [f"r{i % 7},{i * 1.5:.2f},{i % 13}" for i in range(30_000)]
    path = folder / "sales.csv"
    path.write_text("\n".join(rows) + "\n")
    return path, "\n".join(rows) + "\n"


async def test_profile_csv_fails_on_a_lying_client_instead_of_computing_wrong_numbers(
    analysis: StdioClient, folder: Path, workdir: Path, broker: Broker
) -> None:
    path, _ = sales(folder)
    rel = path.relative_to(workdir).as_posix()
    broker.allow(rel, ops=("read",))
    analysis.intercept = lying(analysis, "bytesRead", lambda n: n + 7)
    result = await analysis.call_tool("profile_csv", {"path": rel})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "cannot be trusted" in text and "bytes read" in text, text


async def test_profile_csv_works_in_the_sep_drafts_dialect(
    analysis: StdioClient, folder: Path, workdir: Path
) -> None:
    path, text = sales(folder)
    rel = path.relative_to(workdir).as_posix()
    analysis.intercept = sep_dialect(analysis)
    stats = await analysis.tool_json("profile_csv", {"path": rel})
    expected = CsvProfiler()
    expected.feed(text)
    assert {k: stats[k] for k in ("rows", "columns")} == {
        k: v for k, v in expected.finish().items() if k in ("rows", "columns")
    }
    assert [a.method for a in analysis.answered][:3] == ["files/read", "files/consent", "files/read"]


# -- roots -----------------------------------------------------------------------------------------


async def test_the_helper_exposes_the_clients_roots_and_their_read_only_flag(
    client: StdioClient, workdir: Path
) -> None:
    client.intercept = None
    roots = (await call(client, "roots"))["ok"]
    assert roots == [
        {
            "uri": (workdir / "data").resolve().as_uri(),
            "name": "data",
            "path": str((workdir / "data").resolve()),
            "read_only": False,
        },
        {
            "uri": (workdir / "ref").resolve().as_uri(),
            "name": "ref",
            "path": str((workdir / "ref").resolve()),
            "read_only": True,
        },
    ]


async def test_the_helper_reads_the_names_a_client_gives_in_meta(client: StdioClient, workdir: Path) -> None:
    """This project's client by default: names in ``_meta``, no locations; or both, merged by name."""
    client.intercept = None
    names = {"filesystemBrokering": {"roots": [{"name": "data"}, {"name": "ref", "readOnly": True}]}}
    client.roots_result = {"roots": [], "_meta": names}
    try:
        assert (await call(client, "roots"))["ok"] == [
            {"uri": None, "name": "data", "path": None, "read_only": False},
            {"uri": None, "name": "ref", "path": None, "read_only": True},
        ]
        data_uri = (workdir / "data").resolve().as_uri()
        client.roots_result = {"roots": [{"uri": data_uri, "name": "data"}], "_meta": names}
        assert (await call(client, "roots"))["ok"] == [
            {"uri": data_uri, "name": "data", "path": str((workdir / "data").resolve()), "read_only": False},
            {"uri": None, "name": "ref", "path": None, "read_only": True},
        ]
    finally:
        client.roots_result = None


# -- eras and descriptions -------------------------------------------------------------------------


async def test_a_modern_era_client_is_told_its_era_is_the_cause() -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    params = StdioServerParameters(
        command=ANALYSIS[0], args=[*ANALYSIS[1:], "--require-brokering"], env=server_env()
    )
    async with Client(params) as modern:
        assert modern.protocol_version == "2026-07-28"
        with pytest.raises(MCPError) as info:
            await modern.call_tool("profile_csv", {"path": "data/x.csv"})
    # A modern client without the files extension: FILES_UNAVAILABLE, outside the reserved range.
    assert info.value.code == -31112
    assert info.value.error.data == {"error": "FILES_UNAVAILABLE", "reason": "no_extension"}
    message = info.value.message
    assert "2026-07-28" in message and "io.github.jupyter-fsbroker/files" in message, message
    assert "handshake era" in message


async def test_the_example_servers_tool_descriptions_are_cleaned(analysis: StdioClient) -> None:
    tools = (await analysis.request("tools/list"))["tools"]
    profile = next(tool for tool in tools if tool["name"] == "profile_csv")["description"]
    assert profile.startswith("Per-column statistics") and "\n        " not in profile
    assert not profile.endswith((" ", "\n"))
