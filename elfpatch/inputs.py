"""Turning the paths a user gives into ELF inputs.

A path is an ELF file, a folder (walked recursively; ELF files recognised by
their magic bytes, each real file once however many links point at it), or
a wheel/zip (every ELF member).  Problems with one path become an error
entry and the others are still processed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elfpatch.elf.constants import ELF_MAGIC
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError, InputError
from elfpatch.patch.staging import is_temporary_name
from elfpatch.wheel import elf_members, is_archive_name, open_archive, open_member
from elfpatch.zipread import END_SIGNATURE, ZipArchive


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


def walk_folder(folder: Path, unreadable: list[OSError] | None = None) -> Iterator[Path]:
    """Files below ``folder`` in a stable order, not following links to folders.

    elfpatch's own temporary files (a run's staged outputs, or those a killed
    run left) are never inputs: a half-written copy is no library.  Folders
    that cannot be listed are added to ``unreadable``.
    """
    errors = unreadable if unreadable is not None else []
    for directory, subdirs, files in os.walk(folder, onerror=errors.append):
        subdirs.sort()
        for name in sorted(files):
            if not is_temporary_name(name):
                yield Path(directory) / name


def _identity(path: Path) -> tuple[int, int]:
    """The file behind ``path`` (device, inode): hard links and symlinks name it once."""
    status = path.stat()
    return status.st_dev, status.st_ino


def expand(paths: Iterable[str]) -> Iterator[ElfSource | ElfpatchError]:
    """Every ELF input named by ``paths``, or an error for a path that has none.

    Each file is one input however many names (hard links, symbolic links)
    lead to it.
    """
    seen: set[tuple[int, int]] = set()
    for raw in paths:
        path = Path(raw)
        try:
            yield from _expand_one(path, seen)
        except ElfpatchError as error:
            yield error


def split_sources(paths: Iterable[str]) -> tuple[list[ElfSource], list[ElfpatchError]]:
    """``expand``'s inputs, apart from the paths that had none."""
    sources: list[ElfSource] = []
    errors: list[ElfpatchError] = []
    for item in expand(paths):
        if isinstance(item, ElfpatchError):
            errors.append(item)
        else:
            sources.append(item)
    return sources, errors


def _expand_one(path: Path,
                seen: set[tuple[int, int]]) -> Iterator[ElfSource | ElfpatchError]:
    if not path.exists():
        reason = ("no such file (a dangling symbolic link)" if path.is_symlink() else
                  "no such file or directory")
        raise InputError(str(path), reason)
    if path.is_dir():
        unreadable: list[OSError] = []
        found = list(_expand_folder(path, seen, unreadable))
        yield from found
        if unreadable:  # reported after what could be read, which is still analysed
            first = unreadable[0]
            raise InputError(str(first.filename or path), f"cannot read folder: "
                             f"{first.strerror or first}" + (f" (and {len(unreadable) - 1} "
                             "more)" if len(unreadable) > 1 else ""))
        if not found:
            raise InputError(str(path), "folder holds no ELF files or wheels")
        return
    if not path.is_file():
        # Opening a FIFO would wait for a writer forever; devices and sockets are no ELF.
        raise InputError(str(path), "not a regular file (a pipe, socket or device)")
    if is_archive_name(path) or _is_zip_not_elf(path):
        yield from _archive_members(path)
        return
    identity = _identity(path)
    if identity not in seen:
        seen.add(identity)
        yield ElfSource(str(path))


def _is_zip_not_elf(path: Path) -> bool:
    """A file that ends with a zip end record and does not start as ELF."""
    if has_elf_magic_file(path):
        return False
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - (22 + 0xFFFF)))
            return END_SIGNATURE in handle.read()
    except OSError:
        return False


def _expand_folder(folder: Path, seen: set[tuple[int, int]],
                   unreadable: list[OSError]) -> Iterator[ElfSource | ElfpatchError]:
    """The folder's ELF files and wheel members; a broken wheel is one error among them."""
    for file in walk_folder(folder, unreadable):
        try:
            if not file.is_file():  # dangling links, pipes, sockets, devices
                continue
            identity = _identity(file)
        except OSError:  # vanished or unreadable since the walk listed it
            continue
        if identity in seen:
            continue
        if file.suffix.lower() == ".whl":
            seen.add(identity)
            try:
                yield from _archive_members(file)
            except ElfpatchError as error:
                yield error
        elif has_elf_magic_file(file):
            seen.add(identity)
            yield ElfSource(str(file), root=str(folder))


def _archive_members(path: Path) -> Iterator[ElfSource]:
    # Kept open in the cache: the workers check forks later find it there, parsed.
    archive = _cached_archive(str(path))
    members = elf_members(archive)
    for member in members:
        yield ElfSource(str(path), member.name, size=member.size, index=member.index)


def _open_archive_member(archive: ZipArchive, source: ElfSource) -> ElfFile:
    """The source's member, found by its index and checked to be the one listed."""
    member = (archive.members[source.index]
              if source.index is not None and source.index < len(archive.members)
              else archive.member(source.member or ""))
    if member is None or member.name != source.member:
        raise InputError(source.label, "the archive changed while being read")
    return open_member(archive, member)


def open_sources(
    items: Iterable[ElfSource | ElfpatchError],
) -> Iterator[tuple[ElfSource, ElfFile] | ElfpatchError]:
    """Open each source in turn (archives come from the cache ``expand`` filled)."""
    for item in items:
        if isinstance(item, ElfpatchError):
            yield item
            continue
        try:
            elf = open_source(item)
        except ElfpatchError as error:
            yield error
            continue
        yield item, elf


def open_source(source: ElfSource) -> ElfFile:
    """Open one source on its own; archives stay open for the next member (and per worker)."""
    if source.member is None:
        return ElfFile.open(source.path)
    return _open_archive_member(_cached_archive(source.path), source)


# Reading and checking a wheel's central directory and local headers (13k
# entries for torch: 0.5 s) costs more than most members: the few most recent
# archives stay open for the life of the process, and of the workers it forks.
# An archive is found again only while its file is the same (device, inode,
# size, modification time): a wheel rewritten in place is read anew.
_OPEN_ARCHIVES: dict[str, tuple[tuple[int, int, int, int], ZipArchive]] = {}
_MAX_OPEN_ARCHIVES = 4


def _cached_archive(path: str) -> ZipArchive:
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


def _file_identity(path: str) -> tuple[int, int, int, int]:
    try:
        status = Path(path).stat()
    except OSError:
        return (-1, -1, -1, -1)
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
