"""Writing a zip archive (a repaired wheel), member after member, into one open file.

Each member's local header is rebuilt from the values the reader checked:
sizes and CRC-32 up front (a data descriptor is never written, bit 3 is
cleared), name, times, attributes, extra fields and comments as they were,
and a zip64 extra field exactly where a size or offset needs one.  The
compressed bytes come as pieces: ranges of other open files (the input
wheel, a scratch file of freshly deflated data), copied by the kernel, and
small byte strings.  The same members give the same bytes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from elfpatch.base.regular_file import copy_bytes
from elfpatch.wheel.deflate_splice import Piece
from elfpatch.wheel.zipread import (
    CENTRAL_HEADER,
    CENTRAL_SIGNATURE,
    END_RECORD,
    END_SIGNATURE,
    FLAG_DESCRIPTOR,
    LOCAL_HEADER,
    LOCAL_SIGNATURE,
    METHOD_BZIP2,
    METHOD_LZMA,
    U16_MAX,
    U32_MAX,
    ZIP64_END_RECORD,
    ZIP64_END_SIGNATURE,
    ZIP64_EXTRA_ID,
    ZIP64_LOCATOR,
    ZIP64_LOCATOR_SIGNATURE,
    ZipMember,
    iter_extra,
)

_ZIP64_VERSION = 45
# The version needed to extract each method (APPNOTE 4.4.3), at least 2.0 as
# zipfile writes it; 6.3 is the highest readers (zipfile among them) accept.
_METHOD_VERSIONS = {METHOD_BZIP2: 46, METHOD_LZMA: 63}
_BASE_VERSION = 20
_HIGHEST_VERSION = 63
# Pieces up to this size are read and written with the headers around them;
# larger ones are copied file to file by the kernel.
_SMALL_PIECE = 256 << 10
_BUFFER = 1 << 20


@dataclass(frozen=True)
class OutputMember:
    """One member of the new archive: the old entry's metadata, new data."""

    entry: ZipMember
    method: int
    crc: int
    compressed_size: int
    size: int
    pieces: tuple[Piece, ...]

    @property
    def flags(self) -> int:
        flags = self.entry.flags & ~FLAG_DESCRIPTOR
        if self.method != self.entry.method:
            flags &= ~0x6  # the old method's options (deflate level, LZMA end marker)
        return flags

    def version_needed(self, zip64: bool) -> int:
        """The entry's own when it is plausible, else what the method and zip64 need."""
        needed = max(_METHOD_VERSIONS.get(self.method, _BASE_VERSION),
                     _ZIP64_VERSION if zip64 else 0)
        own = self.entry.version_needed
        keep = self.method == self.entry.method and needed <= own <= _HIGHEST_VERSION
        return own if keep else needed


def kept(entry: ZipMember, descriptor: int) -> OutputMember:
    """A member copied as it was: its compressed bytes, straight from the old archive."""
    return OutputMember(entry, entry.method, entry.crc, entry.compressed_size, entry.size,
                        ((descriptor, entry.data_offset, entry.compressed_size),)
                        if entry.compressed_size else ())


def without_zip64(extra: bytes) -> bytes:
    """An extra block with its zip64 field taken out (the writer adds its own)."""
    return b"".join(struct.pack("<HH", field_id, len(body)) + body
                    for field_id, body in iter_extra(extra) if field_id != ZIP64_EXTRA_ID)


def _zip64_field(values: Iterable[int]) -> bytes:
    body = b"".join(struct.pack("<Q", value) for value in values)
    return struct.pack("<HH", ZIP64_EXTRA_ID, len(body)) + body if body else b""


class ZipWriter:
    """Appends members to ``descriptor`` (positioned at 0), then the central directory."""

    def __init__(self, descriptor: int) -> None:
        self.fd = descriptor
        self.offset = 0
        self._buffer = bytearray()
        self._central: list[bytes] = []

    def add(self, member: OutputMember) -> None:
        header_offset = self.offset + len(self._buffer)
        self._put(self._local_header(member))
        written = 0
        for piece in member.pieces:
            written += self._put_piece(piece)
        if written != member.compressed_size:
            raise OSError(f"{member.entry.name}: wrote {written} compressed bytes, expected "
                          f"{member.compressed_size}")
        self._central.append(self._central_header(member, header_offset))

    def finish(self, comment: bytes) -> int:
        """Write the central directory and the end records; the archive's size."""
        directory_offset = self.offset + len(self._buffer)
        for header in self._central:
            self._put(header)
        directory_size = self.offset + len(self._buffer) - directory_offset
        self._put(self._end_records(directory_offset, directory_size, comment))
        self._flush()
        return self.offset

    # -- headers -----------------------------------------------------------------------
    def _local_header(self, member: OutputMember) -> bytes:
        entry = member.entry
        zip64 = member.size >= U32_MAX or member.compressed_size >= U32_MAX
        extra = without_zip64(entry.local_extra)
        if zip64:
            extra = _zip64_field((member.size, member.compressed_size)) + extra
        sizes = (U32_MAX, U32_MAX) if zip64 else (member.compressed_size, member.size)
        return LOCAL_HEADER.pack(LOCAL_SIGNATURE, member.version_needed(zip64), member.flags,
                                 member.method, entry.dos_time, entry.dos_date, member.crc,
                                 *sizes, len(entry.raw_name), len(extra)) + entry.raw_name + extra

    def _central_header(self, member: OutputMember, header_offset: int) -> bytes:
        entry = member.entry
        large = [member.size >= U32_MAX, member.compressed_size >= U32_MAX,
                 header_offset >= U32_MAX]
        values = (member.size, member.compressed_size, header_offset)
        extra = _zip64_field(v for v, big in zip(values, large, strict=True) if big) + \
            without_zip64(entry.central_extra)
        size, compressed, offset = (U32_MAX if big else v
                                    for v, big in zip(values, large, strict=True))
        return CENTRAL_HEADER.pack(
            CENTRAL_SIGNATURE, entry.version_made_by, member.version_needed(any(large)),
            member.flags, member.method, entry.dos_time, entry.dos_date, member.crc, compressed,
            size, len(entry.raw_name), len(extra), len(entry.comment), 0, entry.internal_attr,
            entry.external_attr, offset) + entry.raw_name + extra + entry.comment

    def _end_records(self, offset: int, size: int, comment: bytes) -> bytes:
        count = len(self._central)
        zip64 = count >= U16_MAX or offset >= U32_MAX or size >= U32_MAX
        records = b""
        if zip64:
            end64_at = offset + size
            records += ZIP64_END_RECORD.pack(ZIP64_END_SIGNATURE, ZIP64_END_RECORD.size - 12,
                                             _ZIP64_VERSION, _ZIP64_VERSION, 0, 0, count, count,
                                             size, offset)
            records += ZIP64_LOCATOR.pack(ZIP64_LOCATOR_SIGNATURE, 0, end64_at, 1)
        records += END_RECORD.pack(END_SIGNATURE, 0, 0, min(count, U16_MAX), min(count, U16_MAX),
                                   min(size, U32_MAX), min(offset, U32_MAX), len(comment))
        return records + comment

    # -- bytes -------------------------------------------------------------------------
    def _put(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= _BUFFER:
            self._flush()

    def _flush(self) -> None:
        view = memoryview(self._buffer)
        while view:
            done = os.write(self.fd, view)
            self.offset += done
            view = view[done:]
        view.release()
        self._buffer.clear()

    def _put_piece(self, piece: Piece) -> int:
        if isinstance(piece, bytes):
            self._put(piece)
            return len(piece)
        source, start, length = piece
        if length <= _SMALL_PIECE:
            data = os.pread(source, length, start)
            if len(data) != length:
                raise OSError(f"a source file ended {length - len(data)} bytes early")
            self._put(data)
            return length
        self._flush()
        copy_bytes(source, start, length, self.fd)
        self.offset += length
        return length
