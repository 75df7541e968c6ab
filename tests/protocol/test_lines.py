"""stdio's line framing without a pipe: :class:`~jupyter_fsbroker.protocol.transports.lines.LineSplitter`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jupyter_fsbroker.protocol.transports.lines import PREFIX_BYTES, LineSplitter


class Lines:
    """What a splitter called back with, in order."""

    def __init__(self, limit: int = 64) -> None:
        self.got: list[tuple[str, bytes, int]] = []
        self.splitter = LineSplitter(self._line, self._too_long, limit=limit)

    def _line(self, line: bytes | bytearray) -> None:
        self.got.append(("line", bytes(line), len(line)))  # copied: the splitter reuses its buffer

    def _too_long(self, prefix: bytes, size: int) -> None:
        self.got.append(("too long", prefix, size))

    def feed(self, *chunks: bytes) -> list[tuple[str, bytes, int]]:
        for chunk in chunks:
            self.splitter.feed(chunk)
        return self.got


def test_whole_lines_in_one_read_come_out_in_order_and_blank_ones_are_skipped() -> None:
    lines = Lines()
    assert lines.feed(b'{"a":1}\n\n  \n{"b":2}\n') == [("line", b'{"a":1}', 7), ("line", b'{"b":2}', 7)]
    assert lines.splitter.pending == 0


def test_a_line_split_across_reads_is_joined_and_the_rest_waits_for_its_newline() -> None:
    lines = Lines()
    assert lines.feed(b'{"a"', b":1}\n{", b'"b"') == [("line", b'{"a":1}', 7)]
    assert lines.splitter.pending == 4
    assert lines.feed(b":2}\n") == [("line", b'{"a":1}', 7), ("line", b'{"b":2}', 7)]


def test_the_last_line_without_its_newline_is_given_at_the_end_once() -> None:
    lines = Lines()
    lines.feed(b'{"a":1}\n{"b":2}')
    lines.splitter.end()
    lines.splitter.end()
    assert lines.got == [("line", b'{"a":1}', 7), ("line", b'{"b":2}', 7)]
    assert lines.splitter.pending == 0


def test_a_blank_last_line_is_nothing() -> None:
    lines = Lines()
    lines.feed(b'{"a":1}\n  ')
    lines.splitter.end()
    assert lines.got == [("line", b'{"a":1}', 7)]


def test_an_over_long_line_in_one_read_is_reported_with_its_size_and_the_next_line_still_comes() -> None:
    lines = Lines(limit=10)
    long = b'{"id":7,"x":"' + b"y" * 20 + b'"}'
    assert lines.feed(long + b'\n{"a":1}\n') == [
        ("too long", long, len(long)),
        ("line", b'{"a":1}', 7),
    ]


def test_an_over_long_line_across_reads_is_never_held_whole_and_is_counted_to_its_newline() -> None:
    lines = Lines(limit=10)
    lines.feed(b'{"id":7,"x":"yyyy')  # 17 bytes held: past the limit, dropped from here on
    assert lines.splitter.pending == 0
    lines.feed(b"y" * 1000)
    assert lines.splitter.pending == 0 and lines.got == []
    lines.feed(b'yy"}\n{"a":1}\n')
    assert lines.got == [("too long", b'{"id":7,"x":"yyyy', 17 + 1000 + 4), ("line", b'{"a":1}', 7)]


def test_an_over_long_last_line_is_dropped_at_the_end_not_given_as_a_line() -> None:
    lines = Lines(limit=10)
    lines.feed(b'{"a":1}\n' + b"z" * 40)
    lines.splitter.end()
    assert lines.got == [("line", b'{"a":1}', 7)]


def test_only_the_first_bytes_of_an_over_long_line_are_kept() -> None:
    lines = Lines(limit=PREFIX_BYTES)
    long = b"x" * (3 * PREFIX_BYTES)
    lines.feed(long + b"\n")
    [(kind, prefix, size)] = lines.got
    assert (kind, prefix, size) == ("too long", long[:PREFIX_BYTES], len(long))


@given(
    st.lists(st.binary(min_size=1, max_size=30).map(lambda b: b.replace(b"\n", b"n")), max_size=12),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=12),
)
def test_however_the_stream_is_cut_the_same_lines_come_out(messages: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(m + b"\n" for m in messages)
    expected = [("line", m, len(m)) for m in messages if m.strip()]
    lines = Lines(limit=64)
    start = 0
    for size in cuts * (len(stream) // sum(cuts) + 1):
        if start >= len(stream):
            break
        lines.splitter.feed(stream[start : start + size])
        start += size
    lines.splitter.end()
    assert lines.got == expected
