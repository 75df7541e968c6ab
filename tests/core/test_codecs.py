"""Text encodings: every codec failure is ENCODING_ERROR, and chunked reads stay right for every codec.

Before: codecs that fail with something other than a decode or encode error (``idna`` with a
long label, ``undefined``, ``utf-16`` without a byte-order mark, ``punycode``) came back as
-32603, and ``utf-7`` or ``unicode_escape`` could decode to a lone surrogate that no reply can
carry. Now (PROTOCOL.md, Errors): any failure of a codec on the content is ENCODING_ERROR, an
unknown codec is -32602, and so is a codec that is not a text encoding (bytes to bytes,
str to str) — the same for ``files/read``, ``files/write`` and ``files/create``.
"""

from __future__ import annotations

import codecs
import encodings
import itertools
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_fsbroker.core.broker import Connection
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.core.textcodec import text_codec
from tests.support.brokers import ALL_OPS, make_broker

_names = itertools.count()

#: Every codec module of the standard library (``mbcs``/``oem`` exist on Windows only).
STDLIB = sorted(
    {m.name for m in pkgutil.iter_modules(encodings.__path__)} - {"aliases", "mbcs", "oem", "cp65001"}
)
TEXT_CODECS = [n for n in STDLIB if getattr(codecs.lookup(n), "_is_text_encoding", True)]
NOT_TEXT = [n for n in STDLIB if n not in TEXT_CODECS]
WHOLE_ONLY = [n for n in TEXT_CODECS if not text_codec(n, "x").resumable]
#: Codecs read in pieces (``undefined`` refuses every text, so there is nothing to piece together).
RESUMABLE = [n for n in TEXT_CODECS if n not in WHOLE_ONLY and n != "undefined"]


class Env:
    def __init__(self, data: Path, conn: Connection) -> None:
        self.data = data
        self.conn = conn

    def file(self, content: bytes) -> str:
        name = f"f{next(_names)}"
        (self.data / name).write_bytes(content)
        return f"data/{name}"

    def outcome(self, method: str, params: dict[str, Any]) -> tuple[int, str | None]:
        """``(0, None)`` for a result, else the error's code and name."""
        try:
            self.conn.handle(method, params)
        except FilesError as exc:
            return exc.code, exc.name
        return 0, None


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("codecs")
    data = base / "data"
    data.mkdir()
    with make_broker(base, limits=Limits(ops_per_second=1e6, ops_burst=10**7)) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        yield Env(data, broker.connect("codecs"))


def three_ways(env: Env, encoding: str, content: bytes, text: str) -> list[tuple[int, str | None]]:
    """The outcome of a read of *content*, and of a write and a create of *text*, in *encoding*."""
    new = f"data/n{next(_names)}"
    return [
        env.outcome("files/read", {"path": env.file(content), "encoding": encoding}),
        env.outcome("files/write", {"path": f"{new}w", "content": text, "encoding": encoding}),
        env.outcome(
            "files/create", {"path": f"{new}c", "type": "file", "content": text, "encoding": encoding}
        ),
    ]


def test_the_standard_library_is_all_here() -> None:
    assert {"utf_8", "utf_16", "idna", "punycode", "undefined", "cp1252", "big5"} <= set(TEXT_CODECS)
    assert {"rot_13", "base64_codec", "zlib_codec", "hex_codec"} <= set(NOT_TEXT)
    assert {"utf_16", "utf_7", "hz", "punycode", "idna", "iso2022_jp"} <= set(WHOLE_ONLY)
    assert {"utf_8", "utf_16_le", "cp1252", "gb18030", "unicode_escape"} <= set(RESUMABLE)


@pytest.mark.parametrize(
    ("encoding", "content", "text"),
    [
        ("utf-16", b"abc", "x"),  # no byte-order mark: a plain UnicodeError
        ("idna", b"xn--.", "x" * 70),  # an empty label; a label longer than 63
        ("undefined", b"abc", "abc"),
        ("punycode", b"a-9", "\udc80"),  # an incomplete punycode string
        ("utf-7", b"+2AA-", "\udc80"),  # decodes to a lone surrogate
        ("unicode_escape", b"\\ud800", "\udc80"),
        ("raw_unicode_escape", b"\\udc80", "\ud800"),
        ("ascii", b"\xff", "\xff"),
        ("utf-8", b"\xc3", "\udc80"),
    ],
)
def test_any_failure_of_a_codec_is_an_encoding_error(
    env: Env, encoding: str, content: bytes, text: str
) -> None:
    read, write, create = three_ways(env, encoding, content, text)
    assert read == (-32108, "ENCODING_ERROR")
    if encoding in ("utf-16", "punycode", "utf-7", "unicode_escape", "raw_unicode_escape"):
        return  # these encode any text: only their reads fail
    assert write == create == (-32108, "ENCODING_ERROR")


@pytest.mark.parametrize(
    "encoding", [*NOT_TEXT, "rot13", "hex", "no-such-codec", "utf\x00", "x" * 10_000, "..", ""]
)
def test_unknown_codecs_and_codecs_that_are_not_text_are_invalid_params(env: Env, encoding: str) -> None:
    outcomes = three_ways(env, encoding, b"abc", "abc")
    assert outcomes == [(-32602, None)] * 3, outcomes


def test_a_codec_registered_by_hand_is_read_whole_only(env: Env) -> None:
    def search(name: str) -> codecs.CodecInfo | None:
        if name != "shouting":
            return None
        return codecs.CodecInfo(
            lambda s, errors="strict": (s.upper().encode("ascii"), len(s)),
            lambda b, errors="strict": (bytes(b).decode("ascii").lower(), len(b)),
            name="shouting",
        )

    codecs.register(search)
    try:
        path = env.file(b"HELLO WORLD")
        whole = env.conn.handle("files/read", {"path": path, "encoding": "shouting"})
        assert whole["content"] == "hello world" and whole["eof"]
        for params in ({"offset": 2}, {"length": 4}):
            with pytest.raises(FilesError) as info:
                env.conn.handle("files/read", {"path": path, "encoding": "shouting", **params})
            assert (info.value.code, info.value.reason) == (-32602, "stateful_encoding")
    finally:
        codecs.unregister(search)


@pytest.mark.parametrize("encoding", WHOLE_ONLY)
def test_codecs_that_keep_state_are_read_from_the_start_only(env: Env, encoding: str) -> None:
    path = env.file("hello".encode(encoding))
    first = env.conn.handle("files/read", {"path": path, "encoding": encoding})
    assert first["content"] == "hello"
    with pytest.raises(FilesError) as info:
        env.conn.handle("files/read", {"path": path, "encoding": encoding, "offset": 1})
    assert (info.value.code, info.value.reason) == (-32602, "stateful_encoding")


#: Characters from many scripts, escapes and shift-sensitive bytes (``~``, ``+``, ``\``).
ALPHABET = st.sampled_from(list('abcXYZ 09.-+~\\\n\t"é€£ÄÖßΣσжЖ日本語中文한국어ภาษาעבר😀𝄞\u00a0\u200d'))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.lists(ALPHABET, min_size=1, max_size=40).map("".join),
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6),
)
@pytest.mark.parametrize("encoding", RESUMABLE)
def test_chunks_of_every_resumable_codec_reassemble(
    env: Env, encoding: str, text: str, lengths: list[int]
) -> None:
    try:
        raw = text.encode(encoding)
    except (UnicodeError, ValueError):
        raw = "".join(c for c in text if _encodable(c, encoding)).encode(encoding)
    whole = raw.decode(encoding)
    path = env.file(raw)
    got, offset = "", 0
    for length in itertools.cycle(lengths):
        result = env.conn.handle(
            "files/read", {"path": path, "encoding": encoding, "offset": offset, "length": length}
        )
        got += result["content"]
        offset += result["bytesRead"]
        if result["eof"]:
            break
        assert result["bytesRead"] > 0
    assert got == whole
    assert offset == len(raw)


def _encodable(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except (UnicodeError, ValueError):
        return False
    return True
