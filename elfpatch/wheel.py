"""Reading ELF members out of wheels (and plain zip archives).

Members are recognised by their first four bytes and read one at a time:
small ones into memory, large ones into an anonymous mapping of their size,
so that scanning a 190 MB wheel never unpacks it to disk.
"""

from __future__ import annotations

import mmap
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

from elfpatch.elf.constants import ELF_MAGIC
from elfpatch.elf.file import ElfFile
from elfpatch.errors import InputError

# Members larger than this are decompressed straight into an anonymous mapping of
# their exact size: one copy in memory, no disk write, no join of chunks.
_IN_MEMORY_LIMIT = 64 << 20


# What reading a damaged member raises: zlib.error for a corrupt deflate stream,
# NotImplementedError for an unknown compression method, RuntimeError when encrypted.
_MEMBER_FAILURES = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, OSError,
                    EOFError)

# Compressed bytes read, and inflated bytes produced, at a time.
_INFLATE_INPUT = 1 << 20
_INFLATE_OUTPUT = 8 << 20


@cache
def _deflate() -> ModuleType:
    """ISA-L's inflate when installed (zlib's interface, about 4x as fast: 0.6 s
    instead of 2.5 s for libtorch_cpu.so, the critical path of a torch wheel), else zlib."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib
    return isal_zlib


def is_archive_name(path: Path) -> bool:
    return path.suffix.lower() in (".whl", ".zip")


def open_archive(path: Path) -> zipfile.ZipFile:
    """Open a wheel or zip; a wheel must carry its dist-info metadata."""
    name = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(name, "no such file") from None
    except PermissionError:
        raise InputError(name, "permission denied") from None
    except (zipfile.BadZipFile, OSError) as error:
        raise InputError(name, f"not a readable zip archive ({error})") from None
    if path.suffix.lower() == ".whl" and not _has_wheel_metadata(archive):
        archive.close()
        raise InputError(name, "not a wheel: no *.dist-info/WHEEL and RECORD inside",
                         hint="a wheel is a zip built by a wheel builder")
    return archive


def _has_wheel_metadata(archive: zipfile.ZipFile) -> bool:
    names = archive.namelist()
    has_wheel = any(n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")
                    and n.endswith("/WHEEL") for n in names)
    has_record = any(n.endswith(".dist-info/RECORD") for n in names)
    return has_wheel and has_record


def elf_members(archive: zipfile.ZipFile, archive_name: str) -> list[str]:
    """Names of the members that start with the ELF magic, in archive order."""
    found = []
    descriptor = _file_descriptor(archive)
    for info in archive.infolist():
        if info.is_dir() or info.file_size < 16:
            continue
        try:
            if _member_head(archive, descriptor, info, len(ELF_MAGIC)) == ELF_MAGIC:
                found.append(info.filename)
        except _MEMBER_FAILURES as error:
            raise InputError(f"{archive_name}:{info.filename}",
                             f"cannot read archive member ({error})") from None
    return found


_HEAD_SAMPLE = 1024  # compressed bytes inflated for a head (a dynamic Huffman table fits)


def _member_head(archive: zipfile.ZipFile, descriptor: int | None, info: zipfile.ZipInfo,
                 length: int) -> bytes:
    """The first bytes of a member, read after its local header.

    ``ZipFile.open`` costs some 30 microseconds a member, 0.4 s over the
    12,000 files of a torch wheel; reading the local header and inflating a
    few hundred bytes costs a tenth of that.  Encrypted members, other
    compression methods and archives not read from a file take the
    ordinary route.
    """
    direct = info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
    if descriptor is None or not direct or _encrypted(info):
        with archive.open(info) as member:
            return member.read(length)
    data = _data_offset(descriptor, info)
    if info.compress_type == zipfile.ZIP_STORED:
        return os.pread(descriptor, length, data)
    sample = os.pread(descriptor, min(info.compress_size, _HEAD_SAMPLE), data)
    head = zlib.decompressobj(-zlib.MAX_WBITS).decompress(sample, length)
    if len(head) < length and info.compress_size > _HEAD_SAMPLE:
        with archive.open(info) as member:
            return member.read(length)
    return head


def _encrypted(info: zipfile.ZipInfo) -> bool:
    return bool(info.flag_bits & 0x1)


def open_member(archive: zipfile.ZipFile, member: str, archive_name: str) -> ElfFile:
    label = f"{archive_name}:{member}"
    try:
        info = archive.getinfo(member)
        return ElfFile(_member_data(archive, info), label)
    except (*_MEMBER_FAILURES, _deflate().error, KeyError) as error:
        raise InputError(label, f"cannot read archive member ({error})") from None


def _member_data(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes | mmap.mmap:
    """The member's bytes: in memory when small, in an anonymous mapping when large."""
    descriptor = _file_descriptor(archive)
    if descriptor is not None and info.compress_type == zipfile.ZIP_DEFLATED \
            and not _encrypted(info):
        chunks = _inflated(descriptor, info)
    else:  # stored, encrypted, another method, or an archive not read from a file
        chunks = _read_through_zipfile(archive, info)
    if info.file_size <= _IN_MEMORY_LIMIT:
        return b"".join(chunks)
    return _spool_to_map(chunks, info.file_size)


def _file_descriptor(archive: zipfile.ZipFile) -> int | None:
    try:
        return archive.fp.fileno() if archive.fp is not None else None
    except (AttributeError, OSError, ValueError):  # an in-memory archive
        return None


def _read_through_zipfile(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with archive.open(info) as source:
        while chunk := source.read(8 << 20):
            yield chunk


def _inflated(descriptor: int, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """A deflated member inflated straight from the archive, checked as zipfile checks it.

    Read with pread at the member's own offsets, so it does not disturb the
    archive object's file position; each step's output is bounded, so a
    member that inflates past its stated size is refused as soon as it does.
    """
    deflate = _deflate()
    inflater = deflate.decompressobj(-zlib.MAX_WBITS)
    compressed = _compressed_chunks(descriptor, info)
    size = crc = 0
    pending, exhausted = b"", False
    while not inflater.eof:
        if not pending and not exhausted:
            pending = next(compressed, b"")
            exhausted = not pending
        # With its output bounded, the inflater may hold output back after
        # taking in the last input: it is asked again, with nothing new.
        data = inflater.decompress(pending, _INFLATE_OUTPUT)
        pending = inflater.unconsumed_tail
        if not data:
            if exhausted:
                break  # the stream ends early
            continue
        size += len(data)
        if size > info.file_size:
            raise zipfile.BadZipFile(f"inflates past its stated {info.file_size} bytes")
        crc = deflate.crc32(data, crc)
        yield data
    if not inflater.eof or size != info.file_size:
        raise zipfile.BadZipFile(f"inflates to {size} bytes, not {info.file_size}")
    if crc != info.CRC:
        raise zipfile.BadZipFile("CRC-32 does not match")


def _compressed_chunks(descriptor: int, info: zipfile.ZipInfo) -> Iterator[bytes]:
    offset = _data_offset(descriptor, info)
    end = offset + info.compress_size
    while offset < end:
        chunk = os.pread(descriptor, min(_INFLATE_INPUT, end - offset), offset)
        if not chunk:
            raise EOFError("the archive ends inside the member")
        offset += len(chunk)
        yield chunk


def _data_offset(descriptor: int, info: zipfile.ZipInfo) -> int:
    """Where the member's data starts: after its local header, whose extra field may
    differ from the central directory's."""
    header = os.pread(descriptor, 30, info.header_offset)
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


def _spool_to_map(chunks: Iterator[bytes], size: int) -> mmap.mmap:
    # Populated up front: faulting in 100k pages one by one while writing
    # them cost 0.1-0.3 s for libtorch_cpu.so.
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    mapping = mmap.mmap(-1, max(size, 1), flags=flags)
    position = 0
    for chunk in chunks:
        if position + len(chunk) > size:
            raise zipfile.BadZipFile(f"member is longer than its {size} bytes")
        mapping[position : position + len(chunk)] = chunk
        position += len(chunk)
    if position != size:
        raise EOFError(f"member ends after {position} of {size} bytes")
    return mapping


# -- RECORD ------------------------------------------------------------------

def record_name(archive: zipfile.ZipFile, archive_name: str) -> str:
    records = [n for n in archive.namelist()
               if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise InputError(archive_name, f"broken RECORD: expected one *.dist-info/RECORD, found "
                         f"{len(records)}")
    return records[0]


def parse_record(text: str, where: str) -> list[tuple[str, str, str]]:
    """(path, hash, size) rows of a RECORD file (CSV)."""
    import csv
    import io

    rows = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row:
            continue
        if len(row) != 3:
            raise InputError(where, f"broken RECORD: line {number} has {len(row)} fields, "
                             "expected 3")
        rows.append((row[0], row[1], row[2]))
    return rows


def record_hash(data: bytes) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def record_line(path: str, data: bytes) -> str:
    import csv
    import io

    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow((path, record_hash(data), str(len(data))))
    return line.getvalue()


def verify_record(archive: zipfile.ZipFile, record: str, archive_name: str,
                  members: list[str]) -> None:
    """Every given member is listed in RECORD with the right hash and size."""
    rows = {path: (digest, size) for path, digest, size in
            parse_record(archive.read(record).decode("utf-8", "replace"),
                         f"{archive_name}:{record}")}
    for member in members:
        if member not in rows:
            raise InputError(archive_name, f"broken RECORD: {member} is not listed")
        data = archive.read(member)
        digest, size = rows[member]
        if digest != record_hash(data) or (size and int(size) != len(data)):
            raise InputError(archive_name, f"broken RECORD: the hash or size of {member} does "
                             "not match its content")
