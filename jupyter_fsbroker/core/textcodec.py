"""Text encodings of ``files/read``, ``files/write`` and ``files/create``: one codec, three answers.

A request names its ``encoding`` as any Python codec name. :func:`text_codec`
looks it up once and answers with one of three things:

* an unknown name, or a codec that is not a text encoding (``hex``,
  ``zlib_codec``, ``base64_codec``: bytes to bytes; ``rot13``: str to str),
  is malformed params (-32602, ``reason="unknown_encoding"``): no content
  could ever make it right;
* a codec that fails on the content in any way (not only ``UnicodeError``:
  ``idna`` refuses a long label, ``undefined`` refuses everything, ``utf-16``
  a stream without a byte-order mark, ``punycode`` raises what it likes) is
  ENCODING_ERROR, as is decoded text holding a lone surrogate (``utf-7``,
  ``unicode_escape`` and ``raw_unicode_escape`` can make one), which JSON
  cannot carry;
* anything else is the text or the bytes.

Chunked reads split on characters (PROTOCOL.md). A chunk that starts past the
beginning of a file is decoded by a fresh decoder, which is right only for a
codec whose state between two whole characters is its initial state.
:meth:`TextCodec.resumable` says which codecs are: those of Python's own
``encodings`` package except the ones that carry state across characters
(a byte-order mark, shift sequences, whole-string schemes); any other codec
(one registered by a third party) is read whole or not at all, since nothing
proves it resumable. Every stateless codec of the standard library is checked
by ``tests/core/test_codecs.py``.

Nothing here touches a file; a codec's failure never escapes as anything but
a :class:`~jupyter_fsbroker.core.errors.FilesError`.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass

from .errors import EncodingError, InvalidParams
from .names import is_wire_safe

__all__ = ["Reader", "TextCodec", "text_codec"]

#: Modules of the ``encodings`` package whose decoders keep state across characters.
_STATEFUL_MODULES = frozenset(
    {
        "utf_16",  # byte-order mark
        "utf_32",
        "utf_8_sig",
        "utf_7",  # shift sequences of any length
        "hz",
        "iso2022_jp",
        "iso2022_jp_1",
        "iso2022_jp_2",
        "iso2022_jp_2004",
        "iso2022_jp_3",
        "iso2022_jp_ext",
        "iso2022_kr",
        "punycode",  # whole-string schemes
        "idna",
    }
)
#: The most bytes added, a few at a time, to a chunk too short to hold one whole character.
_LONGEST_CHARACTER = 64

#: ``read(n, at)``: up to *n* bytes of the file at offset *at*.
Reader = Callable[[int, int], bytes]


@dataclass(frozen=True)
class TextCodec:
    """A looked-up text encoding, as a request named it.

    Attributes
    ----------
    name
        The name as the request wrote it (shortened, for messages).
    info
        Python's codec.
    """

    name: str
    info: codecs.CodecInfo

    @property
    def _incremental(self) -> Callable[[str], codecs.IncrementalDecoder] | None:
        # Typed as always there, but a codec registered by hand may leave it out.
        factory: Callable[[str], codecs.IncrementalDecoder] | None = self.info.incrementaldecoder
        return factory

    @property
    def resumable(self) -> bool:
        """Whether a chunk that starts inside the file decodes right with a fresh decoder."""
        module = getattr(self._incremental, "__module__", "") or ""
        package, _, base = module.rpartition(".")
        return package == "encodings" and base not in _STATEFUL_MODULES

    def encode(self, text: str, shown: str) -> bytes:
        """*text* as bytes; any failure of the codec is ENCODING_ERROR.

        Raises
        ------
        EncodingError
            The codec refused *text*, whatever it raised.
        InvalidParams
            The codec does not turn text into bytes (``reason="unknown_encoding"``).
        """
        try:
            data = self.info.encode(text, "strict")[0]
        except Exception:
            raise EncodingError(
                f"content cannot be encoded as {self.name}", reason="invalid_content", path=shown
            ) from None
        if not isinstance(data, bytes | bytearray):
            raise _not_text(self.name, shown)
        return bytes(data)

    def decode_prefix(self, data: bytes, *, final: bool, shown: str) -> tuple[str, int]:
        """Decode the longest run of whole characters at the start of *data*.

        Returns the text and the number of bytes it covers; with *final* every
        byte must belong to a whole character.

        Raises
        ------
        EncodingError
            Not valid in this encoding (whatever the codec raised), or text
            JSON cannot carry (a lone surrogate).
        InvalidParams
            The codec does not turn bytes into text.
        """
        factory = self._incremental
        try:
            if factory is None:
                text = self.info.decode(data, "strict")[0]
                used = len(data)
            else:
                decoder = factory("strict")
                text = decoder.decode(data, final)
                pending = decoder.getstate()[0]
                used = len(data) - len(pending)
        except Exception:
            raise EncodingError(
                f"{shown} is not valid {self.name}; ask for base64", reason="invalid_content", path=shown
            ) from None
        if not isinstance(text, str):
            raise _not_text(self.name, shown)
        if not is_wire_safe(text):
            raise EncodingError(
                f"{shown} decodes to text JSON cannot carry (a lone surrogate) in {self.name}; "
                "ask for base64",
                reason="invalid_content",
                path=shown,
            )
        return text, used

    def check_start(self, offset: int, shown: str) -> None:
        """Refuse a chunk at *offset* that this codec cannot decode without what comes before.

        Raises
        ------
        InvalidParams
            ``reason="stateful_encoding"``: *offset* is past the start and the
            codec is not :attr:`resumable`.
        """
        if offset > 0 and (not self.resumable or self._incremental is None):
            raise InvalidParams(
                f"{self.name} cannot be read from the middle of a file; read it whole or ask for base64",
                reason="stateful_encoding",
                path=shown,
            )

    def decode_chunk(
        self, read: Reader, *, offset: int, length: int, size: int, shown: str
    ) -> tuple[str, int]:
        """Read and decode up to *length* bytes at *offset*, ending on a character boundary.

        *read(n, at)* returns up to *n* bytes at *at*. When *length* is shorter
        than one character, a few more bytes are read to hold one whole
        character. Returns the text and the bytes it covers (0 only at the end
        of the file).

        Raises
        ------
        InvalidParams
            ``reason="stateful_encoding"``: the chunk starts inside the file
            (or ends before its end) and this codec cannot be decoded in pieces.
        EncodingError
            The content is not valid in this encoding.
        """
        self.check_start(offset, shown)
        data = read(length, offset)
        eof = offset + len(data) >= size
        if self._incremental is None and not eof:
            raise InvalidParams(
                f"{self.name} can only be read whole; ask for the whole file or for base64",
                reason="stateful_encoding",
                path=shown,
            )
        text, used = self.decode_prefix(data, final=eof, shown=shown)
        while used == 0 and data and not eof and len(data) < length + _LONGEST_CHARACTER:
            # The asked length is shorter than one character: take one whole character.
            more = read(16, offset + len(data))
            if not more:
                break
            data += more
            eof = offset + len(data) >= size
            text, used = self.decode_prefix(data, final=eof, shown=shown)
        if used == 0 and data:
            raise EncodingError(
                f"{shown} is not valid {self.name} at byte {offset}; ask for base64",
                reason="invalid_content",
                path=shown,
            )
        return text, used


def text_codec(encoding: str, shown: str) -> TextCodec:
    """Look up the text encoding *encoding* named by a request.

    Raises
    ------
    InvalidParams
        ``reason="unknown_encoding"``: no such codec, or one that is not a text
        encoding (bytes to bytes, str to str).
    """
    named = _shorten(encoding)
    try:
        info = codecs.lookup(encoding)
    except Exception:  # LookupError, and whatever a codec search function raises on odd names
        raise InvalidParams(f"unknown encoding {named!r}", reason="unknown_encoding", path=shown) from None
    if not getattr(info, "_is_text_encoding", True):
        raise _not_text(named, shown)
    return TextCodec(named, info)


def _not_text(encoding: str, shown: str) -> InvalidParams:
    return InvalidParams(f"{encoding!r} is not a text encoding", reason="unknown_encoding", path=shown)


def _shorten(name: str, most: int = 40) -> str:
    """A codec name fit for a message (a request may send a megabyte of it)."""
    return name if len(name) <= most else name[:most] + "..."
