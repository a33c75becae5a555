"""Turning the paths a user gives into ELF inputs.

A path is an ELF file, a folder (walked recursively; ELF files recognised by
their magic bytes, each real file once however many links point at it), or
a wheel/zip (every ELF member).  Problems with one path become an error
entry and the others are still processed.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elfpatch.elf.constants import ELF_MAGIC
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError, InputError
from elfpatch.wheel import elf_members, is_archive_name, open_archive, open_member


@dataclass(frozen=True)
class ElfSource:
    """One ELF image to analyse: a file on disk or a member of an archive."""

    path: str
    member: str | None = None
    root: str | None = None  # the folder argument this file was found under
    size: int = 0  # bytes to read (archive members), to schedule the largest first

    @property
    def label(self) -> str:
        return f"{self.path}:{self.member}" if self.member else self.path


def has_elf_magic_file(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def walk_folder(folder: Path) -> Iterator[Path]:
    """Regular files below ``folder`` in a stable order, not following links to folders."""
    for directory, subdirs, files in os.walk(folder):
        subdirs.sort()
        for name in sorted(files):
            yield Path(directory) / name


def expand(paths: Iterable[str]) -> Iterator[ElfSource | ElfpatchError]:
    """Every ELF input named by ``paths``, or an error for a path that has none."""
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        try:
            yield from _expand_one(path, seen)
        except ElfpatchError as error:
            yield error


def _expand_one(path: Path, seen: set[str]) -> Iterator[ElfSource]:
    if not path.exists():
        reason = ("no such file (a dangling symbolic link)" if path.is_symlink() else
                  "no such file or directory")
        raise InputError(str(path), reason)
    if path.is_dir():
        found = list(_expand_folder(path, seen))
        if not found:
            raise InputError(str(path), "folder holds no ELF files or wheels")
        yield from found
        return
    if not path.is_file():
        # Opening a FIFO would wait for a writer forever; devices and sockets are no ELF.
        raise InputError(str(path), "not a regular file (a pipe, socket or device)")
    if is_archive_name(path) or _is_zip_not_elf(path):
        yield from _archive_members(path)
        return
    real = os.path.realpath(path)
    if real not in seen:
        seen.add(real)
        yield ElfSource(str(path))


def _is_zip_not_elf(path: Path) -> bool:
    return not has_elf_magic_file(path) and zipfile.is_zipfile(path)


def _expand_folder(folder: Path, seen: set[str]) -> Iterator[ElfSource]:
    for file in walk_folder(folder):
        if not file.is_file():  # dangling links, pipes, sockets, devices
            continue
        real = os.path.realpath(file)
        if real in seen:
            continue
        if file.suffix.lower() == ".whl":
            seen.add(real)
            yield from _archive_members(file)
        elif has_elf_magic_file(file):
            seen.add(real)
            yield ElfSource(str(file), root=str(folder))


def _archive_members(path: Path) -> Iterator[ElfSource]:
    with open_archive(path) as archive:
        members = elf_members(archive, str(path))
        sizes = {name: archive.getinfo(name).file_size for name in members}
    for member in members:
        yield ElfSource(str(path), member, size=sizes[member])


def open_sources(
    items: Iterable[ElfSource | ElfpatchError],
) -> Iterator[tuple[ElfSource, ElfFile] | ElfpatchError]:
    """Open each source in turn; consecutive members of one archive share one open archive."""
    archive: zipfile.ZipFile | None = None
    archive_path: str | None = None
    try:
        for item in items:
            if isinstance(item, ElfpatchError):
                yield item
                continue
            try:
                if item.member is None:
                    elf = ElfFile.open(item.path)
                else:
                    if archive_path != item.path:
                        if archive is not None:
                            archive.close()
                        archive, archive_path = open_archive(Path(item.path)), item.path
                    assert archive is not None
                    elf = open_member(archive, item.member, item.path)
            except ElfpatchError as error:
                yield error
                continue
            yield item, elf
    finally:
        if archive is not None:
            archive.close()


def open_source(source: ElfSource) -> ElfFile:
    """Open one source on its own; archives stay open for the next member (and per worker)."""
    if source.member is None:
        return ElfFile.open(source.path)
    return open_member(_cached_archive(source.path), source.member, source.path)


# Reading a wheel's central directory (12k entries for torch) costs more than most
# members: keep the few most recent archives open for the life of the process.
_OPEN_ARCHIVES: dict[str, zipfile.ZipFile] = {}
_MAX_OPEN_ARCHIVES = 4


def _cached_archive(path: str) -> zipfile.ZipFile:
    archive = _OPEN_ARCHIVES.pop(path, None) or open_archive(Path(path))
    _OPEN_ARCHIVES[path] = archive  # most recent last
    while len(_OPEN_ARCHIVES) > _MAX_OPEN_ARCHIVES:
        _OPEN_ARCHIVES.pop(next(iter(_OPEN_ARCHIVES))).close()
    return archive
