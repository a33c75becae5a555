"""Reading zip archives (wheels) without trusting them.

The end record, the zip64 records, the whole central directory and every
local header are read and checked before any member's data is touched: a
member is addressed by its index in the central directory, and its name is
validated (no absolute path, no ``..``, no backslash or control character,
no duplicate, no file that is also a folder) but only ever compared, printed
and written back, never turned into a path.  Members must not overlap (the
overlapping-entries zip bomb) and must lie between the start of the file and
the central directory, which must sit where the end record says.

A member's data is decoded in bounded steps with a hard cap at its declared
size: a stream that produces one byte more is refused at once, and nothing
is allocated from a size a header states before the bytes exist.  Every
problem is an ``InputError`` naming the archive, the member and the reason.
"""

from __future__ import annotations

import bz2
import itertools
import lzma
import os
import re
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Protocol

from elfpatch.base.regular_file import cannot_open, open_regular_descriptor, release_descriptor
from elfpatch.errors import InputError

LOCAL_SIGNATURE = b"PK\x03\x04"
CENTRAL_SIGNATURE = b"PK\x01\x02"
END_SIGNATURE = b"PK\x05\x06"
ZIP64_END_SIGNATURE = b"PK\x06\x06"
ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
DESCRIPTOR_SIGNATURE = b"PK\x07\x08"

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes
END_RECORD = struct.Struct("<4sHHHHIIH")  # 22 bytes
ZIP64_END_RECORD = struct.Struct("<4sQHHIIQQQQ")  # 56 bytes
ZIP64_LOCATOR = struct.Struct("<4sIQI")  # 20 bytes

ZIP64_EXTRA_ID = 0x0001
U16_MAX = 0xFFFF
U32_MAX = 0xFFFFFFFF

METHOD_STORED = 0
METHOD_DEFLATED = 8
METHOD_BZIP2 = 12
METHOD_LZMA = 14
READABLE_METHODS = (METHOD_STORED, METHOD_DEFLATED, METHOD_BZIP2, METHOD_LZMA)
_METHOD_NAMES = {1: "shrink", 2: "reduce", 3: "reduce", 4: "reduce", 5: "reduce", 6: "implode",
                 9: "deflate64", 10: "PKWARE implode", 18: "IBM TERSE", 19: "IBM LZ77",
                 20: "zstd (old id)", 93: "zstd", 94: "MP3", 95: "xz", 96: "JPEG", 97: "WavPack",
                 98: "PPMd", 99: "AES encryption"}

FLAG_ENCRYPTED = 0x0001
FLAG_LZMA_END_MARKER = 0x0002
FLAG_DESCRIPTOR = 0x0008
FLAG_PATCHED = 0x0020
FLAG_STRONG_ENCRYPTION = 0x0040
FLAG_UTF8 = 0x0800
FLAG_MASKED_HEADERS = 0x2000

# The largest central directory read (some 500,000 members): it is read whole.
MAX_CENTRAL_DIRECTORY = 64 << 20
# A name longer than PATH_MAX, or with a component longer than NAME_MAX, cannot
# be installed on Linux.
MAX_NAME_BYTES = 4096
MAX_COMPONENT_BYTES = 255
# Deflate cannot expand data by more than about 1032:1 (258 bytes from two bits).
MAX_DEFLATE_RATIO = 1032

# Members smaller than this are inflated by zlib even where ISA-L is installed.
_SMALL_MEMBER = 256 << 10

# Decoded bytes produced by one decoder step, and compressed bytes read at a time.
DECODE_STEP = 4 << 20
READ_STEP = 1 << 20


@dataclass(frozen=True)
class ZipMember:
    """One entry of the central directory, checked against its local header."""

    index: int
    name: str
    raw_name: bytes
    version_made_by: int
    version_needed: int
    flags: int
    method: int
    dos_time: int
    dos_date: int
    crc: int
    compressed_size: int
    size: int
    internal_attr: int
    external_attr: int
    central_extra: bytes
    comment: bytes
    header_offset: int
    local_extra: bytes = b""
    data_offset: int = 0  # first byte of the compressed data
    span_end: int = 0  # first byte after the data and its descriptor, if any

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")

    @property
    def data_end(self) -> int:
        return self.data_offset + self.compressed_size

    @property
    def mode(self) -> int:
        """The Unix mode bits, when the creator recorded them."""
        return self.external_attr >> 16 if self.version_made_by >> 8 == 3 else 0

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


# NUL, the C0 and C1 control characters (\r, \n, escape sequences), DEL, backslash.
_ODD_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


def printable_name(name: str) -> str:
    """``name`` with control characters and backslashes escaped, for one-line messages."""
    if name.isprintable() and "\\" not in name:
        return name
    return "".join(c if c.isprintable() and c != "\\" else repr(c)[1:-1] for c in name)


def name_problem(name: str, raw_length: int) -> str | None:
    """Why ``name`` cannot be a wheel member's name, or None."""
    if not name:
        return "an empty member name"
    if raw_length > MAX_NAME_BYTES:
        return f"a member name of {raw_length} bytes (more than {MAX_NAME_BYTES})"
    odd = _ODD_CHARACTER.search(name)
    if odd:
        return {"\x00": "a NUL byte in a member name",
                "\\": "a backslash in a member name"}.get(
            odd.group(), "a control character in a member name")
    if name.startswith("/"):
        return "an absolute member name"
    parts = name.split("/")
    if parts[-1] == "":  # a folder entry ends with a slash
        parts.pop()
    for part in parts:
        if part in ("", ".", ".."):
            word = {"": "an empty", ".": "a '.'", "..": "a '..'"}[part]
            return f"{word} component in a member name"
        if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
            return f"a member name component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def method_name(method: int) -> str:
    return _METHOD_NAMES.get(method, "unknown")


class ZipArchive:
    """An open archive whose structure was checked; members are read by index."""

    def __init__(self, path: Path, descriptor: int, size: int, members: tuple[ZipMember, ...],
                 comment: bytes, directory_offset: int) -> None:
        self.path = path
        self.name = str(path)
        self.fd = descriptor
        self.size = size
        self.members = members
        self.comment = comment
        self.directory_offset = directory_offset
        self._by_name = {member.name: member for member in members}

    # -- life ------------------------------------------------------------------
    def close(self) -> None:
        descriptor, self.fd = self.fd, -1  # forgotten first: see release_descriptor
        release_descriptor(descriptor)

    def __enter__(self) -> ZipArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookup ----------------------------------------------------------------
    def member(self, name: str) -> ZipMember | None:
        return self._by_name.get(name)

    def label(self, member: ZipMember) -> str:
        return f"{self.name}:{printable_name(member.name)}"

    def error(self, member: ZipMember, reason: str, hint: str | None = None) -> InputError:
        return InputError(self.label(member), reason, hint)

    # -- data --------------------------------------------------------------------
    def raw_chunks(self, member: ZipMember, step: int = READ_STEP) -> Iterator[bytes]:
        """The member's compressed bytes, ``step`` at a time."""
        offset, end = member.data_offset, member.data_end
        while offset < end:
            chunk = os.pread(self.fd, min(step, end - offset), offset)
            if not chunk:
                raise self.error(member, "the archive ends inside the member (it changed while "
                                 "being read?)")
            offset += len(chunk)
            yield chunk

    def decoded_chunks(self, member: ZipMember, step: int = DECODE_STEP) -> Iterator[bytes]:
        """The member's content in chunks of at most ``step`` bytes, checked as it arrives.

        Never more than the declared size is produced: one byte past it and the
        member is refused.  At the end the size, the CRC-32 and the end of the
        compressed stream must all be where the central directory says.
        """
        check_readable(self, member)
        # ISA-L's decoder costs more to set up than a small member costs to inflate.
        decoder = _decoder(member, zlib if member.size < _SMALL_MEMBER else None)
        produced = crc = 0
        crc32 = deflate_module().crc32
        try:
            for chunk in _decode(decoder, self.raw_chunks(member), member.size, step):
                produced += len(chunk)
                if produced > member.size:
                    raise self.error(member, f"inflates past its stated {member.size} bytes")
                crc = crc32(chunk, crc)
                yield chunk
            finished = decoder.finished(produced == member.size)
        except decode_failures() as error:
            raise self.error(member, f"corrupt compressed data ({error or type(error).__name__})"
                             ) from None
        if produced != member.size:
            raise self.error(member, f"inflates to {produced} bytes, not {member.size}")
        if not finished:
            raise self.error(member, "the compressed stream does not end where the member does")
        if decoder.leftover():
            raise self.error(member, f"{decoder.leftover()} bytes after the end of the "
                             "compressed stream")
        if crc != member.crc:
            raise self.error(member, "CRC-32 does not match the content")

    def head(self, member: ZipMember, length: int) -> bytes:
        """The first ``length`` bytes of the member's content (fewer if it is shorter).

        Only the first compressed bytes are read: a kilobyte holds a dynamic
        Huffman header and the first literals; more is read only when that
        gave too little (bzip2 decodes whole blocks).  zlib, not ISA-L, whose
        larger state costs more to set up than a head costs to inflate.
        """
        check_readable(self, member)
        wanted = min(length, member.size)
        if member.method == METHOD_STORED:
            return os.pread(self.fd, wanted, member.data_offset)
        sample = 1024
        try:
            while True:
                take = min(sample, member.compressed_size)
                raw = os.pread(self.fd, take, member.data_offset)
                head = _first_bytes(_decoder(member, zlib), raw, wanted)
                if len(head) >= wanted or take == member.compressed_size:
                    return head
                sample *= 16
        except decode_failures() as error:
            raise self.error(member, f"corrupt compressed data ({error or type(error).__name__})"
                             ) from None


def _first_bytes(decoder: _Decoder, raw: bytes, length: int) -> bytes:
    out = decoder.feed(raw, length) if length else b""
    while len(out) < length and decoder.more():
        more = decoder.feed(b"", length - len(out))
        if not more:
            break
        out += more
    return out


def check_readable(archive: ZipArchive, member: ZipMember) -> None:
    """Refuse members elfpatch cannot decode: encrypted, or an unknown method."""
    if member.flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION):
        raise archive.error(member, "the member is encrypted",
                            hint="wheels are never encrypted; rebuild it")
    if member.method not in READABLE_METHODS:
        raise archive.error(member, f"compression method {member.method} "
                            f"({method_name(member.method)}) is not supported",
                            hint="wheels are stored or deflated")


# -- opening and checking ------------------------------------------------------------

def open_zip(path: Path, name: str | None = None) -> ZipArchive:
    """Open and check ``path``; every problem is one ``InputError``.

    ``name`` is what messages call the archive (``path`` by default): a
    staged copy opened through ``/proc/self/fd`` is reported as its wheel.
    """
    descriptor = _open_regular(path)
    try:
        return _read_structure(path, descriptor, name or str(path))
    except BaseException:
        os.close(descriptor)
        raise


def _open_regular(path: Path) -> int:
    """A descriptor on ``path``; anything but a regular file is refused, never waited on."""
    try:
        return open_regular_descriptor(path)
    except OSError as error:
        raise cannot_open(str(path), error) from None


@dataclass(frozen=True)
class _Directory:
    offset: int
    size: int
    count: int
    end: int  # where the central directory must end: the first end record
    comment: bytes


def _read_structure(path: Path, descriptor: int, name: str) -> ZipArchive:
    size = os.fstat(descriptor).st_size
    directory = _find_directory(name, descriptor, size)
    members = _central_entries(name, descriptor, directory)
    archive = ZipArchive(path, descriptor, size, (), directory.comment, directory.offset)
    archive.name = name
    checked = tuple(_with_local_header(archive, member, directory.offset) for member in members)
    _check_layout(archive, checked, directory.offset)
    archive.members = checked
    archive._by_name = {member.name: member for member in checked}
    return archive


def _find_directory(name: str, descriptor: int, size: int) -> _Directory:
    tail_length = min(size, END_RECORD.size + U16_MAX)
    tail = os.pread(descriptor, tail_length, size - tail_length)
    position = tail.rfind(END_SIGNATURE)
    while position >= 0:
        if position + END_RECORD.size <= len(tail):
            fields = END_RECORD.unpack_from(tail, position)
            if position + END_RECORD.size + fields[7] == len(tail):
                break
        position = tail.rfind(END_SIGNATURE, 0, position)
    else:
        raise InputError(name, "not a zip archive (no end of central directory record)")
    end_at = size - tail_length + position
    _sig, disk, directory_disk, disk_count, count, directory_size, offset, _comment_length = \
        fields
    comment = tail[position + END_RECORD.size :]
    if disk != 0 or directory_disk != 0 or disk_count != count:
        raise InputError(name, "a multi-disk (split) zip archive is not supported")
    directory = _Directory(offset, directory_size, count, end_at, comment)
    if end_at >= ZIP64_LOCATOR.size:
        locator = os.pread(descriptor, ZIP64_LOCATOR.size, end_at - ZIP64_LOCATOR.size)
        if locator[:4] == ZIP64_LOCATOR_SIGNATURE:
            directory = _zip64_directory(name, descriptor, end_at, locator, directory)
    return _checked_directory(name, directory)


def _zip64_directory(name: str, descriptor: int, end_at: int, locator: bytes,
                     plain: _Directory) -> _Directory:
    _sig, disk, record_at, disks = ZIP64_LOCATOR.unpack(locator)
    locator_at = end_at - ZIP64_LOCATOR.size
    if disk != 0 or disks > 1:
        raise InputError(name, "a multi-disk (split) zip archive is not supported")
    if record_at > locator_at - ZIP64_END_RECORD.size:
        raise InputError(name, "the zip64 end record is not where its locator says")
    record = os.pread(descriptor, ZIP64_END_RECORD.size, record_at)
    (sig, length, _made_by, _needed, disk, directory_disk, disk_count, count, directory_size,
     offset) = ZIP64_END_RECORD.unpack(record)
    if sig != ZIP64_END_SIGNATURE or record_at + 12 + length != locator_at:
        raise InputError(name, "the zip64 end record is not where its locator says")
    if disk != 0 or directory_disk != 0 or disk_count != count:
        raise InputError(name, "a multi-disk (split) zip archive is not supported")
    for field, small, large in (("member count", plain.count, count),
                                ("directory size", plain.size, directory_size),
                                ("directory offset", plain.offset, offset)):
        if small not in (U16_MAX, U32_MAX, large):
            raise InputError(name, f"the zip64 end record's {field} ({large}) differs from the "
                             f"end record's ({small})")
    return _Directory(offset, directory_size, count, record_at, plain.comment)


def _checked_directory(name: str, directory: _Directory) -> _Directory:
    expected_end = directory.offset + directory.size
    if expected_end < directory.end:
        raise InputError(name, f"the central directory is {directory.end - expected_end} bytes "
                         "after where the end record puts it (data before the archive, or a "
                         "wrong central-directory offset)", hint="wheels start with their first "
                         "member; rebuild it")
    if expected_end > directory.end:
        raise InputError(name, "the end record puts the central directory past itself (a wrong "
                         "central-directory offset or size)")
    if directory.size > MAX_CENTRAL_DIRECTORY:
        raise InputError(name, f"a central directory of {directory.size} bytes (elfpatch reads "
                         f"up to {MAX_CENTRAL_DIRECTORY >> 20} MiB)")
    if directory.count * CENTRAL_HEADER.size > directory.size:
        raise InputError(name, f"the end record counts {directory.count} members, more than "
                         f"{directory.size} bytes of central directory can hold")
    return directory


def _central_entries(name: str, descriptor: int, directory: _Directory) -> list[ZipMember]:
    data = os.pread(descriptor, directory.size, directory.offset)
    if len(data) != directory.size:
        raise InputError(name, "the archive ends inside its central directory")
    members: list[ZipMember] = []
    position = 0
    for index in range(directory.count):
        member, position = _central_entry(name, data, position, index)
        members.append(member)
    if position != len(data):
        raise InputError(name, f"the central directory holds {len(data) - position} bytes "
                         f"after its {directory.count} entries")
    _check_names(name, members)
    return members


def _central_entry(name: str, data: bytes, position: int, index: int) -> tuple[ZipMember, int]:
    if position + CENTRAL_HEADER.size > len(data):
        raise InputError(name, f"central directory entry {index} runs past the directory")
    (sig, made_by, needed, flags, method, dos_time, dos_date, crc, compressed, size, name_length,
     extra_length, comment_length, disk, internal, external, offset) = \
        CENTRAL_HEADER.unpack_from(data, position)
    if sig != CENTRAL_SIGNATURE:
        raise InputError(name, f"central directory entry {index} has no valid signature")
    start = position + CENTRAL_HEADER.size
    end = start + name_length + extra_length + comment_length
    if end > len(data):
        raise InputError(name, f"central directory entry {index} runs past the directory")
    raw_name = data[start : start + name_length]
    extra = data[start + name_length : start + name_length + extra_length]
    comment = data[start + name_length + extra_length : end]
    member_name = _decode_name(name, raw_name, flags, index)
    size, compressed, offset, disk = _resolve_zip64(name, member_name, extra, size, compressed,
                                                    offset, disk)
    if disk != 0:
        raise InputError(name, "a multi-disk (split) zip archive is not supported")
    member = ZipMember(index, member_name, raw_name, made_by, needed, flags, method, dos_time,
                       dos_date, crc, compressed, size, internal, external, extra, comment,
                       offset)
    return member, end


def _decode_name(name: str, raw: bytes, flags: int, index: int) -> str:
    if flags & FLAG_UTF8:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            shown = raw.decode("utf-8", "backslashreplace")
            raise InputError(f"{name}:{printable_name(shown)}", "the member name is not valid "
                             "UTF-8 although its UTF-8 flag is set") from None
    return raw.decode("cp437")


def iter_extra(extra: bytes) -> Iterator[tuple[int, bytes]]:
    """(id, data) of each field of an extra block; ValueError if one overruns it."""
    position = 0
    while position < len(extra):
        if position + 4 > len(extra):
            raise ValueError("a truncated extra field header")
        field_id, length = struct.unpack_from("<HH", extra, position)
        body = extra[position + 4 : position + 4 + length]
        if len(body) != length:
            raise ValueError(f"extra field {field_id:#06x} runs past the extra block")
        yield field_id, body
        position += 4 + length


def _resolve_zip64(archive: str, member: str, extra: bytes, size: int, compressed: int,
                   offset: int, disk: int) -> tuple[int, int, int, int]:
    """The real sizes, offset and disk, from the zip64 extra field where they are saturated."""
    wanted = [size == U32_MAX, compressed == U32_MAX, offset == U32_MAX, disk == U16_MAX]
    if not extra and not any(wanted):
        return size, compressed, offset, disk
    label = f"{archive}:{printable_name(member)}"
    try:
        fields = [body for field_id, body in iter_extra(extra) if field_id == ZIP64_EXTRA_ID]
    except ValueError as error:
        raise InputError(label, f"a malformed extra field ({error})") from None
    if len(fields) > 1:
        raise InputError(label, "two zip64 extra fields")
    if not any(wanted):
        return size, compressed, offset, disk
    if not fields:
        raise InputError(label, "a saturated size or offset without a zip64 extra field")
    body, position = fields[0], 0
    values = [size, compressed, offset, disk]
    for slot, width in enumerate((8, 8, 8, 4)):
        if not wanted[slot]:
            continue
        if position + width > len(body):
            raise InputError(label, "the zip64 extra field is too short for what it must hold")
        values[slot] = int.from_bytes(body[position : position + width], "little")
        position += width
    return values[0], values[1], values[2], values[3]


def _check_names(name: str, members: list[ZipMember]) -> None:
    seen: dict[str, int] = {}
    for member in members:
        problem = name_problem(member.name, len(member.raw_name))
        if problem:
            raise InputError(f"{name}:{printable_name(member.name)}", problem,
                             hint="a wheel's members are relative paths inside the wheel")
        if member.name in seen:
            raise InputError(f"{name}:{printable_name(member.name)}", "two members have this "
                             f"name (entries {seen[member.name]} and {member.index})")
        seen[member.name] = member.index
    files = {m.name for m in members if not m.is_dir}
    folders = {m.name.rstrip("/") for m in members if m.is_dir}
    for member in members:
        parts = member.name.rstrip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in files:
                raise InputError(f"{name}:{printable_name(parent)}", "a member is both a file "
                                 f"and a folder (of {printable_name(member.name)})")
    for folder in sorted(folders & files):
        raise InputError(f"{name}:{printable_name(folder)}", "a member is both a file and a "
                         "folder")


def _with_local_header(archive: ZipArchive, member: ZipMember, directory_offset: int
                       ) -> ZipMember:
    if member.header_offset + LOCAL_HEADER.size > directory_offset:
        raise archive.error(member, "the local header is not before the central directory")
    want = LOCAL_HEADER.size + len(member.raw_name) + 64
    head = os.pread(archive.fd, min(want, directory_offset - member.header_offset),
                    member.header_offset)
    (sig, _needed, flags, method, _time, _date, crc, compressed, size, name_length,
     extra_length) = LOCAL_HEADER.unpack_from(head)
    if sig != LOCAL_SIGNATURE:
        raise archive.error(member, "no local header where the central directory points")
    name_end = LOCAL_HEADER.size + name_length
    data_offset = member.header_offset + name_end + extra_length
    if data_offset + member.compressed_size > directory_offset:
        raise archive.error(member, "the member's data runs into the central directory")
    if len(head) < name_end + extra_length:
        head = os.pread(archive.fd, name_end + extra_length, member.header_offset)
    if head[LOCAL_HEADER.size : name_end] != member.raw_name:
        raise archive.error(member, "the local header names a different member than the "
                            "central directory")
    if method != member.method or flags & ~FLAG_UTF8 != member.flags & ~FLAG_UTF8:
        raise archive.error(member, "the local header's method or flags differ from the "
                            "central directory's")
    local_extra = head[name_end : name_end + extra_length]
    try:
        for _field in iter_extra(local_extra):
            pass
    except ValueError as error:
        raise archive.error(member, f"a malformed extra field in the local header ({error})"
                            ) from None
    span_end = data_offset + member.compressed_size
    if member.flags & FLAG_DESCRIPTOR:
        span_end += _descriptor_length(archive, member, span_end, directory_offset)
    else:
        _check_local_sizes(archive, member, local_extra, crc, compressed, size)
    return ZipMember(member.index, member.name, member.raw_name, member.version_made_by,
                     member.version_needed, member.flags, member.method, member.dos_time,
                     member.dos_date, member.crc, member.compressed_size, member.size,
                     member.internal_attr, member.external_attr, member.central_extra,
                     member.comment, member.header_offset, local_extra, data_offset, span_end)


def _check_local_sizes(archive: ZipArchive, member: ZipMember, local_extra: bytes, crc: int,
                       compressed: int, size: int) -> None:
    if size == U32_MAX or compressed == U32_MAX:
        size, compressed, _offset, _disk = _resolve_zip64(archive.name, member.name, local_extra,
                                                          size, compressed, 0, 0)
    if (crc, compressed, size) != (member.crc, member.compressed_size, member.size):
        raise archive.error(member, "the local header's CRC-32 or sizes differ from the central "
                            "directory's")


def _descriptor_length(archive: ZipArchive, member: ZipMember, at: int, limit: int) -> int:
    """The length of the data descriptor after the member, checked against the directory."""
    raw = os.pread(archive.fd, min(24, limit - at), at)
    start = 4 if raw[:4] == DESCRIPTOR_SIGNATURE else 0
    expected = (member.crc, member.compressed_size, member.size)
    for width, layout in ((4, "<III"), (8, "<IQQ")):
        length = start + 4 + 2 * width
        if len(raw) >= length and struct.unpack_from(layout, raw, start) == expected:
            return length
    raise archive.error(member, "the data descriptor after the member is missing or differs "
                        "from the central directory")


def _check_layout(archive: ZipArchive, members: tuple[ZipMember, ...],
                  directory_offset: int) -> None:
    """Members in the file, one after another: none overlaps another, nothing comes first."""
    ordered = sorted(members, key=lambda m: m.header_offset)
    first = ordered[0].header_offset if ordered else directory_offset
    if first != 0:
        raise InputError(archive.name, f"{first} bytes of data before the first member",
                         hint="wheels start with their first member; rebuild it")
    for before, after in itertools.pairwise(ordered):
        if before.span_end > after.header_offset:
            raise InputError(archive.label(after), f"the member overlaps "
                             f"{printable_name(before.name)} (the overlapping-entries zip bomb?)")
    for member in members:
        _check_declared_size(archive, member)


def _check_declared_size(archive: ZipArchive, member: ZipMember) -> None:
    """A size the compressed bytes cannot produce is refused before any decoding."""
    if member.method == METHOD_STORED and member.size != member.compressed_size:
        raise archive.error(member, f"a stored member of {member.compressed_size} bytes claims "
                            f"to hold {member.size}")
    if member.method == METHOD_DEFLATED and \
            member.size > member.compressed_size * MAX_DEFLATE_RATIO + 1024:
        raise archive.error(member, f"claims {member.size} bytes from {member.compressed_size} "
                            "compressed bytes, more than deflate can produce")
    if member.is_dir and member.size:
        raise archive.error(member, "a folder entry with content")


# -- decoders ------------------------------------------------------------------------

@cache
def deflate_module() -> ModuleType:
    """ISA-L's zlib interface when installed (about 3x as fast), else zlib."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


@cache
def decode_failures() -> tuple[type[BaseException], ...]:
    """What the decoders raise on corrupt data (ISA-L's error is no zlib.error)."""
    failures: tuple[type[BaseException], ...] = (zlib.error, OSError, EOFError, ValueError,
                                                 lzma.LZMAError)
    module = deflate_module()
    return failures if module is zlib else (*failures, module.error)


class _Decoder(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes:
        """At most ``limit`` bytes of output; ``data`` may be empty (just drain)."""

    def more(self) -> bool:
        """Whether output may come without new input."""

    def finished(self, complete: bool) -> bool:
        """Whether the stream ended properly (``complete``: the declared size was produced)."""

    def leftover(self) -> int:
        """Input bytes after the end of the stream."""


class _StoredDecoder:
    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes, limit: int) -> bytes:
        data = self._pending + data if self._pending else data
        self._pending = data[limit:]
        return data[:limit]

    def more(self) -> bool:
        return bool(self._pending)

    def finished(self, complete: bool) -> bool:
        return True

    def leftover(self) -> int:
        return len(self._pending)


class _Inflater(Protocol):
    """What zlib's and ISA-L's ``decompressobj`` objects share (the module is chosen at
    run time, so the type is stated here)."""

    unconsumed_tail: bytes
    unused_data: bytes
    eof: bool

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes: ...


class _InflateDecoder:
    """zlib's (or ISA-L's) raw inflate, bounded per step."""

    def __init__(self, module: ModuleType) -> None:
        self._inflater: _Inflater = module.decompressobj(-zlib.MAX_WBITS)
        self._full = False

    def feed(self, data: bytes, limit: int) -> bytes:
        if not data:
            data = self._inflater.unconsumed_tail
        out = self._inflater.decompress(data, limit)
        # A bounded step may hold output back with no input left: ask again.
        self._full = len(out) == limit
        return out

    def more(self) -> bool:
        return not self._inflater.eof and (bool(self._inflater.unconsumed_tail) or self._full)

    def finished(self, complete: bool) -> bool:
        return bool(self._inflater.eof)

    def leftover(self) -> int:
        return len(self._inflater.unused_data) + len(self._inflater.unconsumed_tail)


class _BufferedDecoder:
    """bz2's and lzma's decompressors, which keep unconsumed input themselves."""

    def __init__(self, end_marker: bool = True) -> None:
        self._decompressor: bz2.BZ2Decompressor | lzma.LZMADecompressor | None = None
        self._end_marker = end_marker
        self._after_end = 0

    def _start(self, data: bytes) -> bytes:
        self._decompressor = bz2.BZ2Decompressor()
        return data

    def feed(self, data: bytes, limit: int) -> bytes:
        if self._decompressor is None:
            data = self._start(data)
            if self._decompressor is None:
                return b""
        if self._decompressor.eof:
            self._after_end += len(data)
            return b""
        return self._decompressor.decompress(data, limit)

    def more(self) -> bool:
        decompressor = self._decompressor
        return decompressor is not None and not decompressor.eof and not decompressor.needs_input

    def finished(self, complete: bool) -> bool:
        # LZMA without an end marker stops where the declared size is reached.
        decompressor = self._decompressor
        return decompressor is not None and (decompressor.eof or
                                             (complete and not self._end_marker))

    def leftover(self) -> int:
        unused = len(self._decompressor.unused_data) if self._decompressor else 0
        return unused + self._after_end


class _LzmaDecoder(_BufferedDecoder):
    """Zip's LZMA: a 4-byte header and 5 bytes of properties, then a raw LZMA1 stream."""

    def __init__(self, end_marker: bool) -> None:
        super().__init__(end_marker)
        self._header = b""

    def _start(self, data: bytes) -> bytes:
        self._header += data
        if len(self._header) < 9:
            return b""
        properties_length = int.from_bytes(self._header[2:4], "little")
        if properties_length != 5:
            raise ValueError(f"LZMA properties of {properties_length} bytes, not 5")
        self._decompressor = lzma.LZMADecompressor(lzma.FORMAT_RAW,
                                                   filters=[_lzma_filter(self._header[4:9])])
        return self._header[9:]


def _lzma_filter(properties: bytes) -> dict[str, int]:
    first = properties[0]
    if first >= 9 * 5 * 5:
        raise ValueError("invalid LZMA properties")
    literal_bits, rest = first % 9, first // 9
    return {"id": lzma.FILTER_LZMA1, "lc": literal_bits, "lp": rest % 5, "pb": rest // 5,
            "dict_size": int.from_bytes(properties[1:5], "little")}


def _decoder(member: ZipMember, inflate: ModuleType | None = None) -> _Decoder:
    if member.method == METHOD_STORED:
        return _StoredDecoder()
    if member.method == METHOD_DEFLATED:
        return _InflateDecoder(inflate or deflate_module())
    if member.method == METHOD_BZIP2:
        return _BufferedDecoder()
    return _LzmaDecoder(end_marker=bool(member.flags & FLAG_LZMA_END_MARKER))


def _decode(decoder: _Decoder, chunks: Iterator[bytes], size: int, step: int) -> Iterator[bytes]:
    """Decoded output in steps of at most ``step`` bytes, never asking for more than
    one byte past ``size`` in all."""
    produced = 0
    for chunk in chunks:
        out = decoder.feed(chunk, max(1, min(step, size + 1 - produced)))
        while True:
            if out:
                produced += len(out)
                yield out
                if produced > size:
                    return
            if not decoder.more():
                break
            out = decoder.feed(b"", max(1, min(step, size + 1 - produced)))
            if not out and not decoder.more():
                break


def inflate_raw(chunks: Iterator[bytes], size: int, step: int = DECODE_STEP) -> Iterator[bytes]:
    """The content of a raw deflate stream that must inflate to exactly ``size`` bytes.

    Capped like a member's data; ``ValueError`` if the stream makes more or
    less, or more data follows it (a decoder's own error for a corrupt one).
    """
    decoder = _InflateDecoder(deflate_module() if size >= _SMALL_MEMBER else zlib)
    produced = 0
    for chunk in _decode(decoder, chunks, size, step):
        produced += len(chunk)
        if produced > size:
            raise ValueError(f"inflates past {size} bytes")
        yield chunk
    if produced != size or not decoder.finished(True) or decoder.leftover():
        raise ValueError(f"inflates to {produced} bytes, not {size}, or does not end there")
