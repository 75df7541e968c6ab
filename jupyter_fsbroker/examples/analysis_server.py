"""The "remote analysis server" of the tutorials, written with the server-side helper.

Run it over stdio (the client spawns it)::

    python -m jupyter_fsbroker.examples.analysis_server

or serve Streamable HTTP at ``http://HOST:PORT/mcp`` (port 0: a free port,
which the server names on stderr: ``analysis server: listening on http://…``)::

    python -m jupyter_fsbroker.examples.analysis_server --http 127.0.0.1:8765

Tools (paths as the notebook shares them, e.g. ``data/sales.csv``):

``profile_csv(path, engine="auto")``
    Streams a CSV of any size in chunks (never the whole file in memory) and
    returns per-column statistics: count, missing, numeric min/max/mean/std,
    distinct count (capped), top values. A file of more than 8 MiB is parsed
    by pyarrow when installed (``engine="arrow"``: any file), others (or with
    ``engine="python"``) by the standard library: the same result.
``profile_parquet(path, columns=None)``
    The same statistics of a Parquet file's columns, reading only their bytes.
``query(sql, tables, output="")``
    DuckDB SQL over CSV and Parquet files (``tables={"orders": "data/orders.parquet"}``),
    reaching nothing but them; up to 1000 rows inline, a larger result written
    to ``output`` as Parquet, atomically.
``write_report(path)``
    Profiles the CSV and writes a Markdown report next to it
    (``sales.csv`` → ``sales.report.md``).
``filter_csv(path, column, value, output)``
    Streams a CSV and writes the rows where ``column`` equals ``value`` to
    ``output``, staged in chunks and committed at once (atomically).
``read_text(path)`` and ``write_text(path, text, if_match="")``
    Read a small text file with its etag; write one atomically, optionally
    only if it has not changed since (``ifMatch``, optimistic concurrency).
``list_files(path, recursive=False)``
    A folder's entries as the client shows them.
``checksum(path)``
    The sha256 of a file of any size, read as bytes in 1 MiB chunks, 4 in flight.
``atomic_increment(path)``
    Locked read-modify-write of a counter file: ``keepLocked`` read, write,
    unlock.
``lock_file(path)`` and ``unlock_file(lock_id)``
    Keep a file locked across tool calls (``keepLocked``): others get
    FILE_LOCKED until it is unlocked, the connection ends, or the user
    force-releases it.
``watch_changes(path, seconds=5, until="")``
    Reports the change events received for a few seconds, or until a file
    named ``until`` (``_SUCCESS``, say) appears.

Each tool asks the user's consent (``files/consent``) for what it needs, the
first time an operation is refused as not granted. A client that does not
advertise ``filesystemBrokering`` gets JSON-RPC error -32603 with SEP-1708's
message from any tool (or already at ``initialize`` with
``--require-brokering``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import inspect
import posixpath
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import IO, TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from jupyter_fsbroker.serverkit import (
    MAX_CHUNK_BYTES,
    FilesClient,
    FilesExtension,
    enable_files,
    files,
    load_state_keys,
    run_stdio,
)
from jupyter_fsbroker.serverkit.bearer import protect
from jupyter_fsbroker.wire.modern import routed

from .csvstream import CsvProfiler, RowFilter, render_report, report_path
from .http_serving import endpoint, host_port, listen, serve

if TYPE_CHECKING:
    from jupyter_fsbroker.serverkit.filesystem import BrokeredFileSystem

__all__ = ["CsvProfiler", "build_server", "main", "render_report", "report_path"]

_Tool = TypeVar("_Tool", bound=Callable[..., Any])
_Register = Callable[[_Tool], _Tool]

#: ``profile_csv`` leaves a CSV larger than this to pyarrow, when installed. The standard library
#: parses a smaller one about as fast as it arrives (and pays no import of pyarrow).
ARROW_FROM_BYTES = 8 * 1024 * 1024
#: Read-ahead of the CSV file Arrow profiles (beyond each batch it reads).
READ_AHEAD_BYTES = 8 * 1024 * 1024
#: Most change events ``watch_changes`` reports.
MAX_EVENTS = 1000
#: Longest ``watch_changes`` in seconds.
MAX_WATCH_SECONDS = 300.0


def _arrow() -> bool:
    """Whether pyarrow and fsspec (and so the fast profilers) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("pyarrow", "fsspec"))


def _arrow_profile(fs: BrokeredFileSystem, path: str, delimiter: str) -> tuple[dict[str, Any], int]:
    from .arrowstats import BATCH_BYTES, profile_arrow

    def open_csv(block: int) -> IO[bytes]:
        # The header's probe reads one small block. The data: Arrow reads a batch at a time, and a
        # miss of the file's cache reads further at once, several wire chunks in flight, so that
        # the wire is not waited for batch by batch.
        file: IO[bytes] = fs.open(path, "rb", block_size=block if block < BATCH_BYTES else READ_AHEAD_BYTES)
        return file

    return profile_arrow(open_csv, delimiter=delimiter)


async def profile(
    fs: FilesClient,
    path: str,
    *,
    encoding: str = "utf-8",
    delimiter: str = ",",
    engine: str = "auto",
) -> dict[str, Any]:
    """Profile the CSV at *path* through *fs*, in chunks.

    *engine* ``"arrow"``, or ``"auto"`` for a file of more than
    :data:`ARROW_FROM_BYTES`: with pyarrow installed and a UTF-8 file, Arrow
    parses the record batches it reads through the kit's fsspec filesystem.
    Otherwise, or if Arrow does not take the file as a table (ragged rows...),
    the standard library does, in a worker thread while the next chunks are
    read. The result is the same either way, ``engine`` says which ran;
    ``seconds`` leaves out the wait for the user's consent.
    """
    if engine not in ("auto", "arrow", "python"):
        raise ToolError(f"engine {engine!r}: 'auto', 'arrow' or 'python'")
    started = time.perf_counter()
    waited = fs.consent_seconds
    arrow = engine != "python" and _arrow() and encoding.replace("-", "").lower() == "utf8"
    done = (
        None
        if engine == "arrow" and arrow
        else await _python(fs, path, encoding, delimiter, large_to_arrow=arrow)
    )
    if done is None:  # Arrow's turn
        from .arrowstats import NotTabular

        brokered = fs.fsspec()
        try:
            result, chunks = await brokered.run_sync(_arrow_profile, brokered, path, delimiter)
        except NotTabular:  # the standard library reports the file as it is
            done = await _python(fs, path, encoding, delimiter, large_to_arrow=False)
            assert done is not None
        else:
            size = (await fs.stat(path)).size
            return _timed(path, size, chunks, "arrow", result, started, fs.consent_seconds - waited)
    size, chunks, result = done
    return _timed(path, size, chunks, "python", result, started, fs.consent_seconds - waited)


async def _python(
    fs: FilesClient, path: str, encoding: str, delimiter: str, *, large_to_arrow: bool
) -> tuple[int, int, dict[str, Any]] | None:
    """``(size, chunks, profile)`` by the standard library; ``None`` if *large_to_arrow* and it is large."""
    profiler = CsvProfiler(delimiter)
    chunks = 0
    async with fs.iter_chunks(path, encoding=encoding) as stream:
        async for text in stream:
            if not chunks and large_to_arrow and (stream.size or 0) > ARROW_FROM_BYTES:
                return None  # the first chunk says how large: the rest is Arrow's
            chunks += 1
            await anyio.to_thread.run_sync(profiler.feed, text)
        size = stream.size or 0
    return size, chunks, await anyio.to_thread.run_sync(profiler.finish)


def _timed(
    path: str, size: int, chunks: int, engine: str, result: dict[str, Any], started: float, waited: float
) -> dict[str, Any]:
    seconds = max(time.perf_counter() - started - waited, 0.0)
    return {
        "path": path,
        "bytes": size,
        "chunks": chunks,
        "engine": engine,
        "seconds": round(seconds, 3),
        **result,
    }


def _fsspec(fs: FilesClient) -> BrokeredFileSystem:
    if not _arrow():
        raise ToolError("this server has no pyarrow (or fsspec): install them for Parquet and SQL")
    return fs.fsspec()


def _parquet_profile(
    fs: BrokeredFileSystem, path: str, columns: list[str] | None
) -> tuple[dict[str, Any], int]:
    from .arrowstats import profile_parquet

    # No read-ahead: pyarrow reads each column chunk whole, and bytes past one belong to the next
    # column, which is not wanted.
    with fs.open(path, "rb", cache_type="none") as f:
        return profile_parquet(f, columns)


def _run_query(
    fs: BrokeredFileSystem, sql: str, tables: dict[str, str], output: str | None
) -> dict[str, Any]:
    from .sqlquery import run_query

    return run_query(fs, sql, tables, output)


@contextlib.contextmanager
def _data_errors() -> Iterator[None]:
    """Say what is wrong with the data or the SQL (a missing column, a syntax error) to the caller.

    mcp reports any other exception of a tool as "Error executing tool", without its words.
    """
    try:
        yield
    except ValueError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb", "pyarrow"):
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        raise


async def _filtered(fs: FilesClient, path: str, keep: RowFilter) -> AsyncIterator[bytes]:
    """The CSV text of the rows *keep* keeps, encoded, while *path* streams in."""
    async with fs.iter_chunks(path, encoding="utf-8") as stream:
        async for text in stream:
            out = await anyio.to_thread.run_sync(keep.feed, text)
            if out:
                yield out.encode("utf-8")
    rest = keep.finish()
    if rest:
        yield rest.encode("utf-8")


def build_server(
    *,
    require_brokering: bool = False,
    auth: Mapping[str, Any] | None = None,
    state_keys: Sequence[bytes] | None = None,
    instance: str | None = None,
) -> MCPServer[Any]:
    """The analysis server with its tools (see the module's docstring).

    *auth*: the keyword arguments of :func:`~jupyter_fsbroker.serverkit.bearer.protect`'s
    answer, to serve behind MCP authorization. *state_keys*: the key ring the 2026-07-28
    era's continuations are sealed with (replicas given the same ring continue each other's
    calls); ``None``, a key of this process only. *instance*: this replica's name, which its
    continuations carry for a proxy to route a call back to it (``FilesExtension``'s).
    """
    server: MCPServer[Any] = MCPServer(
        "jupyter-fsbroker-analysis",
        instructions=(
            "Analyses files the user shares from their notebook (SEP-1708 brokered filesystem). "
            "Paths are as the notebook shares them, e.g. 'data/sales.csv'."
        ),
        extensions=[FilesExtension(state_keys, instance=instance)],
        **(auth or {}),
    )
    enable_files(server, require=require_brokering)

    def tool(fn: _Tool) -> _Tool:
        # mcp takes the docstring as it is, indentation and all: clients show it cleaned.
        return server.tool(description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    _add_csv_tools(tool)
    _add_text_tools(tool)
    _add_lock_tools(tool)
    _add_watch_tools(tool)
    return server


def _add_csv_tools(tool: _Register[Any]) -> None:
    @tool
    async def profile_csv(path: str, ctx: Context, engine: str = "auto") -> dict[str, Any]:
        """Per-column statistics of a CSV file of any size, read in chunks.

        Returns rows, and for each column: count, missing, distinct (capped),
        top values, and for numeric columns min, max, mean and std. engine:
        "auto" (pyarrow for files over 8 MiB, when installed), "arrow" or
        "python" (the standard library).
        """
        fs = files(ctx, consent_message=f"Profile {path}: read it and compute per-column statistics")
        async with fs:
            with _data_errors():
                return await profile(fs, path, engine=engine)

    @tool
    async def profile_parquet(path: str, ctx: Context, columns: list[str] | None = None) -> dict[str, Any]:
        """Per-column statistics of a Parquet file, reading only the given columns (default all).

        The same statistics as profile_csv; only those columns' bytes are read.
        """
        fs = files(ctx, consent_message=f"Profile {path}: read its columns and compute statistics")
        started, waited = time.perf_counter(), fs.consent_seconds
        async with fs:
            brokered = _fsspec(fs)
            with _data_errors():
                result, batches = await brokered.run_sync(_parquet_profile, brokered, path, columns)
            size = (await fs.stat(path)).size
        return _timed(path, size, batches, "arrow", result, started, fs.consent_seconds - waited)

    @tool
    async def query(sql: str, tables: dict[str, str], ctx: Context, output: str = "") -> dict[str, Any]:
        """SQL (DuckDB) over CSV and Parquet files: tables maps view names to paths.

        For example tables={"orders": "data/orders.parquet"} and
        sql="SELECT region, sum(quantity) FROM orders GROUP BY region". Up to
        1000 rows come back inline; a larger result is written to output as
        Parquet (atomically) and summarised. Only the files named in tables
        are read, and only the parts of them the query needs.
        """
        access = {path: ["read"] for path in tables.values()}
        if output:
            access[output] = ["write"]
        fs = files(ctx, consent_message=f"Query {', '.join(tables.values())} with SQL", consent_access=access)
        started, waited = time.perf_counter(), fs.consent_seconds
        async with fs:
            brokered = _fsspec(fs)
            with _data_errors():
                result = await brokered.run_sync(_run_query, brokered, sql, tables, output or None)
        seconds = max(time.perf_counter() - started - (fs.consent_seconds - waited), 0.0)
        return {**result, "seconds": round(seconds, 3)}

    @tool
    async def write_report(path: str, ctx: Context) -> dict[str, Any]:
        """Profile a CSV and write a Markdown report next to it (sales.csv -> sales.report.md)."""
        report = report_path(path)
        fs = files(
            ctx,
            consent_message=f"Profile {path} and write the report {report}",
            consent_access={path: ["read"], report: ["write"]},  # never write on the data itself
        )
        async with fs:
            with _data_errors():
                stats = await profile(fs, path)
            written = await fs.write_text(report, render_report(stats, generated=fs.started))
        return {"report": report, "bytes": written.bytes_written, "rows": stats["rows"]}

    @tool
    async def filter_csv(path: str, column: str, value: str, output: str, ctx: Context) -> dict[str, Any]:
        """Write the rows of a CSV whose column equals a value to another CSV, atomically.

        Reads in chunks and writes as it reads: the output is staged in chunks
        and replaces the file at once when complete, so no one ever sees half
        of it, and a failure leaves the old file as it was.
        """
        fs = files(
            ctx,
            consent_message=f"Copy the rows of {path} where {column} is {value!r} to {output}",
            consent_access={path: ["read"], output: ["write"]},
        )
        keep = RowFilter(column, value)
        started = time.perf_counter()
        async with fs:
            with _data_errors():
                written = await fs.write_bytes(output, _filtered(fs, path, keep))
        return {
            "path": path,
            "output": output,
            "rows": keep.rows,
            "matched": keep.matched,
            "bytes": written.bytes_written,
            "chunks": written.chunks,
            "seconds": round(time.perf_counter() - started, 3),
        }


def _add_text_tools(tool: _Register[Any]) -> None:
    @tool
    async def read_text(path: str, ctx: Context) -> dict[str, Any]:
        """Read a text file of at most 2 MiB, with its etag (for write_text's if_match)."""
        fs = files(ctx, consent_message=f"Read {path}")
        async with fs:
            chunk = await fs.read(path, length=MAX_CHUNK_BYTES)
        if not chunk.eof:
            raise ToolError(f"{path} has {chunk.size:,} bytes: read_text reads files of at most 2 MiB")
        return {"path": path, "text": chunk.content, "etag": chunk.etag, "size": chunk.size}

    @tool
    async def write_text(path: str, text: str, ctx: Context, if_match: str = "") -> dict[str, Any]:
        """Write a text file atomically (created if missing).

        With if_match (an etag from read_text), write only if the file has not
        changed since: otherwise PRECONDITION_FAILED, and nothing is written.
        """
        fs = files(ctx, consent_message=f"Write {path}", consent_operations=("write",))
        async with fs:
            written = await fs.write_text(path, text, if_match=if_match or None)
        return {"path": path, "bytes": written.bytes_written, "etag": written.etag}

    @tool
    async def list_files(path: str, ctx: Context, recursive: bool = False) -> dict[str, Any]:
        """List a folder: name, path, type, size and modification time of each entry."""
        fs = files(ctx, consent_message=f"List {path}", consent_operations=("read",))
        async with fs:
            entries = await fs.list_dir(path, recursive=recursive)
        return {"path": path, "entries": [asdict(entry) for entry in entries]}

    @tool
    async def checksum(path: str, ctx: Context) -> dict[str, Any]:
        """The sha256 of a file of any size, read as bytes in 1 MiB chunks, 4 in flight."""
        digest, size = hashlib.sha256(), 0
        fs = files(ctx, consent_message=f"Read {path}")
        async with fs, fs.iter_chunks(path, chunk_size=1 << 20, concurrency=4) as chunks:
            async for data in chunks:
                digest.update(data)
                size += len(data)
        return {"path": path, "sha256": digest.hexdigest(), "bytes": size}


def _add_lock_tools(tool: _Register[Any]) -> None:
    @tool
    async def atomic_increment(path: str, ctx: Context) -> dict[str, Any]:
        """Add one to the integer in a counter file (created at 0), under an exclusive lock."""
        fs = files(ctx, consent_message=f"Update the counter {path}", consent_operations=("read", "write"))
        async with fs, fs.lock(path, create=True) as lock_id:
            text = await fs.read_text(path, lock_id=lock_id)
            value = int(text.strip() or "0") + 1
            await fs.write_text(path, f"{value}\n", lock_id=lock_id)
        return {"path": path, "value": value}

    @tool
    async def lock_file(path: str, ctx: Context) -> dict[str, Any]:
        """Lock a file for this connection until unlock_file, or until the connection ends.

        Everyone else gets FILE_LOCKED meanwhile; the notebook's user can
        force-release the lock.
        """
        fs = files(ctx, consent_message=f"Lock {path} so that no one else changes it")
        async with fs:
            chunk = await fs.read(path, length=0, encoding="base64", keep_locked=True)
        return {"path": path, "lock_id": chunk.lock_id}

    @tool
    async def unlock_file(lock_id: str, ctx: Context) -> dict[str, Any]:
        """Release a lock that lock_file took (NOT_FOUND if it was released already)."""
        async with files(ctx) as fs:
            await fs.unlock(lock_id)
        return {"lock_id": lock_id, "unlocked": True}


def _add_watch_tools(tool: _Register[Any]) -> None:
    @tool
    async def watch_changes(path: str, ctx: Context, seconds: float = 5.0, until: str = "") -> dict[str, Any]:
        """Watch a file or folder (recursively) for a few seconds; report the changes seen.

        With until (a file name such as _SUCCESS), stop as soon as a file of
        that name is created or moved in.
        """
        seconds = max(0.0, min(float(seconds), MAX_WATCH_SECONDS))
        fs = files(ctx, consent_message=f"Watch {path} for changes for {seconds:g} seconds")
        events: list[dict[str, Any]] = []
        finished = False
        async with fs, fs.watch(path, recursive=True) as watch:
            with anyio.move_on_after(seconds):
                async for event in watch:
                    events.append(asdict(event))
                    name = posixpath.basename(event.path)
                    done = bool(until) and event.event in ("created", "moved") and name == until
                    if done or len(events) >= MAX_EVENTS:
                        finished = done
                        break
        return {
            "path": path,
            "seconds": seconds,
            "count": len(events),
            "events": events,
            "until_seen": finished,
        }


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: stdio by default, ``--http HOST:PORT`` for Streamable HTTP at ``/mcp``."""
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_fsbroker.examples.analysis_server",
        description="An MCP analysis server that reads the notebook's files through SEP-1708 brokering.",
    )
    parser.add_argument(
        "--http",
        type=host_port,
        metavar="HOST:PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp (port 0: a free port, named on stderr)",
    )
    parser.add_argument(
        "--require-brokering",
        action="store_true",
        help="refuse clients without the filesystemBrokering capability already at initialize",
    )
    parser.add_argument(
        "--auth-issuer",
        metavar="URL",
        help="with --http: serve behind MCP authorization, accepting the JWT access tokens this "
        "authorization server issues for this server's URL",
    )
    parser.add_argument(
        "--auth-scope", action="append", default=[], metavar="SCOPE", help="a scope every request needs"
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="with --http: keep no session (files reach tools only on the 2026-07-28 era, by batches)",
    )
    parser.add_argument(
        "--state-key-file",
        metavar="FILE",
        help="the keys continuations are sealed with, one a line, the first sealing (replicas given "
        "the same file continue each other's calls); without it, a key of this process only",
    )
    parser.add_argument(
        "--instance",
        metavar="NAME",
        help="this replica's name (A-Z a-z 0-9 _ -), put before its continuations so that a proxy "
        "can route a call's continuations back to the replica that holds the call live",
    )
    args = parser.parse_args(argv)
    try:
        routed(args.instance, "")
    except ValueError as exc:
        parser.error(f"--instance: {exc}")
    keys = None
    if args.state_key_file:
        try:
            keys = load_state_keys(args.state_key_file)
        except (OSError, ValueError) as exc:
            parser.error(f"--state-key-file: {exc}")
    if args.http is None:
        if args.auth_issuer or args.auth_scope or args.stateless:
            parser.error("--auth-issuer, --auth-scope and --stateless need --http")
        run_stdio(
            build_server(require_brokering=args.require_brokering, state_keys=keys, instance=args.instance)
        )
        return
    host, port = args.http
    sock = listen(host, port)  # first: the URL, and so the resource, names the bound port
    auth = None
    if args.auth_issuer:
        auth = protect(issuer=args.auth_issuer, resource_url=endpoint(sock), scopes=args.auth_scope or None)
    server = build_server(
        require_brokering=args.require_brokering, auth=auth, state_keys=keys, instance=args.instance
    )
    serve(server, sock, host, stateless=args.stateless)


if __name__ == "__main__":
    main()
