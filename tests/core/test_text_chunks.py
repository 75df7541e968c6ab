"""Text reads split on characters, not bytes: chunked reads of any text reassemble exactly.

Each example writes a file, then reads it back through ``files/read`` in chunks of random small
lengths, each starting at ``offset + bytesRead`` of the previous one, until ``eof``.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_fsbroker.core.broker import Connection
from jupyter_fsbroker.core.errors import EncodingError, FilesError
from jupyter_fsbroker.core.limits import Limits
from tests.support.brokers import make_broker

_names = itertools.count()

#: Text that stresses character boundaries: astral characters (emoji), CJK, combining marks,
#: as well as anything else st.text() comes up with.
TRICKY = st.sampled_from(
    [
        "😀",
        "👩‍👩‍👧",
        "🇫🇷",
        "𝄞",
        "𐍈",
        "中",
        "文",
        "字",
        "\u00e9",
        "e\u0301",
        "\u0301",
        "ñ",
        "a",
        "\n",
        "\u200d",
        "\ufeff",
    ]
)
TEXT = st.one_of(
    st.text(),
    st.lists(TRICKY).map("".join),
    st.lists(st.one_of(TRICKY, st.text(max_size=3))).map("".join),
)
LENGTHS = st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40)

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Env:
    data: Path
    conn: Connection

    def new_file(self, content: bytes, suffix: str = ".txt") -> str:
        """Write *content* to a fresh file; return its request path."""
        name = f"f{next(_names)}{suffix}"
        (self.data / name).write_bytes(content)
        return f"data/{name}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("text_chunks")
    data = base / "data"
    data.mkdir()
    limits = Limits(ops_per_second=1e6, ops_burst=10**7)
    with make_broker(base, limits=limits) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        yield Env(data, broker.connect("chunk-reader"))


def read_in_chunks(conn: Connection, path: str, encoding: str, lengths: list[int]) -> list[dict[str, Any]]:
    """Read *path* chunk by chunk (lengths taken in turn from *lengths*) until eof."""
    chunks: list[dict[str, Any]] = []
    offset = 0
    for length in itertools.cycle(lengths):
        result = conn.handle(
            "files/read", {"path": path, "encoding": encoding, "offset": offset, "length": length}
        )
        assert result["offset"] == offset
        assert result["encoding"] == encoding
        chunks.append(result)
        offset += result["bytesRead"]
        if result["eof"]:
            return chunks
        # A chunk that is not the last one always makes progress.
        assert result["bytesRead"] > 0, result
        assert len(chunks) < 100_000
    raise AssertionError("unreachable")


def check_text_chunks(env: Env, text: str, encoding: str, lengths: list[int]) -> None:
    raw = text.encode(encoding)
    path = env.new_file(raw)
    chunks = read_in_chunks(env.conn, path, encoding, lengths)
    for chunk in chunks:
        content = chunk["content"]
        assert isinstance(content, str)
        # Every chunk is valid text on its own, and covers exactly bytesRead bytes.
        assert len(content.encode(encoding)) == chunk["bytesRead"], chunk
        assert chunk["size"] == len(raw)
    assert "".join(c["content"] for c in chunks) == text
    assert sum(c["bytesRead"] for c in chunks) == len(raw)
    assert chunks[-1]["offset"] + chunks[-1]["bytesRead"] == len(raw)
    assert all(not c["eof"] for c in chunks[:-1])


@PROPERTY
@given(text=TEXT, lengths=LENGTHS)
def test_utf8_chunks_reassemble(env: Env, text: str, lengths: list[int]) -> None:
    check_text_chunks(env, text, "utf-8", lengths)


@PROPERTY
@given(text=TEXT, lengths=LENGTHS)
def test_utf16le_chunks_reassemble(env: Env, text: str, lengths: list[int]) -> None:
    check_text_chunks(env, text, "utf-16-le", lengths)


@PROPERTY
@given(content=st.binary(max_size=600), lengths=LENGTHS)
def test_base64_chunks_reassemble(env: Env, content: bytes, lengths: list[int]) -> None:
    path = env.new_file(content, suffix=".bin")
    chunks = read_in_chunks(env.conn, path, "base64", lengths)
    out = b""
    for chunk, length in zip(chunks, itertools.cycle(lengths), strict=False):
        piece = base64.b64decode(chunk["content"], validate=True)
        assert len(piece) == chunk["bytesRead"]
        # Binary chunks are exactly the length asked for, except the last one.
        assert len(piece) == length or chunk["eof"]
        out += piece
    assert out == content


def test_utf8_chunk_never_splits_a_character(env: Env) -> None:
    text = "a😀b"  # 1 + 4 + 1 bytes
    path = env.new_file(text.encode())
    first = env.conn.handle("files/read", {"path": path, "offset": 0, "length": 3})
    assert (first["content"], first["bytesRead"], first["eof"]) == ("a", 1, False)
    second = env.conn.handle("files/read", {"path": path, "offset": 1, "length": 4})
    assert (second["content"], second["bytesRead"], second["eof"]) == ("😀", 4, False)
    # Shorter than one character: the chunk holds that one whole character.
    short = env.conn.handle("files/read", {"path": path, "offset": 1, "length": 1})
    assert short["content"].startswith("😀")
    assert short["bytesRead"] == len(short["content"].encode())
    last = env.conn.handle("files/read", {"path": path, "offset": 5, "length": 64})
    assert (last["content"], last["bytesRead"], last["eof"]) == ("b", 1, True)


@pytest.mark.parametrize(
    "content",
    [
        b"\xff",
        b"valid start \xc3\x28 then junk",
        b"abc\xe2\x82",  # a truncated character at the end of the file
        b"\xed\xa0\x80",  # an encoded surrogate
        b"\xc0\xaf",  # an overlong encoding of "/"
        "ok ✓ ".encode() * 100 + b"\x80",
    ],
)
def test_invalid_utf8_is_an_encoding_error_and_base64_works(env: Env, content: bytes) -> None:
    path = env.new_file(content, suffix=".dat")
    with pytest.raises(FilesError) as info:
        env.conn.handle("files/read", {"path": path, "encoding": "utf-8"})
    exc = info.value
    assert isinstance(exc, EncodingError)
    assert (exc.name, exc.code) == ("ENCODING_ERROR", -32108)
    assert exc.path == path
    # The error message never carries file content.
    assert "junk" not in exc.message
    result = env.conn.handle("files/read", {"path": path, "encoding": "base64"})
    assert base64.b64decode(result["content"]) == content
    assert result["eof"] is True
    assert result["bytesRead"] == result["size"] == len(content)


@PROPERTY
@given(
    content=st.binary(min_size=1, max_size=200).filter(lambda b: not _is_utf8(b)),
)
def test_any_invalid_utf8_file_is_refused_as_text_whole(env: Env, content: bytes) -> None:
    path = env.new_file(content, suffix=".dat")
    with pytest.raises(EncodingError) as info:
        env.conn.handle("files/read", {"path": path})
    assert info.value.code == -32108
    result = env.conn.handle("files/read", {"path": path, "encoding": "base64"})
    assert base64.b64decode(result["content"]) == content


def _is_utf8(content: bytes) -> bool:
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
