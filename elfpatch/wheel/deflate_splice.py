"""Deflating a changed member again without deflating what did not change.

A fixed library differs from the original in a few tables (the symbol
tables, their hash tables and relocations, a section header); the hundreds
of megabytes in between are the same bytes.  A deflate stream is a
sequence of blocks, and a block decodes to the same bytes wherever it is
placed as long as the 32 KiB before it are the same.  So the new stream is
the original's blocks where nothing changed near them, and freshly deflated
data from a block start before each change to a block start at least 32 KiB
after it.  The result is as small as the original and costs a fraction of
a full deflate.

Block starts are bit positions: zlib's ``inflate(Z_BLOCK)`` reports them
while the member is inflated (through ctypes, since Python's zlib module
does not offer it).  Joining pieces at bit positions uses two kinds of
empty blocks, as zlib itself emits them when flushing: an empty *stored*
block (3 header bits, padding to a byte, ``00 00 ff ff``) brings any bit
position to a byte boundary, and each empty *fixed-code* block (10 bits)
moves a byte boundary by 2 bits, which reaches every original block start
at an even bit within its byte.  Fresh segments therefore end only at such
block starts.

Where zlib cannot be loaded, or the member is not deflated, the whole
member is deflated again; ISA-L does the deflating where it is installed.
"""

from __future__ import annotations

import ctypes
import os
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

from elfpatch.base.regular_file import write_all

WINDOW = 32768  # how far back a deflate block may reach
EMPTY_STORED = b"\x00\x00\xff\xff"  # LEN and NLEN of an empty stored block
EMPTY_FIXED_BITS = 10  # BFINAL=0, BTYPE=01, end-of-block code 0000000
EMPTY_FIXED_VALUE = 0b10  # those 10 bits, least significant first

_Z_OK, _Z_STREAM_END, _Z_BLOCK = 0, 1, 5
_Z_BUF_ERROR = -5

# ISA-L's strongest level comes within a few percent of zlib's default on the
# symbol tables and relocations that large fresh segments hold, at 5-10 times
# its speed; small segments (a whole small library) get zlib's default, which
# wheel builders use, so the member keeps its size.
_ISAL_LEVEL = 3
_ZLIB_LEVEL = 6
_ZLIB_UP_TO = 1 << 20


def deflater(length: int) -> tuple[ModuleType, int]:
    """The deflate implementation and level for ``length`` bytes of fresh data."""
    fast = _isal()
    if fast is None or length <= _ZLIB_UP_TO:
        return zlib, _ZLIB_LEVEL
    return fast, _ISAL_LEVEL


@cache
def _isal() -> ModuleType | None:
    try:
        from isal import isal_zlib
    except ImportError:
        return None
    return isal_zlib


# -- zlib's inflate, through ctypes ----------------------------------------------------

class _ZStream(ctypes.Structure):
    _fields_ = [("next_in", ctypes.c_void_p), ("avail_in", ctypes.c_uint),
                ("total_in", ctypes.c_ulong), ("next_out", ctypes.c_void_p),
                ("avail_out", ctypes.c_uint), ("total_out", ctypes.c_ulong),
                ("msg", ctypes.c_char_p), ("state", ctypes.c_void_p),
                ("zalloc", ctypes.c_void_p), ("zfree", ctypes.c_void_p),
                ("opaque", ctypes.c_void_p), ("data_type", ctypes.c_int),
                ("adler", ctypes.c_ulong), ("reserved", ctypes.c_ulong)]


@cache
def _libz() -> ctypes.CDLL | None:
    from elfpatch.cxx.demangle import open_trusted_library

    library = open_trusted_library("libz.so.1")
    if library is None:
        return None
    try:
        library.zlibVersion.restype = ctypes.c_char_p
        version = library.zlibVersion()
    except (OSError, AttributeError):
        return None
    if not version or not version.startswith(b"1."):
        return None
    library.inflate.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int]
    library.inflateInit2_.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int, ctypes.c_char_p,
                                      ctypes.c_int]
    library.inflateEnd.argtypes = [ctypes.POINTER(_ZStream)]
    return library


def block_inflate_available() -> bool:
    return _libz() is not None


class InflateError(Exception):
    """The compressed data is corrupt, truncated or longer than declared."""

    def __init__(self, reason: str, corrupt: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.corrupt = corrupt  # the stream itself is broken (else: its size is not as declared)


# Block starts closer together than this are not all kept: a stream of tiny
# blocks must not make the list of starts as large as the content.
MIN_SPACING = 16 << 10


@dataclass
class BlockStarts:
    """Where deflate blocks start: bit offset in the stream, byte offset in the output.

    One start every ``MIN_SPACING`` output bytes at most, and apart from that
    the list of those with an even bit phase (where a fresh segment can end).
    """

    bits: array[int] = field(default_factory=lambda: array("q", [0]))
    bytes: array[int] = field(default_factory=lambda: array("q", [0]))
    even: array[int] = field(default_factory=lambda: array("q", [0]))  # indices into the above

    def add(self, bit: int, byte: int) -> None:
        if byte <= self.bytes[-1]:
            return  # an empty block: nothing to choose between
        is_even = bit % 2 == 0
        if byte - self.bytes[-1] >= MIN_SPACING or \
                (is_even and byte - self.bytes[self.even[-1]] >= MIN_SPACING):
            self.bits.append(bit)
            self.bytes.append(byte)
            if is_even:
                self.even.append(len(self.bits) - 1)


def inflate_blocks(compressed: Iterator[bytes], size: int, starts: BlockStarts,
                   step: int = 4 << 20) -> Iterator[memoryview]:
    """Inflate a raw deflate stream, recording its block starts in ``starts``.

    Yields views of one reused buffer (use each before asking for the next).
    The output is capped at ``size``: one byte more and InflateError is
    raised, as for a stream that is corrupt, ends early or is followed by
    more data.
    """
    library = _libz()
    if library is None:
        raise RuntimeError("zlib could not be loaded")
    stream = _ZStream()
    result = library.inflateInit2_(ctypes.byref(stream), -15, library.zlibVersion(),
                                   ctypes.sizeof(stream))
    if result != _Z_OK:
        raise MemoryError("zlib could not start an inflate")
    output = bytearray(max(1, min(step, size + 1)))
    output_address = ctypes.addressof(ctypes.c_char.from_buffer(output))
    try:
        yield from _inflate_loop(library, stream, compressed, size, starts, output,
                                 output_address)
    finally:
        library.inflateEnd(ctypes.byref(stream))


def _inflate_loop(library: ctypes.CDLL, stream: _ZStream, compressed: Iterator[bytes],
                  size: int, starts: BlockStarts, output: bytearray,
                  output_address: int) -> Iterator[memoryview]:
    pending: bytes = b""  # the input zlib is reading (kept alive while it does)
    filled = produced = stalls = 0
    ended = exhausted = False
    while not ended:
        if stream.avail_in == 0 and not exhausted:
            pending = next(compressed, b"")
            exhausted = not pending
            stream.next_in = ctypes.cast(ctypes.c_char_p(pending), ctypes.c_void_p)
            stream.avail_in = len(pending)
        # Without new input zlib may still hold output (a full buffer stopped it)
        # or bits of a few tiny blocks; a stream that stops making progress ends early.
        stalls = stalls + 1 if exhausted and stream.avail_in == 0 else 0
        if stalls > 16:
            raise InflateError("the compressed stream ends early")
        room = min(len(output) - filled, size + 1 - produced)
        stream.next_out = output_address + filled
        stream.avail_out = room
        result = library.inflate(ctypes.byref(stream), _Z_BLOCK)
        made = room - stream.avail_out
        filled += made
        produced += made
        if made:
            stalls = 0
        if produced > size:
            raise InflateError(f"inflates past its stated {size} bytes", corrupt=False)
        if result == _Z_STREAM_END:
            ended = True
        elif result not in (_Z_OK, _Z_BUF_ERROR):
            message = stream.msg.decode("ascii", "replace") if stream.msg else f"error {result}"
            raise InflateError(message)
        elif stream.data_type & 128 and not stream.data_type & 64:
            starts.add(stream.total_in * 8 - (stream.data_type & 7), stream.total_out)
        if filled and (ended or filled == len(output) or len(output) - filled < 65536):
            yield memoryview(output)[:filled]
            filled = 0
    if stream.avail_in or next(compressed, b""):
        raise InflateError("data after the end of the compressed stream", corrupt=False)
    if produced != size:
        raise InflateError(f"inflates to {produced} bytes, not {size}", corrupt=False)
    del pending


# -- planning a spliced stream -------------------------------------------------------

@dataclass(frozen=True)
class Kept:
    """Original blocks from one block start to another (bit offsets in the old stream)."""

    start_bit: int
    end_bit: int  # the stream's length in bits for the last segment
    last: bool


@dataclass(frozen=True)
class Fresh:
    """New content to deflate, from one block start to another (byte offsets)."""

    start: int
    end: int
    next_bit: int | None  # the kept block start that follows, None at the end


def splice_plan(starts: BlockStarts, size: int, stream_bits: int,
                changed: list[tuple[int, int]]) -> list[Kept | Fresh]:
    """Which segments keep the old blocks and which are deflated afresh.

    ``changed`` are the byte ranges where the new content differs from the
    old (sorted, any granularity).  Every change lies in a fresh segment
    that starts at a block start at or before it and ends at a block start
    with an even bit phase at least ``WINDOW`` bytes after it (or at the end).
    """
    fresh: list[tuple[int, int]] = []  # (start index, end index) into starts; -1: the end
    for low, high in changed:
        first = _last_start_at_or_before(starts, low)
        last = _first_even_start_from(starts, high + WINDOW)
        if fresh and (fresh[-1][1] == -1 or first <= fresh[-1][1]):
            previous_first, previous_last = fresh.pop()
            first = previous_first
            last = -1 if previous_last == -1 or last == -1 else max(previous_last, last)
        fresh.append((first, last))
    return _segments(starts, size, stream_bits, fresh)


def _last_start_at_or_before(starts: BlockStarts, offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(starts.bytes, offset) - 1


def _first_even_start_from(starts: BlockStarts, offset: int) -> int:
    from bisect import bisect_left

    position = bisect_left(starts.even, offset, key=lambda index: starts.bytes[index])
    return starts.even[position] if position < len(starts.even) else -1


def _segments(starts: BlockStarts, size: int, stream_bits: int,
              fresh: list[tuple[int, int]]) -> list[Kept | Fresh]:
    segments: list[Kept | Fresh] = []
    kept_from = 0  # index of the block start where the next kept segment begins
    for first, last in fresh:
        if first > kept_from:
            segments.append(Kept(starts.bits[kept_from], starts.bits[first], False))
        end = size if last == -1 else starts.bytes[last]
        segments.append(Fresh(starts.bytes[first], end, None if last == -1 else starts.bits[last]))
        if last == -1:
            return segments
        kept_from = last
    segments.append(Kept(starts.bits[kept_from], stream_bits, True))
    return segments


# -- writing a spliced stream ----------------------------------------------------------

Piece = tuple[int, int, int] | bytes  # (descriptor, offset, length) to copy, or bytes as they are


@dataclass
class _BitWriter:
    """The partial byte between pieces: ``count`` low bits of ``value``."""

    value: int = 0
    count: int = 0


def build_stream(plan: list[Kept | Fresh], old: tuple[int, int], new_fd: int,
                 fresh_fd: int) -> list[Piece]:
    """The pieces of the new stream; fresh data is deflated into ``fresh_fd``.

    ``old`` is (descriptor, offset) of the original compressed stream,
    ``new_fd`` holds the new content.
    """
    pieces: list[Piece] = []
    bits = _BitWriter()
    old_fd, old_offset = old
    for segment in plan:
        if isinstance(segment, Kept):
            _keep(pieces, bits, old_fd, old_offset, segment)
        else:
            _align_to_byte(pieces, bits)
            _deflate_fresh(pieces, new_fd, fresh_fd, segment)
            if segment.next_bit is not None:
                _bridge_to(pieces, bits, segment.next_bit % 8)
    return _merged(pieces)


def _keep(pieces: list[Piece], bits: _BitWriter, old_fd: int, old_offset: int,
          segment: Kept) -> None:
    start_byte, end_byte = segment.start_bit // 8, segment.end_bit // 8
    if segment.last:
        end_byte = (segment.end_bit + 7) // 8  # through the stream's last byte, padding and all
    first = os.pread(old_fd, 1, old_offset + start_byte)[0]
    if bits.count:  # the first byte is shared with the bits written before it
        low = (1 << bits.count) - 1
        pieces.append(bytes([bits.value | (first & ~low & 0xFF)]))
        start_byte += 1
    if end_byte > start_byte:
        pieces.append((old_fd, old_offset + start_byte, end_byte - start_byte))
    # Recorded block starts are more than a byte apart: the segment's last
    # (partial) byte is never its first.
    assert segment.last or segment.end_bit // 8 >= start_byte
    bits.count = 0 if segment.last else segment.end_bit % 8
    if bits.count:
        last = os.pread(old_fd, 1, old_offset + segment.end_bit // 8)[0]
        bits.value = last & ((1 << bits.count) - 1)


def _align_to_byte(pieces: list[Piece], bits: _BitWriter) -> None:
    """An empty stored block after the pending bits: its header (000) then padding."""
    if not bits.count:
        return
    tail = [bits.value]
    if bits.count + 3 > 8:
        tail.append(0)
    pieces.append(bytes(tail) + EMPTY_STORED)
    bits.value = bits.count = 0


def _bridge_to(pieces: list[Piece], bits: _BitWriter, phase: int) -> None:
    """Empty fixed-code blocks until the bit position within the byte is ``phase``.

    Their whole bytes are written; the last partial one is shared with the
    kept segment that follows.
    """
    assert bits.count == 0 and phase % 2 == 0
    blocks = phase // 2
    value = sum(EMPTY_FIXED_VALUE << (EMPTY_FIXED_BITS * n) for n in range(blocks))
    whole = EMPTY_FIXED_BITS * blocks // 8
    if whole:
        pieces.append((value & ((1 << 8 * whole) - 1)).to_bytes(whole, "little"))
    bits.value, bits.count = value >> (8 * whole), phase


def _deflate_fresh(pieces: list[Piece], new_fd: int, fresh_fd: int, segment: Fresh) -> None:
    module, level = deflater(segment.end - segment.start)
    dictionary = os.pread(new_fd, min(WINDOW, segment.start), segment.start -
                          min(WINDOW, segment.start))
    if dictionary:
        compressor = module.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY,
                                        dictionary)
    else:
        compressor = module.compressobj(level, zlib.DEFLATED, -15)
    begin = os.lseek(fresh_fd, 0, os.SEEK_END)
    offset = segment.start
    while offset < segment.end:
        chunk = os.pread(new_fd, min(4 << 20, segment.end - offset), offset)
        if not chunk:
            raise OSError("the new content is shorter than planned")
        offset += len(chunk)
        write_all(fresh_fd, compressor.compress(chunk))
    write_all(fresh_fd, compressor.flush(zlib.Z_FINISH if segment.next_bit is None
                                          else zlib.Z_SYNC_FLUSH))
    end = os.lseek(fresh_fd, 0, os.SEEK_END)
    if end > begin:
        pieces.append((fresh_fd, begin, end - begin))



def piece_bytes(pieces: Iterable[Piece], step: int = 1 << 20) -> Iterator[bytes]:
    """The bytes the pieces stand for, in order, ``step`` at most at a time."""
    for piece in pieces:
        if isinstance(piece, bytes):
            yield piece
            continue
        descriptor, start, length = piece
        for offset in range(0, length, step):
            data = os.pread(descriptor, min(step, length - offset), start + offset)
            if len(data) != min(step, length - offset):
                raise OSError("a file the new stream is copied from is shorter than planned")
            yield data


def _merged(pieces: list[Piece]) -> list[Piece]:
    """Adjacent byte pieces joined (bridges and shared bytes come in small parts)."""
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += piece
        elif not (isinstance(piece, bytes) and not piece):
            merged.append(piece)
    return merged
