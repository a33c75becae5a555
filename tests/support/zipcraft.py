"""Zip archives built byte by byte, honest or not, for the hostile-wheel and fuzz tests.

``zipfile`` refuses to write most of what an attacker writes (duplicate
names, names with ``..``, lying sizes, overlapping members), so the tests
build archives field by field: each ``Entry`` says what its headers claim,
and what they claim can differ from its data and from each other.
``wheel_entries`` turns a real wheel into entries, to which hostile ones
are added, with a RECORD that lists them (so that RECORD is not what
refuses them first).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

DOS_TIME, DOS_DATE = 0x6000, 0x5A21  # 2025-01-01 12:00
UNIX_FILE = 0o100644 << 16
UNIX_SYMLINK = 0o120777 << 16


@dataclass(frozen=True)
class Entry:
    name: bytes | str
    data: bytes = b""
    method: int = zipfile.ZIP_DEFLATED
    flags: int | None = None  # None: bit 11 when the name is not ASCII
    external_attr: int = UNIX_FILE
    version_needed: int = 20
    descriptor: bool = False  # sizes and CRC in a data descriptor after the data
    payload: bytes | None = None  # the compressed bytes as written (else made from data)
    crc: int | None = None  # what the headers claim (else the data's)
    size: int | None = None
    compressed_size: int | None = None
    local_name: bytes | None = None  # a local header naming something else
    local_method: int | None = None
    zip64: bool = False  # sizes and offset in a zip64 extra field
    offset: int | None = None  # the central directory's local header offset (else the real one)
    central_only: bool = False  # no local header and data of its own (points at another's)
    local_sizes: tuple[int, int, int] | None = None  # (crc, packed, size) the local header says
    made_by: int = 0x0314  # version made by: Unix, zip 2.0

    @property
    def raw_name(self) -> bytes:
        return self.name if isinstance(self.name, bytes) else self.name.encode("utf-8")

    @property
    def decoded_name(self) -> str:
        """The name as a reader decodes it: UTF-8 under flag bit 11, else cp437."""
        if isinstance(self.name, str):
            return self.name
        if self.header_flags & 0x800:
            return self.name.decode("utf-8", "surrogateescape")
        return self.name.decode("cp437")

    @property
    def header_flags(self) -> int:
        if self.flags is not None:
            return self.flags | (0x8 if self.descriptor else 0)
        utf8 = 0x800 if isinstance(self.name, str) and not self.name.isascii() else 0
        return utf8 | (0x8 if self.descriptor else 0)

    def compressed(self) -> bytes:
        if self.payload is not None:
            return self.payload
        if self.method == zipfile.ZIP_STORED:
            return self.data
        if self.method == zipfile.ZIP_DEFLATED:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            return packer.compress(self.data) + packer.flush()
        raise ValueError(f"give the payload of method {self.method}")


def _zip64_extra(values: Sequence[int]) -> bytes:
    body = b"".join(struct.pack("<Q", v) for v in values)
    return struct.pack("<HH", 1, len(body)) + body


def build(entries: Sequence[Entry], prefix: bytes = b"", comment: bytes = b"",
          offsets_include_prefix: bool = False, directory_shift: int = 0,
          zip64_end: bool = False, end_count: int | None = None) -> bytes:
    """The archive's bytes.

    ``prefix`` comes before the first member; its length is counted in the
    offsets only when ``offsets_include_prefix`` (``zip -A``).
    ``directory_shift`` is added to the central directory offset the end
    record gives; ``zip64_end`` writes zip64 end records.
    """
    body = bytearray()
    central = bytearray()
    base = len(prefix) if offsets_include_prefix else 0
    for entry in entries:
        payload = entry.compressed()
        crc = zlib.crc32(entry.data) if entry.crc is None else entry.crc
        size = len(entry.data) if entry.size is None else entry.size
        packed = len(payload) if entry.compressed_size is None else entry.compressed_size
        offset = base + len(body) if entry.offset is None else entry.offset
        if not entry.central_only:
            body += local_record(entry, crc, packed, size, payload)
        central_extra = b""
        central_fields = (packed, size, offset)
        if entry.zip64:
            central_extra = _zip64_extra((size, packed, offset))
            central_fields = (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", entry.made_by,
                               entry.version_needed, entry.header_flags, entry.method, DOS_TIME,
                               DOS_DATE, crc, central_fields[0], central_fields[1],
                               len(entry.raw_name), len(central_extra), 0, 0, 0,
                               entry.external_attr, central_fields[2])
        central += entry.raw_name + central_extra
    directory_offset = base + len(body)
    count = len(entries) if end_count is None else end_count
    end = b""
    if zip64_end:
        end64_at = directory_offset + len(central)
        end += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count,
                           len(central), directory_offset + directory_shift)
        end += struct.pack("<4sIQI", b"PK\x06\x07", 0, end64_at, 1)
        end += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                           0xFFFFFFFF, len(comment))
    else:
        end += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central),
                           directory_offset + directory_shift, len(comment))
    return prefix + bytes(body) + bytes(central) + end + comment


def local_record(entry: Entry, crc: int, packed: int, size: int, payload: bytes) -> bytes:
    """A member's local header, data and data descriptor."""
    local_sizes = (0, 0, 0) if entry.descriptor else (crc, packed, size)
    if entry.local_sizes is not None:
        local_sizes = entry.local_sizes
    local_extra = b""
    if entry.zip64:
        local_extra = _zip64_extra((size, packed))
        local_sizes = (local_sizes[0], 0xFFFFFFFF, 0xFFFFFFFF)
    local_name = entry.raw_name if entry.local_name is None else entry.local_name
    record = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", entry.version_needed,
                         entry.header_flags,
                         entry.method if entry.local_method is None else entry.local_method,
                         DOS_TIME, DOS_DATE, *local_sizes, len(local_name), len(local_extra))
    record += local_name + local_extra + payload
    if entry.descriptor:
        record += struct.pack("<4sIII", b"PK\x07\x08", crc, packed, size)
    return record


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def wheel_entries(wheel: Path) -> list[Entry]:
    """The members of a real wheel, as entries (RECORD last, rebuilt by ``with_record``)."""
    with zipfile.ZipFile(wheel) as archive:
        return [Entry(info.filename, archive.read(info), info.compress_type,
                      external_attr=info.external_attr)
                for info in archive.infolist()]


def record_name(entries: Sequence[Entry]) -> str:
    return next(e.name for e in entries
                if isinstance(e.name, str) and e.name.endswith(".dist-info/RECORD"))


def with_record(entries: Sequence[Entry], rows: dict[str, str] | None = None) -> list[Entry]:
    """``entries`` with RECORD rewritten to list each of them (``rows`` override lines)."""
    record = record_name(entries)
    lines = []
    for entry in entries:
        name = entry.decoded_name
        if name == record:
            continue
        lines.append(f"{name},{record_hash(entry.data)},{len(entry.data)}")
    lines.append(f"{record},,")
    text = "\n".join(lines) + "\n"
    for name, line in (rows or {}).items():
        text = "\n".join(line if row.split(",")[0] == name else row
                         for row in text.splitlines()) + "\n"
    return [replace(e, data=text.encode("utf-8", "surrogateescape")) if e.name == record else e
            for e in entries]


def hostile_wheel(base: Path, destination: Path, extra: Sequence[Entry],
                  rows: dict[str, str] | None = None, **build_options: object) -> Path:
    """The real wheel plus ``extra`` members (listed in its RECORD), written to ``destination``."""
    entries = wheel_entries(base)
    record_at = next(i for i, e in enumerate(entries) if e.name == record_name(entries))
    entries[record_at:record_at] = list(extra)
    destination.write_bytes(build(with_record(entries, rows), **build_options))  # type: ignore[arg-type]
    return destination
