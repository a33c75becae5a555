"""One ELF input, a file on disk or a member of a wheel, and opening it.

``ElfSource`` names an input without opening it, so it can be listed,
sorted and sent to a worker process; ``open_source`` opens it.  Which
inputs a path holds is the service layer's business (``service.inputs``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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
# forks, and are closed when the call returns (``archives_kept_open``; every
# API call is one), so that nothing stays open between calls and nothing
# outside a call reads a member.  Each call owns its archives: two calls in
# two threads never close each other's.  An archive is found again only
# while its file is the same (device, inode, size, modification and change
# time): a wheel rewritten in place is read anew.
_MAX_OPEN_ARCHIVES = 4


class OpenArchives:
    """The wheels one call keeps open while it reads their members."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[FileIdentity, ZipArchive]] = {}

    def get(self, path: str) -> ZipArchive:
        cached = self._open.pop(path, None)
        identity = _file_identity(path)
        if cached is not None and cached[0] == identity and identity[0] >= 0:
            archive = cached[1]
        else:
            if cached is not None:
                cached[1].close()
            archive = open_archive(Path(path))
            identity = _file_identity(path)
        self._open[path] = (identity, archive)  # most recent last
        while len(self._open) > _MAX_OPEN_ARCHIVES:
            self._open.pop(next(iter(self._open)))[1].close()
        return archive

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1][1].close()


# The archives of the call under way in this thread (and in the processes it forks);
# None outside every call: nothing is kept open between calls, by anyone.
_CURRENT: ContextVar[OpenArchives | None] = ContextVar("elfpatch_open_archives",
                                                       default=None)


@contextmanager
def archives_kept_open() -> Iterator[OpenArchives]:
    """Archives opened inside this block (in this thread) stay open until it ends."""
    archives = OpenArchives()
    token = _CURRENT.set(archives)
    try:
        yield archives
    finally:
        _CURRENT.reset(token)
        archives.close()


def cached_archive(path: str) -> ZipArchive:
    """The archive at ``path``, opened once within the current call."""
    return _current_call().get(path)


def _current_call() -> OpenArchives:
    archives = _CURRENT.get()
    if archives is None:
        # A caller of the layers below the API that opened no call of its own: a bug
        # of ours, since a wheel it opened here would stay open with no owner.
        raise RuntimeError("archive members are read inside archives_kept_open() "
                           "(every elfpatch API call opens one)")
    return archives


def _file_identity(path: str) -> FileIdentity:
    try:
        return identity_of(Path(path).stat())
    except OSError:
        return (-1, -1, -1, -1, -1)
