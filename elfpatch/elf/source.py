"""One ELF input, a file on disk or a member of a wheel, and opening it.

``ElfSource`` names an input without opening it, so it can be listed,
sorted and sent to a worker process; ``open_source`` opens it.  Which
inputs a path holds is the service layer's business (``service.inputs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elfpatch.base.regular_file import FileIdentity, identity_of
from elfpatch.elf.constants import ELF_MAGIC
from elfpatch.elf.file import ElfFile
from elfpatch.errors import InputError
from elfpatch.wheel.read import open_archive, open_member
from elfpatch.wheel.zipread import ZipArchive


@dataclass(frozen=True)
class ElfSource:
    """One ELF image to analyse: a file on disk or a member of an archive."""

    path: str
    member: str | None = None
    root: str | None = None  # the folder argument this file was found under
    size: int = 0  # bytes to read (archive members), to schedule the largest first
    index: int | None = None  # the member's entry in the archive's central directory

    @property
    def label(self) -> str:
        return f"{self.path}:{self.member}" if self.member else self.path


def has_elf_magic_file(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def open_source(source: ElfSource) -> ElfFile:
    """Open one source on its own; archives stay open for the next member (and per worker)."""
    if source.member is None:
        return ElfFile.open(source.path)
    return _open_archive_member(cached_archive(source.path), source)


def _open_archive_member(archive: ZipArchive, source: ElfSource) -> ElfFile:
    """The source's member, found by its index and checked to be the one listed."""
    member = (archive.members[source.index]
              if source.index is not None and source.index < len(archive.members)
              else archive.member(source.member or ""))
    if member is None or member.name != source.member:
        raise InputError(source.label, "the archive changed while being read")
    return open_member(archive, member)


# Reading and checking a wheel's central directory and local headers (13k
# entries for torch: 0.5 s) costs more than most members: within one call the
# few most recent archives stay open, in this process and in the workers it
# forks, and ``close_archives`` closes them when the call returns (the API
# does), so that nothing stays open between calls.  An archive is found again
# only while its file is the same (device, inode, size, modification and change time):
# a wheel rewritten in place is read anew.
_OPEN_ARCHIVES: dict[str, tuple[FileIdentity, ZipArchive]] = {}
_MAX_OPEN_ARCHIVES = 4


def cached_archive(path: str) -> ZipArchive:
    cached = _OPEN_ARCHIVES.pop(path, None)
    identity = _file_identity(path)
    if cached is not None and cached[0] == identity and identity[0] >= 0:
        archive = cached[1]
    else:
        if cached is not None:
            cached[1].close()
        archive = open_archive(Path(path))
        identity = _file_identity(path)
    _OPEN_ARCHIVES[path] = (identity, archive)  # most recent last
    while len(_OPEN_ARCHIVES) > _MAX_OPEN_ARCHIVES:
        _OPEN_ARCHIVES.pop(next(iter(_OPEN_ARCHIVES)))[1].close()
    return archive


def _file_identity(path: str) -> FileIdentity:
    try:
        return identity_of(Path(path).stat())
    except OSError:
        return (-1, -1, -1, -1, -1)


def close_archives() -> None:
    """Close every archive ``cached_archive`` keeps open."""
    while _OPEN_ARCHIVES:
        _OPEN_ARCHIVES.popitem()[1][1].close()
