"""Reading wheels: their metadata, their ELF members, their RECORD.

The archive's structure is checked by ``zipread`` before anything else.
ELF members are recognised by their first four bytes and read one at a
time, for ``scan`` and ``check``: a small one into memory, a large one into
an anonymous temporary file in the system's temporary folder that is then
mapped, both growing only as decoded bytes arrive (a header that declares
6 GiB costs nothing until 6 GiB really come out of the stream).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elfpatch.base.regular_file import TEMPORARY_MARK, require_space, write_all
from elfpatch.elf.constants import ELF_MAGIC
from elfpatch.elf.file import ElfFile
from elfpatch.errors import InputError
from elfpatch.wheel.zipread import ZipArchive, ZipMember, open_zip, printable_name

# Members up to this size are decoded into memory; larger ones into a file.
IN_MEMORY_LIMIT = 64 << 20
# A RECORD larger than this is refused rather than read (torch's is 1.3 MB).
MAX_RECORD_BYTES = 64 << 20
# What may precede a file name in a RECORD row's hash: strong algorithms only.
_WEAK_HASHES = ("md5", "sha1")
SIGNATURES = ("RECORD.jws", "RECORD.p7s")


def is_archive_name(path: Path) -> bool:
    return path.suffix.lower() in (".whl", ".zip")


def open_archive(path: Path) -> ZipArchive:
    """Open a wheel or zip, its structure checked; a wheel must carry its dist-info metadata."""
    archive = open_zip(path)
    if path.suffix.lower() == ".whl" and not _has_wheel_metadata(archive):
        archive.close()
        raise InputError(str(path), "not a wheel: no *.dist-info/WHEEL and RECORD inside",
                         hint="a wheel is a zip built by a wheel builder")
    return archive


def _has_wheel_metadata(archive: ZipArchive) -> bool:
    names = [member.name for member in archive.members]
    has_wheel = any(n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")
                    and n.endswith("/WHEEL") for n in names)
    has_record = any(_is_record_name(n) for n in names)
    return has_wheel and has_record


def _is_record_name(name: str) -> bool:
    return name.count("/") == 1 and name.endswith(".dist-info/RECORD")


def elf_members(archive: ZipArchive) -> list[ZipMember]:
    """The members that start with the ELF magic, in archive order."""
    return [member for member in archive.members
            if not member.is_dir and member.size >= 16
            and archive.head(member, len(ELF_MAGIC)) == ELF_MAGIC]


def elf_type(archive: ZipArchive, member: ZipMember) -> int | None:
    """``e_type`` from an ELF member's header (None when the header is cut short)."""
    head = archive.head(member, 18)
    if len(head) < 18 or head[5] not in (1, 2):
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


def open_member(archive: ZipArchive, member: ZipMember) -> ElfFile:
    """The member as an ``ElfFile`` named ``archive:member``."""
    return ElfFile(member_data(archive, member), archive.label(member))


def member_data(archive: ZipArchive, member: ZipMember) -> bytes | mmap.mmap:
    """The member's bytes: in memory when small, in a mapped anonymous file when large."""
    if member.size <= IN_MEMORY_LIMIT:
        return b"".join(archive.decoded_chunks(member))
    folder = Path(tempfile.gettempdir())
    require_space(folder, member.size, archive.label(member), "to read the member (inflated)",
                  hint="point TMPDIR at a larger file system")
    descriptor = spill_file(folder)
    try:
        for chunk in archive.decoded_chunks(member):
            write_all(descriptor, chunk)
        return mmap.mmap(descriptor, 0, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError as error:
        raise archive.error(member, f"cannot spill the member to a temporary file: "
                            f"{error.strerror or error}") from None
    finally:
        os.close(descriptor)  # the mapping keeps the file alive


def spill_file(directory: Path) -> int:
    """A read-write file in ``directory`` that no name leads to: gone when its last user is."""
    try:
        return os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):  # no O_TMPFILE here, or not on this file system
        descriptor, name = tempfile.mkstemp(prefix=".spill.", suffix=TEMPORARY_MARK,
                                            dir=directory)
        Path(name).unlink()
        return descriptor


# -- RECORD ------------------------------------------------------------------

def record_member(archive: ZipArchive) -> ZipMember:
    records = [m for m in archive.members if _is_record_name(m.name)]
    if len(records) != 1:
        raise InputError(archive.name, f"broken RECORD: expected one *.dist-info/RECORD, found "
                         f"{len(records)}")
    return records[0]


def read_record_text(archive: ZipArchive, member: ZipMember) -> str:
    if member.size > MAX_RECORD_BYTES:
        raise archive.error(member, f"a RECORD of {member.size} bytes (elfpatch reads up to "
                            f"{MAX_RECORD_BYTES >> 20} MiB)")
    data = b"".join(archive.decoded_chunks(member))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise archive.error(member, f"broken RECORD: not UTF-8 ({error.reason} at byte "
                            f"{error.start})") from None


def parse_record(text: str, where: str) -> list[tuple[str, str, str]]:
    """(path, hash, size) rows of a RECORD file (CSV)."""
    rows = []
    try:
        for number, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            if not row:
                continue
            if len(row) != 3:
                raise InputError(where, f"broken RECORD: line {number} has {len(row)} fields, "
                                 "expected 3")
            rows.append((row[0], row[1], row[2]))
    except csv.Error as error:
        raise InputError(where, f"broken RECORD: {error}") from None
    return rows


@dataclass(frozen=True)
class RecordEntry:
    """What RECORD says of one file."""

    digest: str  # "algorithm=urlsafe-base64", or "" for RECORD itself and signatures
    size: str

    def hasher(self, where: str, path: str) -> hashlib._Hash:
        algorithm = self.digest.partition("=")[0]
        if not self.digest or "=" not in self.digest:
            raise InputError(where, f"broken RECORD: {printable_name(path)} has no hash")
        if algorithm in _WEAK_HASHES or algorithm not in hashlib.algorithms_guaranteed:
            raise InputError(where, f"broken RECORD: {printable_name(path)} is hashed with "
                             f"{printable_name(algorithm)}, not sha256 or stronger")
        return hashlib.new(algorithm)

    def matches(self, hasher: hashlib._Hash, size: int) -> bool:
        if self.size and self.size != str(size):
            return False
        return self.digest == hash_text(hasher)


def record_entries(rows: list[tuple[str, str, str]], where: str) -> dict[str, RecordEntry]:
    """RECORD's rows by path; a path listed twice, or a size that is no number, is refused."""
    entries: dict[str, RecordEntry] = {}
    for path, digest, size in rows:
        if path in entries:
            raise InputError(where, f"broken RECORD: {printable_name(path)} is listed twice")
        if size and not size.isdecimal():
            raise InputError(where, f"broken RECORD: the size of {printable_name(path)} is "
                             f"{printable_name(size)!r}, not a number")
        entries[path] = RecordEntry(digest, size)
    return entries


def hash_text(hasher: hashlib._Hash) -> str:
    digest = base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode("ascii")
    return f"{hasher.name}={digest}"


def record_hash(data: bytes) -> str:
    return hash_text(hashlib.sha256(data))


def record_line(path: str, digest: str, size: int | str) -> str:
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow((path, digest, str(size)))
    return line.getvalue()


def is_signature(name: str) -> bool:
    return _is_record_name(name.rsplit(".", 1)[0]) and name.endswith(SIGNATURES)
