"""Checking a wheel's members against RECORD, and re-reading a repaired wheel.

Before: every member that is not an ELF library elfpatch inflates anyway
(those are checked as they are read) is inflated and hashed against its
RECORD row, alongside the planning of the fix (``check_members``).

After: the staged file is opened as any input would be (``zipread`` checks
its whole structure again); its members must be the ones written, in
order, with the sizes and CRC-32 the writer meant, RECORD the one written,
and every member's compressed bytes what they were written from: the
input's (whose content was checked against RECORD before), or a rewritten
member's new stream (inflated before the wheel was written and found to be
exactly the verified library, whose hash RECORD holds).  The members are
shared out in two halves of about equal cost, on two cores.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from elfpatch.errors import ElfpatchError, InputError
from elfpatch.patch.verify import VerificationError
from elfpatch.service.halves import in_two_halves
from elfpatch.wheel.deflate_splice import Piece, piece_bytes
from elfpatch.wheel.read import RecordEntry, is_signature
from elfpatch.wheel.write import OutputMember
from elfpatch.wheel.zipread import ZipArchive, ZipMember, open_zip

Progress = Callable[[str], None]

# Each member also costs a fixed amount (headers, a decoder, a hash or a
# compare): about what 64 KiB of data does, which matters for wheels of many
# small files.
_MEMBER_COST = 64 << 10
_COMPARE_STEP = 1 << 20


def check_members(archive: ZipArchive, rows: Mapping[str, RecordEntry], record_name: str,
                  skip: Collection[str]) -> None:
    """Every member (but folders, RECORD, its signatures and ``skip``) is listed in RECORD
    and hashes to its row; else an ``InputError`` naming the wheel and the member."""
    for member in archive.members:
        if member.is_dir or is_signature(member.name) or member.name == record_name or \
                member.name in skip:
            continue
        entry = rows.get(member.name)
        if entry is None:
            raise InputError(archive.label(member), "broken RECORD: the member is not listed")
        hasher = entry.hasher(archive.label(member), member.name)
        for chunk in archive.decoded_chunks(member):
            hasher.update(chunk)
        if not entry.matches(hasher, member.size):
            raise InputError(archive.label(member), "broken RECORD: the hash or size does not "
                             "match the content")


def verify_wheel(staged_path: Path, source: ZipArchive, destination: Path,
                 written: Sequence[OutputMember], record_name: str, record_text: str,
                 progress: Progress | None = None) -> None:
    """Raise ``VerificationError`` (naming ``destination``) unless the staged wheel checks out.

    Each member's compressed bytes are compared with what was written: a
    copied member's with ``source``'s, a rewritten member's with its new
    stream, which was inflated and proven against the fixed library (and
    hashed for RECORD) before the wheel was written.
    """
    try:
        archive = open_zip(staged_path, name=str(destination))
    except ElfpatchError as error:
        raise VerificationError(str(destination), "the repaired wheel does not read back: "
                                f"{error.reason}; nothing was written") from None
    with archive:
        _verify_members(archive, written, destination)
        jobs: list[tuple[ZipMember, OutputMember]] = []
        for member, meant in zip(archive.members, written, strict=True):
            if member.name == record_name:
                _verify_record(archive, member, record_text)
            else:
                jobs.append((member, meant))

        def check(job: tuple[ZipMember, OutputMember]) -> None:
            member, meant = job
            if progress and member.compressed_size >= 1 << 20:
                progress(f"verifying {member.name}")
            _verify_bytes(archive, member, meant.pieces)

        in_two_halves(jobs, lambda job: job[0].compressed_size + _MEMBER_COST, check)


def _verify_members(archive: ZipArchive, written: Sequence[OutputMember],
                    destination: Path) -> None:
    if len(archive.members) != len(written):
        raise VerificationError(str(destination), f"{len(archive.members)} members read back, "
                                f"{len(written)} written; nothing was written")
    for member, meant in zip(archive.members, written, strict=True):
        found = (member.name, member.method, member.crc, member.size, member.compressed_size)
        expected = (meant.entry.name, meant.method, meant.crc, meant.size,
                    meant.compressed_size)
        if found != expected:
            raise VerificationError(f"{destination}:{member.name}", f"read back as {found}, "
                                    f"written as {expected}; nothing was written")


def _verify_bytes(archive: ZipArchive, member: ZipMember, pieces: Sequence[Piece]) -> None:
    """The member's compressed bytes, as read back, are the pieces it was written from."""
    offset = member.data_offset
    for chunk in piece_bytes(pieces):
        if os.pread(archive.fd, len(chunk), offset) != chunk:
            raise VerificationError(archive.label(member), "the member reads back differently "
                                    f"from what was written (at byte {offset - member.data_offset}"
                                    "); nothing was written")
        offset += len(chunk)
    if offset != member.data_end:
        raise VerificationError(archive.label(member), "the member reads back with another "
                                "length than was written; nothing was written")


def _verify_record(archive: ZipArchive, member: ZipMember, record_text: str) -> None:
    if b"".join(archive.decoded_chunks(member)) != record_text.encode("utf-8"):
        raise VerificationError(archive.label(member), "RECORD reads back differently")
