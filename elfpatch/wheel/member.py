"""One member of a wheel, rewritten and proved: inflated into a scratch file and
checked against its CRC-32 and RECORD row; once patched, read back, compared
with the original to find what changed, its new deflate stream spliced from
the original's untouched blocks and inflated once to prove it; and RECORD's
new rows.

The service layer decides which members, in which order and in how many
processes; everything here works on one member and its open files.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from elfpatch.base.regular_file import write_all
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import symbol_tables
from elfpatch.errors import PARSE_FAILURES, CorruptElfError, ElfpatchError, InputError
from elfpatch.patch.staging import ScratchFile
from elfpatch.patch.verify import VerificationError
from elfpatch.plan.bindings import LibraryPlan
from elfpatch.wheel.deflate_splice import (
    BlockStarts,
    Fresh,
    InflateError,
    Piece,
    block_inflate_available,
    build_stream,
    piece_bytes,
    splice_plan,
)
from elfpatch.wheel.read import RecordEntry, hash_text, is_signature, parse_record, record_line
from elfpatch.wheel.write import OutputMember
from elfpatch.wheel.zipread import (
    METHOD_DEFLATED,
    METHOD_STORED,
    ZipArchive,
    ZipMember,
    check_readable,
    decode_failures,
    deflate_module,
    inflate_raw,
)

# Compared at a time when looking for what a fix changed; changed chunks are
# narrowed down to this granularity.
_COMPARE_CHUNK = 4 << 20
_COMPARE_GRAIN = 64 << 10


@dataclass
class Inflated:
    """An ELF member inflated into a scratch file."""

    member: ZipMember
    scratch: ScratchFile
    starts: BlockStarts | None  # None: not deflated, or zlib not at hand


@dataclass
class Spliced:
    output: OutputMember
    digest: str  # its RECORD hash


# -- reading a member -----------------------------------------------------------------

def inflate_cost(member: ZipMember) -> int:
    """How long inflating a member takes, roughly: its size, and more for what was squeezed
    more (back-references cost more than literals)."""
    return 2 * member.size - min(member.compressed_size, member.size)


def inflate_member(archive: ZipArchive, member: ZipMember, row: RecordEntry,
                   scratch: ScratchFile) -> BlockStarts | None:
    """The member's content into ``scratch``, checked against its CRC-32 and RECORD row;
    its deflate block starts (None when it is not deflated or zlib is not at hand)."""
    check_readable(archive, member)
    hasher = row.hasher(archive.label(member), member.name)
    starts = BlockStarts() if member.method == METHOD_DEFLATED and \
        block_inflate_available() else None
    crc32 = deflate_module().crc32
    crc = 0
    try:
        chunks: Iterator[bytes | memoryview]
        if starts is not None:
            from elfpatch.wheel.deflate_splice import inflate_blocks

            chunks = inflate_blocks(archive.raw_chunks(member), member.size, starts)
        else:
            chunks = archive.decoded_chunks(member)
        for chunk in chunks:
            hasher.update(chunk)
            crc = crc32(chunk, crc)
            write_all(scratch.fd, chunk)
    except InflateError as error:
        reason = f"corrupt compressed data ({error.reason})" if error.corrupt else error.reason
        raise archive.error(member, reason) from None
    if crc != member.crc:
        raise archive.error(member, "CRC-32 does not match the content")
    if not row.matches(hasher, member.size):
        raise InputError(archive.label(member), "broken RECORD: the hash or size does not match "
                         "the content")
    return starts


# -- a changed member ------------------------------------------------------------------

def splice_member(archive: ZipArchive, item: Inflated, patched: ScratchFile,
                  plan: LibraryPlan, row: RecordEntry, fresh: ScratchFile) -> Spliced:
    """The new compressed stream of a patched member, inflated once to prove it.

    The new stream must inflate to exactly the patched (and verified) file;
    what it inflates to is what RECORD's new hash is computed from.
    """
    member = item.member
    label = archive.label(member)
    _rescan(patched, plan, label)
    hasher = row.hasher(label, member.name)
    stored = member.method == METHOD_STORED
    changed, crc = _compare(item.scratch.fd, patched.fd, member.size,
                            hasher if stored else None)
    if stored:  # stays stored: the patched file is the data
        pieces: tuple[Piece, ...] = ((patched.fd, 0, member.size),) if member.size else ()
    else:
        if item.starts is not None:
            segments = splice_plan(item.starts, member.size, member.compressed_size * 8, changed)
        else:
            segments = [Fresh(0, member.size, None)]
        pieces = tuple(build_stream(segments, (archive.fd, member.data_offset), patched.fd,
                                    fresh.fd))
        _prove_stream(pieces, patched.fd, member.size, hasher, label)
    size = sum(len(p) if isinstance(p, bytes) else p[2] for p in pieces)
    method = METHOD_STORED if stored else METHOD_DEFLATED
    output = OutputMember(member, method, crc, size, member.size, pieces)
    return Spliced(output, hash_text(hasher))


def _prove_stream(pieces: tuple[Piece, ...], expected: int, size: int,
                  hasher: hashlib._Hash, label: str) -> None:
    """The new stream inflates to the bytes of ``expected``; ``hasher`` is fed them."""
    offset = 0
    failures: tuple[type[BaseException], ...] = (*decode_failures(), ValueError)
    try:
        for chunk in inflate_raw(piece_bytes(pieces), size):
            if os.pread(expected, len(chunk), offset) != chunk:
                raise ValueError(f"it differs from the fixed library from byte {offset} on")
            hasher.update(chunk)
            offset += len(chunk)
    except failures as error:
        raise VerificationError(label, f"the member's new deflate stream does not inflate to "
                                f"the fixed library ({error}); nothing was written") from None


def _compare(old: int, new: int, size: int,
             hasher: hashlib._Hash | None) -> tuple[list[tuple[int, int]], int]:
    """The byte ranges where ``new`` differs from ``old`` (to ``_COMPARE_GRAIN``), and
    ``new``'s CRC-32; ``hasher``, if any, is fed ``new``."""
    crc32 = deflate_module().crc32
    changed: list[tuple[int, int]] = []
    crc = 0
    for offset in range(0, size, _COMPARE_CHUNK):
        after = os.pread(new, _COMPARE_CHUNK, offset)
        before = os.pread(old, _COMPARE_CHUNK, offset)
        if len(after) != min(_COMPARE_CHUNK, size - offset) or len(before) != len(after):
            raise OSError("a scratch file is shorter than the member")
        if hasher is not None:
            hasher.update(after)
        crc = crc32(after, crc)
        if after != before:
            changed.extend(_changed_grains(before, after, offset))
    return _coalesced(changed), crc


def _changed_grains(before: bytes, after: bytes, base: int) -> Iterator[tuple[int, int]]:
    for start in range(0, len(after), _COMPARE_GRAIN):
        end = start + _COMPARE_GRAIN
        if before[start:end] != after[start:end]:
            yield base + start, base + min(end, len(after))


def _coalesced(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _rescan(patched: ScratchFile, plan: LibraryPlan, label: str) -> None:
    """Read the fixed member again: no planned symbol may still be UNIQUE."""
    planned = {change.name for change in plan.changes}
    try:
        with ElfFile.open(patched.path) as elf:
            left = {table.name(i) for table in symbol_tables(elf) for i in table.unique_indices()}
    except ElfpatchError as error:
        raise VerificationError(label, f"the fixed member does not read back: {error.reason}"
                                ) from None
    except PARSE_FAILURES as error:
        raise CorruptElfError(label, f"the fixed member does not read back ({error})") from None
    still = sorted(planned & left)
    if still:
        raise VerificationError(label, f"{len(still)} planned symbols are still UNIQUE in the "
                                f"fixed member (first: {still[0]}); nothing was written")


# -- RECORD ---------------------------------------------------------------------------

def rewritten_record(text: str, record: ZipMember, digests: dict[str, str],
                     sizes: dict[str, int]) -> str:
    """RECORD with the new rows of changed members and without signatures' rows."""
    lines = []
    for path, digest, size in parse_record(text, record.name):
        if is_signature(path):
            continue
        if path in digests:
            digest, size = digests[path], str(sizes[path])
        lines.append(record_line(path, digest, size))
    return "\n".join(lines) + "\n"


def record_output(entry: ZipMember, text: str) -> OutputMember:
    data = text.encode("utf-8")
    crc = zlib.crc32(data)
    if entry.method == METHOD_STORED:
        return OutputMember(entry, METHOD_STORED, crc, len(data), len(data), (data,))
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = compressor.compress(data) + compressor.flush()
    return OutputMember(entry, METHOD_DEFLATED, crc, len(packed), len(data), (packed,))
