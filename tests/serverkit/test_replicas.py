"""Three replicas of the example server behind Debian's nginx, round-robin and no affinity: tool
calls on the 2026-07-28 era succeed whichever replica each step lands on, and the same
deployment on the handshake era fails at once with the named error.

Each replica has an instance name (``--instance r0``…) that its continuations carry; nginx routes
a request whose ``Fsbroker-Instance`` header names one to it (a ``map`` on the header, stock
nginx), and round-robins the others. A client that sends the header streams a large file at the
cost of one batch a round; one that does not still gets small calls carried on by replay.

nginx is started and stopped by the test (``daemon off``, its own prefix in a temporary folder).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.core.audit import AuditRecord
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.protocol import ConnectionClosedError, open_connection
from jupyter_fsbroker.protocol.files_batches import BatchDesk, Progress
from jupyter_fsbroker.wire import catalogue
from jupyter_fsbroker.wire.modern import EXTENSION_ID
from tests.protocol.servers.harness import approve_all
from tests.support.ci import in_ci
from tests.support.modern_files import BatchAnswerer, call
from tests.support.processes import lines_until, stop_process
from tests.support.servers import AnalysisServer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.system,
    pytest.mark.skipif(
        shutil.which("nginx") is None and not in_ci(), reason="needs nginx (apt-get install nginx)"
    ),
]

ROWS = 50_000
_NGINX_CONF = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 256; }}
http {{
    log_format upstream '$upstream_addr $status $http_fsbroker_instance';
    access_log {prefix}/access.log upstream;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream replicas {{
{servers}
    }}
{routes}
    map $http_fsbroker_instance $replica {{
        default replicas;
{names}
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 8m;
        client_body_buffer_size 8m;  # in memory: the workers may not write this folder
        location / {{
            proxy_pass http://$replica;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }}
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[AnalysisServer], Path]]:
    prefix = tmp_path_factory.mktemp("nginx")
    keys = prefix / "state.keys"
    keys.write_text(secrets.token_hex(32) + "\n")
    keys.chmod(0o600)
    replicas: list[AnalysisServer] = []
    try:
        for number in range(3):
            replicas.append(
                AnalysisServer("--stateless", "--state-key-file", str(keys), "--instance", f"r{number}")
            )
        addresses = [r.url.removeprefix("http://").removesuffix("/mcp") for r in replicas]
        servers = "\n".join(f"        server {address};" for address in addresses)
        routes = "\n".join(
            f"    upstream r{number} {{ server {address}; }}" for number, address in enumerate(addresses)
        )
        names = "\n".join(f"        r{number} r{number};" for number in range(len(addresses)))
        port = _free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(
            _NGINX_CONF.format(prefix=prefix, servers=servers, routes=routes, names=names, port=port)
        )
        nginx = subprocess.Popen(
            ["nginx", "-p", str(prefix), "-c", str(conf)], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            assert nginx.stderr is not None
            lines_until(nginx.stderr.fileno(), lambda line: "start worker process" in line)
            yield f"http://127.0.0.1:{port}/mcp", replicas, prefix / "access.log"
        finally:
            stop_process(nginx)
            if nginx.stderr is not None:
                nginx.stderr.close()
    finally:
        for replica in replicas:
            replica.stop()


@pytest.fixture
def core(tmp_path: Path) -> Iterator[tuple[Path, Any, Broker]]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("n,double\n" + "".join(f"{i},{2 * i}\n" for i in range(ROWS)))
    (data / "counter.txt").write_text("0")
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read", "write"))
        yield data, broker.connect("replicas"), broker


def _routes(access_log: Path) -> list[tuple[str, str]]:
    """``(replica, Fsbroker-Instance header or "-")`` of each request nginx passed on, in order."""
    if not access_log.exists():
        return []
    return [
        (line.split()[0], line.split()[2]) for line in access_log.read_text().splitlines() if line.strip()
    ]


def _served(access_log: Path) -> list[str]:
    """The replica (``host:port``) nginx passed each request to, in order."""
    if not access_log.exists():
        return []
    return [line.split()[0] for line in access_log.read_text().splitlines() if line.strip()]


async def test_calls_succeed_through_three_replicas_round_robin(
    deployment: tuple[str, list[AnalysisServer], Path], core: tuple[Path, Any, Broker]
) -> None:
    url, replicas, access_log = deployment
    data, connection, broker = core
    before = len(_served(access_log))
    answerer = BatchAnswerer(connection)
    async with Client(url, mode="2026-07-28", extensions=[answerer]) as client:
        profile = await call(client, answerer, "profile_csv", {"path": "data/sales.csv"})
        report = await call(client, answerer, "write_report", {"path": "data/sales.csv"})
        counts = [
            await call(client, answerer, "atomic_increment", {"path": "data/counter.txt"}) for _ in range(5)
        ]
    assert not profile.is_error and profile.structured_content is not None, profile.content
    assert profile.structured_content["rows"] == ROWS
    assert not report.is_error and f"- Rows: {ROWS:,}" in (data / "sales.report.md").read_text()
    assert [c.structured_content["value"] for c in counts if c.structured_content] == [1, 2, 3, 4, 5]
    assert (data / "counter.txt").read_text().strip() == "5"
    served = _served(access_log)[before:]
    addresses = {r.url.removeprefix("http://").removesuffix("/mcp") for r in replicas}
    assert set(served) == addresses, f"round-robin should reach every replica, got {served}"
    steps = len(answerer.rounds)
    assert steps > 3, "the calls should have taken several steps, continued by other replicas"
    # One audit record per operation the client performed, none for replayed answers.
    assert len(broker.audit.records(server="replicas")) == len(answerer.methods)


async def test_the_same_deployment_on_the_handshake_era_fails_at_once_naming_the_fix(
    deployment: tuple[str, list[AnalysisServer], Path],
) -> None:
    url, _, _ = deployment
    async with Client(url, mode="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("profile_csv", {"path": "data/sales.csv"})
    assert "no return path" in info.value.message and EXTENSION_ID in info.value.message


BIG = 24 * 1024 * 1024


@pytest.fixture
def big_file(core: tuple[Path, Any, Broker]) -> tuple[str, str]:
    """A file too large for a continuation's journal (random bytes do not compress): path, sha256."""
    data, _, _ = core
    content = os.urandom(BIG)
    (data / "big.bin").write_bytes(content)
    return "data/big.bin", hashlib.sha256(content).hexdigest()


async def test_a_large_file_streams_through_the_replica_that_holds_the_call_live(
    deployment: tuple[str, list[AnalysisServer], Path],
    core: tuple[Path, Any, Broker],
    big_file: tuple[str, str],
) -> None:
    url, replicas, access_log = deployment
    _, _, broker = core
    path, sha256 = big_file
    before = len(_served(access_log))
    names = {r.url.removeprefix("http://").removesuffix("/mcp"): f"r{n}" for n, r in enumerate(replicas)}
    async with open_connection(broker, "routed", url=url, era="modern", consenter=approve_all()) as conn:
        assert conn.era == "modern"
        result = await conn.call_tool("checksum", {"path": path}, timeout=120)
    assert not result["isError"], result["content"]
    assert result["structuredContent"] == {"path": path, "sha256": sha256, "bytes": BIG}
    # discover and tools/list, the call's first request (no instance named: any replica may take
    # it), then its continuations, each naming the replica that ran the round before, sent there.
    routes = _routes(access_log)[before:]
    continued = [(names[replica], header) for replica, header in routes if header != "-"]
    opening = routes[: len(routes) - len(continued)]
    assert opening and all(header == "-" for _, header in opening), routes
    assert len(continued) >= BIG // (2 * 1024 * 1024), "a round carries at most 2 MiB of reads"
    assert len(set(continued)) == 1 and continued[0][0] == continued[0][1], continued
    reads = [r for r in broker.audit.records(server="routed") if r.method == "files/read"]
    assert len(reads) == BIG // (1024 * 1024), "one audit record per files/read the client performed"


async def test_a_live_only_continuation_sent_to_another_replica_is_refused_and_touches_nothing(
    deployment: tuple[str, list[AnalysisServer], Path],
    core: tuple[Path, Any, Broker],
    big_file: tuple[str, str],
) -> None:
    _, replicas, _ = deployment
    _, connection, broker = core
    path, _ = big_file
    answerer = BatchAnswerer(connection)
    async with (
        Client(replicas[0].url, mode="2026-07-28", extensions=[answerer]) as first,
        Client(replicas[1].url, mode="2026-07-28", extensions=[answerer]) as other,
    ):
        # Round 1 (nothing answered yet: replayable) goes to the other replica, which replays it
        # and keeps the call live; round 2 carries 2 MiB of answers: live there only.
        answerer.sessions = [first.session, other.session]
        with pytest.raises(MCPError) as info:
            await call(first, answerer, "checksum", {"path": path})
    assert info.value.error.code == catalogue.CONTINUATION_REFUSED.code
    assert info.value.error.data == {"error": "CONTINUATION_REFUSED", "reason": "live_elsewhere"}
    assert len(answerer.rounds) == 2
    # Nothing was asked after the refusal: the audit holds exactly the operations of two rounds.
    performed = sum(len(r.operations) for r in answerer.rounds)
    assert len(broker.audit.records(server="replicas")) == performed == len(answerer.methods)


# -- the real client through the replicas: consent once, revocation and Disconnect mid-call ----------


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[tuple[Path, Broker]]:
    """A broker with the data shared and nothing pre-approved: every grant comes from a consent."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("n,double\n" + "".join(f"{i},{2 * i}\n" for i in range(4 * ROWS)))
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        yield data, broker


class _Asked:
    """A consenter that approves the first consent of a connection and refuses every later one."""

    def __init__(self) -> None:
        self.requests: list[ConsentRequest] = []

    def decide(self, request: ConsentRequest) -> ConsentDecision:
        self.requests.append(request)
        return ConsentDecision.approve_all(request) if len(self.requests) == 1 else ConsentDecision.deny()


def _performed(
    monkeypatch: pytest.MonkeyPatch, on_batch: Callable[[list[str]], object] | None = None
) -> list[str]:
    """The methods of every batch operation the client performs, in order (*on_batch* is given
    each batch's as the client begins it)."""
    methods: list[str] = []
    perform = BatchDesk.perform

    async def spy(
        self: BatchDesk, operations: Sequence[dict[str, Any]], progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        batch = [str(op.get("method")) for op in operations]
        methods.extend(batch)
        if on_batch is not None:
            on_batch(batch)
        return await perform(self, operations, progress)

    monkeypatch.setattr(BatchDesk, "perform", spy)
    return methods


@contextlib.contextmanager
def _after_the_first_read(broker: Broker, act: Callable[[], object]) -> Iterator[None]:
    """Run *act* once, when the broker has performed the first read that succeeded (its answer has
    not left yet: the server's next batch meets what *act* did)."""
    done: list[bool] = []

    def watch(record: AuditRecord) -> None:
        if record.method == "files/read" and record.error is None and not done:
            done.append(True)
            act()

    stop = broker.audit.subscribe(watch)
    try:
        yield
    finally:
        stop()
    assert done, "no read succeeded during the call"


async def test_the_client_asks_consent_once_for_a_call_that_spans_replicas(
    deployment: tuple[str, list[AnalysisServer], Path],
    bare: tuple[Path, Broker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _, access_log = deployment
    data, broker = bare
    asked = _Asked()
    performed = _performed(monkeypatch)
    before = len(_served(access_log))
    consenter = CallbackConsenter(asked.decide)
    async with open_connection(broker, "replicas", consenter=consenter, era="modern", url=url) as conn:
        report = await conn.call_tool("write_report", {"path": "data/sales.csv"}, timeout=120)
    assert report["isError"] is False, report
    assert f"- Rows: {4 * ROWS:,}" in (data / "sales.report.md").read_text()
    assert len(asked.requests) == 1
    served = set(_served(access_log)[before:])
    assert len(served) >= 2, f"the call should have been continued by other replicas, got {served}"
    records = broker.audit.records(server="replicas")
    assert [r.method for r in records] == performed
    assert performed.count("files/write") == 1 and performed.count("files/consent") == 1


async def test_a_revocation_mid_call_takes_effect_at_the_next_batch(
    deployment: tuple[str, list[AnalysisServer], Path],
    bare: tuple[Path, Broker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _, _ = deployment
    data, broker = bare
    asked = _Asked()
    performed = _performed(monkeypatch)
    consenter = CallbackConsenter(asked.decide)
    async with open_connection(broker, "replicas", consenter=consenter, era="modern", url=url) as conn:
        revoked: list[Any] = []
        with _after_the_first_read(broker, lambda: revoked.extend(conn.connection.revoke())):
            report = await conn.call_tool("write_report", {"path": "data/sales.csv"}, timeout=120)
        assert revoked, "the grant should have been revoked during the call"
        of_report = list(performed)
        # The broker keeps serving the connection: once the user shares the data again, a call works.
        broker.allow("data", ops=("read",))
        again = await conn.call_tool("profile_csv", {"path": "data/sales.csv"}, timeout=120)
    # The call ended with the error the legacy wire gives: the kit's refusal, naming the revocation;
    # every operation after it was refused, the report never written, and no second prompt shown.
    assert report["isError"] is True
    message = report["content"][0]["text"]
    assert "PERMISSION_DENIED" in message and "revoked" in message, message
    assert not (data / "sales.report.md").exists()
    assert "files/write" not in of_report and len(asked.requests) == 1
    first_read = next(
        i for i, r in enumerate(broker.audit.records()) if r.method == "files/read" and not r.error
    )
    later = broker.audit.records()[first_read + 1 : len(of_report)]
    assert later and all(r.error == "PERMISSION_DENIED" for r in later)
    assert again["isError"] is False and again["structuredContent"]["rows"] == 4 * ROWS


async def test_disconnect_mid_call_ends_the_call_and_touches_nothing_more(
    deployment: tuple[str, list[AnalysisServer], Path],
    bare: tuple[Path, Broker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _, _ = deployment
    data, broker = bare
    asked = _Asked()
    performed = _performed(monkeypatch)
    consenter = CallbackConsenter(asked.decide)
    async with open_connection(broker, "replicas", consenter=consenter, era="modern", url=url) as conn:
        with (
            _after_the_first_read(broker, lambda: conn.close("closed by the user")),
            pytest.raises(ConnectionClosedError) as info,
        ):
            await conn.call_tool("write_report", {"path": "data/sales.csv"}, timeout=120)
    # As on the legacy wire: the call ends with the connection's close, and no continuation is sent,
    # so nothing after the read that was running is performed.
    assert "closed by the user" in str(info.value)
    assert performed == ["files/read", "files/consent", "files/read"]
    assert [r.method for r in broker.audit.records(server="replicas")] == performed
    assert not (data / "sales.report.md").exists()
    # The broker keeps serving: a new connection's call succeeds.
    fresh = _Asked()
    async with open_connection(
        broker, "again", consenter=CallbackConsenter(fresh.decide), era="modern", url=url
    ) as other:
        profile = await other.call_tool("profile_csv", {"path": "data/sales.csv"}, timeout=120)
    assert profile["isError"] is False and profile["structuredContent"]["rows"] == 4 * ROWS


async def test_a_call_cancelled_mid_watch_ends_its_watch_through_the_replicas(
    deployment: tuple[str, list[AnalysisServer], Path],
    bare: tuple[Path, Broker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _, access_log = deployment
    _, broker = bare
    waiting = asyncio.Event()

    def on_batch(batch: list[str]) -> None:
        if "files/changes" in batch:
            waiting.set()  # the watch is on, and the client waits for its changes

    methods = _performed(monkeypatch, on_batch)
    before = len(_served(access_log))
    async with open_connection(broker, "replicas", consenter=approve_all(), era="modern", url=url) as conn:
        with anyio.fail_after(60):  # the watch would last 300 s
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    partial(conn.call_tool, "watch_changes", {"path": "data", "seconds": 300}, timeout=600)
                )
                await waiting.wait()
                tg.cancel_scope.cancel()  # the user interrupts the cell
        # The server was told and ended the tool, whose clean-up ended the watch; the broker
        # keeps serving the connection.
        again = await conn.call_tool("profile_csv", {"path": "data/sales.csv"}, timeout=120)
    # Cancelled while the client waited for changes: what the tool asked next was its clean-up.
    changes = methods.index("files/changes")
    assert methods[changes + 1] == "files/unwatch" and methods.count("files/changes") == 1, methods
    unwatched = [r for r in broker.audit.records(server="replicas") if r.method == "files/unwatch"]
    assert len(unwatched) == 1 and unwatched[0].error is None
    assert len(set(_served(access_log)[before:])) >= 2, "the call went through several replicas"
    assert again["isError"] is False, again
