"""Hostile ``files/*`` requests over a real connection: one answer each, never -32603, nothing outside.

A server process (``servers/fuzz_server.py``, plain JSON lines) writes requests no typed server
would send — every ``files/*`` method with wrong types, missing and extra fields, huge and
negative numbers (beyond 64 bits, ``1e400``), megabyte strings, NUL and control characters,
lone surrogate escapes, bogus lock, watch and cursor ids, deep paths, paths naming files whose
names are not valid UTF-8 — all at once, then an ordinary ``files/stat``. Each request must get
exactly one answer: a result, or an error of PROTOCOL.md's table (never -32603, which is for the
unexpected); the ordinary request must still work; and a folder beside the root must not
change.

Two clients answer: the product's (``protocol.open_connection``: the project's stdio transport
and the broker middleware), whose transport answers what is not a valid request (lone
surrogates, ``params`` that are not an object) with -32600 before the core sees it, and the
tests' hand-written JSON client (``tests/protocol/rawclient.py``), whose parser lets all of it
through to the core's dispatch, which must answer it too (-32602).

Besides the systematic table, generated requests: every run replays the same few examples (a
fixed seed: the regression corpus); with ``FSBROKER_FUZZ_EXAMPLES=N``, N more from a random
seed, which a failure prints (``FSBROKER_FUZZ_SEED`` runs the same examples again).
``scripts/test.sh`` sets it.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, given, note, seed, settings
from hypothesis import strategies as st

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import open_connection
from tests.protocol.rawclient import StdioClient, python_argv
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.env import server_env

pytestmark = [
    pytest.mark.anyio,
    # watchdog warns when a recursive watch and a deep mkdir race over the same new folders.
    pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning"),
]

FUZZ_SERVER = str(Path(__file__).resolve().parent / "servers" / "fuzz_server.py")

#: PROTOCOL.md's error table, the codes a request may be answered with (-32603 is not among them).
NAMED = {
    -32100: "FILE_LOCKED",
    -32101: "PERMISSION_DENIED",
    -32102: "NOT_FOUND",
    -32103: "ALREADY_EXISTS",
    -32104: "PRECONDITION_FAILED",
    -32105: "WRONG_TYPE",
    -32106: "TOO_LARGE",
    -32107: "RATE_LIMITED",
    -32108: "ENCODING_ERROR",
}
PLAIN = {-32602, -32601, -32600}

#: Every method and its fields, each with a value that makes a sensible request.
METHODS: dict[str, dict[str, Any]] = {
    "files/read": {
        "path": "data/hello.txt",
        "encoding": "utf-8",
        "offset": 0,
        "length": 4,
        "keepLocked": False,
    },
    "files/write": {"path": "data/scratch/w.txt", "content": "x", "encoding": "utf-8", "create": True},
    "files/list": {"path": "data", "recursive": True, "includeHidden": True, "maxEntries": 3},
    "files/stat": {"path": "data/hello.txt"},
    "files/create": {"path": "data/scratch/c", "type": "file", "content": "c", "parents": False},
    "files/delete": {"path": "data/scratch/gone.txt", "recursive": False},
    "files/rename": {"path": "data/scratch/r1.txt", "newPath": "data/scratch/r2.txt", "overwrite": False},
    "files/watch": {"path": "data", "recursive": True, "events": ["modified"]},
    "files/unwatch": {"watchId": "w_0123456789abcdef"},
    "files/unlock": {"lockId": "lock_" + "0" * 32},
    "files/consent": {"message": "fuzz", "requestedPaths": ["data/scratch"], "operations": ["read"]},
}
#: Fields every method may carry besides its own.
SHARED = {"lockId": "lock_" + "f" * 32, "ifMatch": "nope", "final": True, "exclusive": True}

MiB = 1 << 20

#: ``FSBROKER_FUZZ_EXAMPLES=N``: the random tests run N examples generated from a random seed,
#: printed with a failure (``FSBROKER_FUZZ_SEED`` runs the same ones again); without it they skip.
#: The corpus tests replay the same few examples of a fixed seed in every run.
EXAMPLES = int(os.environ.get("FSBROKER_FUZZ_EXAMPLES") or 0)
SEED = int(os.environ.get("FSBROKER_FUZZ_SEED") or random.SystemRandom().randrange(1 << 32))


def text(value: str) -> str:
    return json.dumps(value)  # ASCII: lone surrogates become \\udXXX escapes


#: Values as JSON text, good for any field.
VALUES: list[str] = [
    "null",
    "true",
    "false",
    "0",
    "-1",
    "-9223372036854775809",
    "9223372036854775808",
    "18446744073709551617",
    "123456789012345678901234567890123456789",
    "1e400",
    "-1e400",
    "1.5",
    "-0.0",
    '""',
    '"x"',
    "[]",
    "{}",
    '[1, "a", null]',
    '{"nested": {"deeper": [1, 2, {"x": "y"}]}}',
    "[" * 100 + "]" * 100,
    text("a\x00b"),
    text("\x01\x02\x1f\x7f\n\r\t"),
    text("\u202e\ufeff\ufffd"),
    text("\ud800"),
    text("x\udc80y"),
    text("data/caf\udce9"),
    text("\udfff\ud800"),
]

#: Path values (any path field).
PATHS: list[str] = [
    text("data/" + "a/" * 2000 + "f"),
    text("data/" + "deep/" * 300),
    text("data/caf\ufffd"),  # how a listing spells a name that is not valid UTF-8
    text("data/x" * 200),
    text("data/" + "n" * 300),
    text("../outside/secret.txt"),
    text("data/../../outside/secret.txt"),
    text("data/escape/secret.txt"),
    text("/etc/passwd"),
    text("file:///etc/passwd"),
    text("file://otherhost/data/hello.txt"),
    text("file:///data/%ff%fe"),
    text("http://example.com/x"),
    text("data/%2e%2e/%2e%2e/outside"),
    text("data/.env"),
    text("data/sub\x00/../../outside"),
    text("data/sub/\\..\\..\\outside"),
    text("~/.ssh/id_rsa"),
    text("data/\udce9\udc80"),
]

#: A few megabyte strings (one request each: they are heavy).
BIG = text("x" * MiB)
BIG_CASES = [
    ("files/read", "path"),
    ("files/write", "content"),
    ("files/write", "path"),
    ("files/list", "cursor"),
    ("files/read", "encoding"),
    ("files/consent", "message"),
    ("files/unlock", "lockId"),
]


@dataclass(frozen=True)
class Case:
    method: str
    params: str | None  # JSON text, or None for no "params" member


def with_field(method: str, field: str, value: str) -> str:
    """The method's good params as JSON text, with *field* set to the JSON text *value*."""
    marker = "@@VALUE@@"
    params = {**METHODS[method], field: marker}
    return json.dumps(params).replace(json.dumps(marker), value)


def table() -> list[Case]:
    """The systematic cases: every field of every method set to every odd value."""
    cases: list[Case] = []
    for method, fields in METHODS.items():
        cases.append(Case(method, None))
        cases.append(Case(method, "null"))
        cases.append(Case(method, "{}"))
        cases.append(Case(method, json.dumps({**fields, "unknownField": [1, {"a": None}], "": 0})))
        for shape in ("[]", '["data/hello.txt"]', '"data/hello.txt"', "42", "true"):
            cases.append(Case(method, shape))
        for field in [*fields, *SHARED]:
            for value in VALUES:
                cases.append(Case(method, with_field(method, field, value)))
            if field in ("path", "newPath"):
                for value in PATHS:
                    cases.append(Case(method, with_field(method, field, value)))
        for field in fields:
            missing = {k: v for k, v in fields.items() if k != field}
            cases.append(Case(method, json.dumps(missing)))
        consent_paths = '["data/\\udce9", 5, null, {"path": 1}, {"path": "data", "operations": "all"}]'
        if method == "files/consent":
            cases.append(Case(method, with_field(method, "requestedPaths", consent_paths)))
    for method, field in BIG_CASES:
        cases.append(Case(method, with_field(method, field, BIG)))
    deep = {"path": "data/scratch/" + "p/" * 300 + "f", "type": "file", "parents": True}
    cases.append(Case("files/create", json.dumps(deep)))
    for method in ("files/teleport", "files/", "files/read/../write", "files/READ"):
        cases.append(Case(method, json.dumps({"path": "data/hello.txt"})))
    return cases


# -- the world ---------------------------------------------------------------------------------


@dataclass
class World:
    base: Path
    data: Path
    outside: Path
    broker: Broker


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | str]]:
    found: dict[str, tuple[int, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            content: bytes | str = ""
            if os.path.islink(path):
                content = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    content = f.read()
            found[os.path.relpath(path, folder)] = (st.st_mode, st.st_mtime_ns, content)
    return found


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("fuzz")
    data = base / "data"
    outside = base / "outside"
    for folder in (data / "sub", data / "scratch", outside / "d"):
        folder.mkdir(parents=True)
    (data / "hello.txt").write_text("héllo\n", encoding="utf-8")
    (data / "sub" / "inner.txt").write_text("inner")
    (data / "escape").symlink_to(outside)
    with open(os.path.join(os.fsencode(data), b"caf\xe9"), "wb") as f:
        f.write(b"undecodable name")
    (outside / "secret.txt").write_text("must never change")
    (outside / "d" / "x").write_text("nor this")
    limits = Limits(ops_per_second=1e6, ops_burst=10**7, lock_wait=0.05)
    with make_broker(base, limits=limits) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        yield World(base, data, outside, broker)


@pytest.fixture(scope="module")
async def raw_client(world: World) -> AsyncIterator[StdioClient]:
    client = await StdioClient.start(
        python_argv(FUZZ_SERVER), world.broker, name="fuzz-raw", env=server_env()
    )
    try:
        yield client
        await no_late_answers(client)
    finally:
        await client.close()


@pytest.fixture(scope="module")
async def product_client(world: World) -> AsyncIterator[Any]:
    async with open_connection(
        world.broker, "fuzz-product", command=sys.executable, args=[FUZZ_SERVER], env=server_env()
    ) as conn:
        yield conn
        await no_late_answers(conn)


async def send(client: Any, cases: list[Case], *, linger: float = 0.2) -> dict[str, Any]:
    arguments = {
        "requests": [[case.method, case.params] for case in cases],
        "check_path": "data/hello.txt",
        "timeout": 120,
        "linger": linger,
    }
    if isinstance(client, StdioClient):
        report: dict[str, Any] = await client.tool_json("send", arguments, timeout=180)
        return report
    result = await client.call_tool("send", arguments, timeout=180)
    return json.loads(result["content"][0]["text"])  # type: ignore[no-any-return]


def check(report: dict[str, Any], cases: list[Case]) -> None:
    problems = []
    for case, answers in zip(cases, report["answers"], strict=True):
        shown = f"{case.method} {(case.params or '')[:160]}"
        if len(answers) != 1:
            problems.append(f"{len(answers)} answers to {shown}: {answers}")
            continue
        [answer] = answers
        if "result" in answer:
            continue
        code = answer.get("code")
        if code not in NAMED and code not in PLAIN:
            problems.append(f"{shown}: answered {answer}")
        elif code in NAMED and answer.get("name") != NAMED[code]:
            problems.append(f"{shown}: {answer} is not named {NAMED[code]}")
    assert report["stray"] == [], report["stray"]
    assert [list(a) for a in report["check"]] == [["result"]], report["check"]  # the connection works
    assert problems == [], "\n".join(problems[:40])


async def fuzz(client: Any, world: World, cases: list[Case], *, linger: float = 0.2) -> None:
    if EXAMPLES and currently_in_test_context():  # with a failing random example, how to run it again
        note(f"replay: FSBROKER_FUZZ_EXAMPLES={EXAMPLES} FSBROKER_FUZZ_SEED={SEED}")
    before = snapshot(world.outside)
    for start in range(0, len(cases), 400):
        batch = cases[start : start + 400]
        check(await send(client, batch, linger=linger), batch)
    assert snapshot(world.outside) == before


async def no_late_answers(client: Any) -> None:
    """No answer came late: an empty batch, listened to for a while, gets no stray (a fixture's end)."""
    report = await send(client, [], linger=1.0)
    assert report["stray"] == [], f"answers that came late: {report['stray']}"


# -- the tests ---------------------------------------------------------------------------------


async def test_every_method_through_the_raw_client(raw_client: StdioClient, world: World) -> None:
    await fuzz(raw_client, world, table())


async def test_every_method_through_the_product_client(product_client: Any, world: World) -> None:
    await fuzz(product_client, world, table())


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["data", "data/hello.txt", "data/sub", "data/scratch/h", "base64", "utf-16", "idna"]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(sorted({f for fields in METHODS.values() for f in fields} | set(SHARED)))


@st.composite
def requests(draw: st.DrawFn) -> Case:
    method = draw(st.sampled_from(sorted(METHODS)))
    params = dict(METHODS[method])
    for _ in range(draw(st.integers(0, 4))):
        params[draw(FIELD_NAMES | st.text(max_size=6))] = draw(JSON_VALUES)
    for field in draw(st.lists(st.sampled_from(sorted(params)), max_size=2)):
        params.pop(field, None)
    if draw(st.booleans()):
        params[draw(FIELD_NAMES)] = draw(st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3))
    return Case(method, json.dumps(params))


_SLOW_IS_FINE = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
settings.register_profile("fsbroker-fuzz-corpus", _SLOW_IS_FINE, max_examples=4, derandomize=True)
settings.register_profile(
    "fsbroker-fuzz-random", _SLOW_IS_FINE, max_examples=max(EXAMPLES, 1), print_blob=True
)
CORPUS = settings(settings.get_profile("fsbroker-fuzz-corpus"))


def random_examples(test: Any) -> Any:
    """*test* (a ``@given`` one) run on :data:`EXAMPLES` examples from :data:`SEED`, if asked for."""
    test = seed(SEED)(settings(settings.get_profile("fsbroker-fuzz-random"))(test))
    marks = [
        pytest.mark.slow,
        pytest.mark.timeout(300 + EXAMPLES),  # a tenth of a second an example, ten times that loaded
        pytest.mark.skipif(not EXAMPLES, reason="FSBROKER_FUZZ_EXAMPLES=N runs N (scripts/test.sh does)"),
    ]
    for mark in marks:
        test = mark(test)
    return test


#: The corpus's examples: batches of 40-80 requests at once (what a flood of them does).
CASES = st.lists(requests(), min_size=40, max_size=80)
#: The random examples: smaller batches, so that thousands of them fit in a few minutes (the
#: corpus keeps the large ones); a late second answer still shows, in a later batch or at the
#: fixture's end (:func:`no_late_answers`), so no example waits for one.
RANDOM_CASES = st.lists(requests(), min_size=8, max_size=24)


@CORPUS
@given(cases=CASES)
async def test_generated_requests_through_the_raw_client(
    raw_client: StdioClient, world: World, cases: list[Case]
) -> None:
    await fuzz(raw_client, world, cases)


@CORPUS
@given(cases=CASES)
async def test_generated_requests_through_the_product_client(
    product_client: Any, world: World, cases: list[Case]
) -> None:
    await fuzz(product_client, world, cases)


@random_examples
@given(cases=RANDOM_CASES)
async def test_random_requests_through_the_raw_client(
    raw_client: StdioClient, world: World, cases: list[Case]
) -> None:
    await fuzz(raw_client, world, cases, linger=0.0)


@random_examples
@given(cases=RANDOM_CASES)
async def test_random_requests_through_the_product_client(
    product_client: Any, world: World, cases: list[Case]
) -> None:
    await fuzz(product_client, world, cases, linger=0.0)
