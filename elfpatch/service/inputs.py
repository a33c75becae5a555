"""Turning the paths a user gives into ELF inputs.

A path is an ELF file, a folder (walked recursively; ELF files recognised by
their magic bytes, each real file once however many links point at it), or
a wheel/zip (every ELF member).  Problems with one path become an error
entry and the others are still processed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from elfpatch.base.regular_file import is_temporary_name
from elfpatch.elf.file import ElfFile
from elfpatch.elf.source import ElfSource, cached_archive, has_elf_magic_file, open_source
from elfpatch.errors import ElfpatchError, InputError
from elfpatch.wheel.read import elf_members, is_archive_name
from elfpatch.wheel.zipread import END_SIGNATURE


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


def existing_identities(paths: Iterable[str]) -> set[tuple[int, int]]:
    """The files behind those of ``paths`` that exist (one that does not fails when opened)."""
    found = set()
    for path in paths:
        with contextlib.suppress(OSError):
            found.add(_identity(Path(path)))
    return found


# The other names of one input file: its first path -> the later paths that lead to it.
Aliases = dict[str, list[str]]


def expand(paths: Iterable[str],
           aliases: Aliases | None = None) -> Iterator[ElfSource | ElfpatchError]:
    """Every ELF input named by ``paths``, or an error for a path that has none.

    Each file is one input however many names (hard links, symbolic links)
    lead to it; the names after the first are added to ``aliases``.
    """
    seen = _Seen(aliases if aliases is not None else {})
    for raw in paths:
        path = Path(raw)
        try:
            yield from _expand_one(path, seen)
        except ElfpatchError as error:
            yield error


class _Seen:
    """The files found so far, by (device, inode), and the later names of each."""

    def __init__(self, aliases: Aliases) -> None:
        self.first: dict[tuple[int, int], str] = {}
        self.aliases = aliases

    def __contains__(self, identity: tuple[int, int]) -> bool:
        return identity in self.first

    def add(self, identity: tuple[int, int], path: Path) -> bool:
        """Whether ``path`` is a new file (else it is recorded as another name of one)."""
        first = self.first.get(identity)
        if first is None:
            self.first[identity] = str(path)
            return True
        others = self.aliases.setdefault(first, [])
        if str(path) != first and str(path) not in others:
            others.append(str(path))
        return False


def split_sources(paths: Iterable[str], aliases: Aliases | None = None,
                  ) -> tuple[list[ElfSource], list[ElfpatchError]]:
    """``expand``'s inputs, apart from the paths that had none."""
    sources: list[ElfSource] = []
    errors: list[ElfpatchError] = []
    for item in expand(paths, aliases):
        if isinstance(item, ElfpatchError):
            errors.append(item)
        else:
            sources.append(item)
    return sources, errors


def _expand_one(path: Path, seen: _Seen) -> Iterator[ElfSource | ElfpatchError]:
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
    if seen.add(_identity(path), path):
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


def _expand_folder(folder: Path, seen: _Seen,
                   unreadable: list[OSError]) -> Iterator[ElfSource | ElfpatchError]:
    """The folder's ELF files and wheel members; a broken wheel is one error among them."""
    for file in walk_folder(folder, unreadable):
        try:
            if not file.is_file():  # dangling links, pipes, sockets, devices
                continue
            identity = _identity(file)
        except OSError:  # vanished or unreadable since the walk listed it
            continue
        is_wheel = file.suffix.lower() == ".whl"
        if identity in seen:
            seen.add(identity, file)  # another name of a file already found
        elif is_wheel:
            seen.add(identity, file)
            try:
                yield from _archive_members(file)
            except ElfpatchError as error:
                yield error
        elif has_elf_magic_file(file):
            seen.add(identity, file)
            yield ElfSource(str(file), root=str(folder))


def _archive_members(path: Path) -> Iterator[ElfSource]:
    # Kept open in the cache: the workers check forks later find it there, parsed.
    archive = cached_archive(str(path))
    members = elf_members(archive)
    for member in members:
        yield ElfSource(str(path), member.name, size=member.size, index=member.index)


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
