"""The kit keeps a modern call live in the process that ran its round: a call streams more than a
continuation could replay, and a kept call ends when its continuation expires, when a newer call
needs its place (it then goes on by replay), and when the server stops.

The client is :mod:`tests.support.modern_files` answering with a real core; the server runs in
this process (mcp's in-memory transport), so a test can see its tool end.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from jupyter_fsbroker.core import Broker, BrokerConfig
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.serverkit import FilesExtension, enable_files, files
from jupyter_fsbroker.wire.modern import EXTENSION_ID, MAX_CONTINUATION_CHARS, continuation_meta
from tests.support.modern_files import BatchAnswerer, call

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
BIG = 5 * 1024 * 1024  # random bytes: over twice what a continuation's journal can hold


class Served:
    """A server with the files extension, and the tools' runs that have ended (by path)."""

    def __init__(self, keys: list[bytes] | None = None, **extension: Any) -> None:
        self.extension = FilesExtension(keys, **extension)
        self.server: MCPServer[Any] = MCPServer("live-test", extensions=[self.extension])
        enable_files(self.server)
        self.ended: dict[str, asyncio.Event] = {}
        #: Set by a test's client when it performs a batch (the round has gone out).
        self.performing = asyncio.Event()

        @self.server.tool()
        async def size_of(path: str, ctx: Context) -> int:
            return len(await files(ctx).read_bytes(path))

        @self.server.tool()
        async def read_then_stat(path: str, ctx: Context) -> str:
            fs = files(ctx)
            try:
                text = await fs.read_text(path)
                return f"{text} {(await fs.stat(path)).size}"
            finally:
                self.ended_event(path).set()

        @self.server.tool()
        async def locked_reads(path: str, ctx: Context) -> str:
            fs = files(ctx)
            async with fs.lock(path):
                while True:  # until the client cancels the call
                    await fs.read_text(path)

        @self.server.tool()
        async def three_reads(path: str, ctx: Context) -> str:
            fs = files(ctx)
            return "|".join([await fs.read_text(path) for _ in range(3)])

        @self.server.tool()
        async def progress_between(path: str, ctx: Context) -> str:
            fs = files(ctx)
            first = await fs.read_text(path)
            # The request this context belongs to has ended by now: the tool goes on regardless.
            await ctx.report_progress(1, 2)
            return first + await fs.read_text(path)

        @self.server.tool()
        async def late_second(ctx: Context) -> str:
            fs = files(ctx)

            async def late() -> str:
                await self.performing.wait()
                return (await fs.read("data/b.txt", length=64)).content

            second = asyncio.ensure_future(late())
            # Small reads: the first round's batch has room left for the second.
            first = (await fs.read("data/a.txt", length=64)).content
            return first + await second

    def ended_event(self, path: str) -> asyncio.Event:
        return self.ended.setdefault(path, asyncio.Event())


@pytest.fixture
def core(tmp_path: Path) -> Iterator[Any]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "big.bin").write_bytes(os.urandom(BIG))
    for name in ("a.txt", "b.txt"):
        (data / name).write_text(name)
    config = BrokerConfig(lock_dir=str(tmp_path / ".locks"), trash_dir=str(tmp_path / ".trash"))
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        yield broker.connect("live")


async def _first_batch(client: Client, answerer: BatchAnswerer, path: str) -> dict[str, Any]:
    """The continuation meta answering the first batch of ``read_then_stat`` (not yet sent)."""
    raw = await client.session.call_tool(
        "read_then_stat", {"path": path}, meta=answerer.first_meta(), allow_claimed=True
    )
    batch = raw.model_dump(by_alias=True, mode="json")
    return continuation_meta(
        answerer.connection_id, batch["continuation"], answerer.answer(batch["operations"])
    )


async def _continue(client: Client, path: str, meta: dict[str, Any]) -> Any:
    return await client.session.call_tool(
        "read_then_stat", {"path": path}, meta={EXTENSION_ID: meta}, allow_claimed=True
    )


async def _finish(client: Client, answerer: BatchAnswerer, path: str, meta: dict[str, Any]) -> str:
    """Continue ``read_then_stat`` from *meta* to its result's text."""
    result = await _continue(client, path, meta)
    while not isinstance(result, CallToolResult):
        batch = result.model_dump(by_alias=True, mode="json")
        answers = answerer.answer(batch["operations"])
        result = await _continue(
            client, path, continuation_meta(answerer.connection_id, batch["continuation"], answers)
        )
    assert not result.is_error, result.content
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def test_a_call_reads_more_than_a_continuation_could_replay(core: Any) -> None:
    served = Served()
    answerer = BatchAnswerer(core)
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        result = await call(client, answerer, "size_of", {"path": "data/big.bin"})
    assert not result.is_error, result.content
    assert result.content[0].text == str(BIG)  # type: ignore[union-attr]
    sizes = [len(r.continuation) for r in answerer.rounds]
    assert len(sizes) >= 3
    # Past the first round's answers the journal no longer fits: the state is live only, small.
    assert max(sizes[1:]) < 4096 < MAX_CONTINUATION_CHARS, sizes
    assert len(served.extension.live) == 0, "a finished call is no longer kept"


async def test_a_tool_that_reports_progress_after_its_first_round_goes_on(core: Any) -> None:
    served = Served()
    answerer = BatchAnswerer(core)
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        result = await call(client, answerer, "progress_between", {"path": "data/a.txt"})
    assert not result.is_error, result.content
    assert result.content[0].text == "a.txt" * 2  # type: ignore[union-attr]
    assert len(answerer.rounds) == 2


async def test_what_a_tool_asks_after_its_round_went_out_waits_for_the_next_round(core: Any) -> None:
    # The second read is asked while the client performs the first batch: it is not in that
    # batch, whose answers the client sends, but in the next one.
    served = Served()
    answerer = BatchAnswerer(core)

    def read(params: dict[str, Any]) -> Any:
        served.performing.set()
        return core.handle("files/read", params)

    class Continuing:
        """The session, continuing once the tool's second task has asked (the loop turns over)."""

        def __init__(self, session: Any) -> None:
            self.session = session

        async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return await self.session.call_tool(*args, **kwargs)

    answerer.overrides["files/read"] = read
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        answerer.sessions = [Continuing(client.session)]
        result = await call(client, answerer, "late_second", {})
    assert not result.is_error, result.content
    assert result.content[0].text == "a.txtb.txt"  # type: ignore[union-attr]
    asked = [[op["params"]["path"] for op in r.operations] for r in answerer.rounds]
    assert asked == [["data/a.txt"], ["data/b.txt"]]


async def test_a_kept_call_ends_when_its_continuation_expires(core: Any) -> None:
    served = Served(ttl=0.5)
    answerer = BatchAnswerer(core)
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        meta = await _first_batch(client, answerer, "data/a.txt")
        assert len(served.extension.live) == 1
        with anyio.fail_after(10):
            await served.ended_event("data/a.txt").wait()
        assert len(served.extension.live) == 0
        with pytest.raises(MCPError) as info:
            await _continue(client, "data/a.txt", meta)
    assert info.value.error.data == {"error": "CONTINUATION_REFUSED", "reason": "expired"}


async def test_a_call_evicted_for_a_newer_one_goes_on_by_replay(core: Any) -> None:
    served = Served(live_calls=1)
    answerer = BatchAnswerer(core)
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        first = await _first_batch(client, answerer, "data/a.txt")
        second = await _first_batch(client, answerer, "data/b.txt")
        with anyio.fail_after(10):
            await served.ended_event("data/a.txt").wait()  # evicted: its run was cancelled
        assert not served.ended_event("data/b.txt").is_set()
        # Its journal fits in the continuation: the call goes on from it, re-run here (and kept
        # live in its turn, which evicts the second call, which goes on by replay too).
        assert await _finish(client, answerer, "data/a.txt", first) == "a.txt 5"
        assert served.ended_event("data/b.txt").is_set()
        assert await _finish(client, answerer, "data/b.txt", second) == "b.txt 5"


async def test_closing_the_extension_ends_every_kept_call(core: Any) -> None:
    served = Served()
    answerer = BatchAnswerer(core)
    async with Client(served.server, mode=MODERN, extensions=[answerer]) as client:
        await _first_batch(client, answerer, "data/a.txt")
        await _first_batch(client, answerer, "data/b.txt")
        assert len(served.extension.live) == 2
        served.extension.close()
        with anyio.fail_after(10):
            await served.ended_event("data/a.txt").wait()
            await served.ended_event("data/b.txt").wait()
        assert len(served.extension.live) == 0


async def _third_batch(client: Client, answerer: BatchAnswerer) -> dict[str, Any]:
    """The continuation meta answering the third batch of ``three_reads`` (not yet sent): its
    journal holds the answers of the first two rounds, a sealed segment each."""
    arguments = {"path": "data/a.txt"}
    result = await client.session.call_tool(
        "three_reads", arguments, meta=answerer.first_meta(), allow_claimed=True
    )
    for rounds in (1, 2, 3):
        batch = result.model_dump(by_alias=True, mode="json")
        meta = continuation_meta(
            answerer.connection_id, batch["continuation"], answerer.answer(batch["operations"])
        )
        if rounds == 3:
            return meta
        result = await client.session.call_tool(
            "three_reads", arguments, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    raise AssertionError("three_reads should take three rounds")


def _forgeries(token: str, other: str) -> dict[str, str]:
    """*token* (``head,segment,segment``) altered in each way a client could try; *other* is a
    continuation of another call of the same tool and principal."""
    head, first, second = token.split(",")
    flipped = second[:40] + ("A" if second[40] != "A" else "B") + second[41:]
    return {
        "a segment altered": f"{head},{first},{flipped}",
        "a segment dropped": f"{head},{second}",
        "the segments swapped": f"{head},{second},{first}",
        "a segment of another call": f"{head},{first},{other.split(',')[2]}",
        "a segment added": f"{head},{first},{second},{first}",
    }


async def test_another_replica_replays_the_journal_only_as_it_was_sealed(core: Any) -> None:
    keys = [os.urandom(32)]
    holder = Served(keys)
    answerer = BatchAnswerer(core)
    async with Client(holder.server, mode=MODERN, extensions=[answerer]) as client:
        meta = await _third_batch(client, answerer)
        other = await _third_batch(client, answerer)
    assert meta["continuation"].count(",") == 2, "a segment a round, after the head"
    asked = list(answerer.methods)
    for what, token in _forgeries(meta["continuation"], other["continuation"]).items():
        replica = Served(keys)
        async with Client(replica.server, mode=MODERN, extensions=[answerer]) as client:
            with pytest.raises(MCPError) as info:
                await client.session.call_tool(
                    "three_reads",
                    {"path": "data/a.txt"},
                    meta={EXTENSION_ID: {**meta, "continuation": token}},
                    allow_claimed=True,
                )
        assert info.value.error.data == {"error": "CONTINUATION_REFUSED", "reason": "invalid"}, what
        assert answerer.methods == asked, f"{what}: nothing asked of the client"
    # The continuation as sealed goes on there: the tool re-runs over the first two answers.
    replica = Served(keys)
    async with Client(replica.server, mode=MODERN, extensions=[answerer]) as client:
        result = await client.session.call_tool(
            "three_reads", {"path": "data/a.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    assert isinstance(result, CallToolResult) and not result.is_error, result
    assert result.content[0].text == "a.txt|a.txt|a.txt"  # type: ignore[union-attr]
    assert answerer.methods == asked, "the replay asked the client nothing again"


async def _locked_and_reading(client: Client, answerer: BatchAnswerer) -> tuple[dict[str, Any], str]:
    """The third batch of ``locked_reads`` (a read, not performed) as a continuation meta without
    answers, and the id of the lock the call holds."""
    arguments = {"path": "data/a.txt"}
    result = await client.session.call_tool(
        "locked_reads", arguments, meta=answerer.first_meta(), allow_claimed=True
    )
    lock_id = ""
    for _ in range(2):
        batch = result.model_dump(by_alias=True, mode="json")
        answers = answerer.answer(batch["operations"])
        lock_id = lock_id or answers[0].result["lockId"]  # type: ignore[index]
        meta = continuation_meta(answerer.connection_id, batch["continuation"], answers)
        result = await client.session.call_tool(
            "locked_reads", arguments, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    batch = result.model_dump(by_alias=True, mode="json")
    assert [op["method"] for op in batch["operations"]] == ["files/read"]
    return continuation_meta(answerer.connection_id, batch["continuation"], cancel=True), lock_id


async def _cancelled_to_the_end(client: Client, answerer: BatchAnswerer, meta: dict[str, Any]) -> Any:
    """Send the cancelling continuation *meta*, perform the clean-up batches, and return the end."""
    result = await client.session.call_tool(
        "locked_reads", {"path": "data/a.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
    )
    while not isinstance(result, CallToolResult):
        batch = result.model_dump(by_alias=True, mode="json")
        answers = answerer.answer(batch["operations"])
        meta = continuation_meta(answerer.connection_id, batch["continuation"], answers)
        result = await client.session.call_tool(
            "locked_reads", {"path": "data/a.txt"}, meta={EXTENSION_ID: meta}, allow_claimed=True
        )
    return result


@pytest.mark.parametrize("where", ["the replica holding it", "another replica"])
async def test_a_cancelled_call_releases_its_lock_and_ends(core: Any, where: str) -> None:
    keys = [os.urandom(32)]
    holder = Served(keys)
    answerer = BatchAnswerer(core)
    async with Client(holder.server, mode=MODERN, extensions=[answerer]) as client:
        meta, lock_id = await _locked_and_reading(client, answerer)
        asked = len(answerer.methods)
        if where == "another replica":
            # The holder restarted: another replica replays the call to where it was, cancels it there.
            holder.extension.close()
            other = Served(keys)
            async with Client(other.server, mode=MODERN, extensions=[answerer]) as elsewhere:
                result = await _cancelled_to_the_end(elsewhere, answerer, meta)
        else:
            result = await _cancelled_to_the_end(client, answerer, meta)
            assert len(holder.extension.live) == 0, "the cancelled call is no longer kept"
    assert result.is_error and "cancelled" in result.content[0].text, result
    # What the cancelled tool asked was its clean-up only: the release of its lock.
    assert answerer.methods[asked:] == ["files/unlock"]
    with pytest.raises(FilesError):  # released: the lock id is no longer the connection's
        core.handle("files/unlock", {"lockId": lock_id})
