"""``fix``: plan the rewrite of a set of libraries, then write each one safely.

Read (every input), analyse (as one set), plan (per symbol), write (per
file, atomically, verified).  Nothing is written when planning fails, when
``--strict`` refuses, or with ``--dry-run``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from elfpatch.analysis.crosslib import LibrarySymbols, SharedUse, dynamic_symbols, shared_uses
from elfpatch.analysis.unique import unique_symbols
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import symbol_tables
from elfpatch.errors import ElfpatchError, InputError, UnsupportedElfError
from elfpatch.inputs import ElfSource, expand
from elfpatch.patch.plan import Candidate, FixOptions, FixPlan, LibraryPlan, plan_library
from elfpatch.patch.rewrite import plan_edits
from elfpatch.patch.verify import verify_output
from elfpatch.patch.write import write_atomically


@dataclass(frozen=True)
class LibraryOutcome:
    plan: LibraryPlan
    source: str
    destination: str | None  # None with --dry-run
    written: bool  # False when nothing changed in place, or with --dry-run


@dataclass
class FixResult:
    plan: FixPlan | None = None
    outcomes: list[LibraryOutcome] = field(default_factory=list)
    errors: list[ElfpatchError] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return bool(self.plan and self.plan.refusals)


@dataclass(frozen=True)
class _Library:
    source: ElfSource
    candidates: tuple[Candidate, ...]
    symbols: LibrarySymbols


def _read_library(source: ElfSource, with_symbols: bool) -> _Library:
    if source.member is not None:
        raise InputError(source.label, "a wheel is repaired as a whole",
                         hint="elfpatch fix WHEEL -w OUTDIR")
    with ElfFile.open(source.path) as elf:
        if elf.header.type not in (C.ET_DYN, C.ET_EXEC):
            raise UnsupportedElfError(source.path, f"cannot fix an ELF of type "
                                      f"{elf.header.type_name}; only executables and shared "
                                      "libraries", hint="rebuild objects with -fno-gnu-unique")
        candidates = tuple(Candidate(u.table, u.index, u.name, u.demangled, u.defined)
                           for table in symbol_tables(elf) for u in unique_symbols(elf, table))
        # Alone, a library has nobody to share with: skip reading every dynamic name.
        symbols = dynamic_symbols(elf, source.label) if with_symbols else \
            LibrarySymbols(source.label)
        return _Library(source, candidates, symbols)


def read_set(paths: Iterable[str]) -> tuple[list[_Library], list[ElfpatchError]]:
    libraries, errors = [], []
    items = list(expand(paths))
    several = sum(1 for item in items if not isinstance(item, ElfpatchError)) > 1
    for item in items:
        if isinstance(item, ElfpatchError):
            errors.append(item)
            continue
        try:
            libraries.append(_read_library(item, several))
        except ElfpatchError as error:
            errors.append(error)
    return libraries, errors


def make_plan(libraries: list[_Library], options: FixOptions) -> FixPlan:
    uses = shared_uses([lib.symbols for lib in libraries])
    plans, refusals = [], []
    for lib in libraries:
        label = lib.source.label
        mine: dict[str, SharedUse] = {name: use for (owner, name), use in uses.items()
                                      if owner == label}
        plan, refused = plan_library(label, lib.candidates, mine, options)
        plans.append(plan)
        refusals.extend(refused)
    return FixPlan(options.mode, tuple(plans), tuple(refusals))


def destinations(libraries: list[_Library], output: str | None) -> dict[str, Path]:
    """Where each library is written: in place, or under/at ``output``."""
    if output is None:
        return {lib.source.label: Path(lib.source.path) for lib in libraries}
    out = Path(output)
    single = len(libraries) == 1 and libraries[0].source.root is None
    if single and not out.is_dir():
        return {libraries[0].source.label: out}
    return {lib.source.label: out / _relative_destination(lib.source) for lib in libraries}


def _relative_destination(source: ElfSource) -> Path:
    """Where under the output folder a library goes: its place under the folder given.

    A library found through a symbolic link (libfoo.so -> libfoo.so.1) goes
    where the real file is, under the name the loader looks for.
    """
    path = Path(source.path)
    if source.root is None:
        return Path(path.name)
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(source.root))
    return real.relative_to(root) if real.is_relative_to(root) else path.relative_to(source.root)


def _collisions(where: dict[str, Path]) -> list[ElfpatchError]:
    """One error per output path that two inputs would be written to (the last would win)."""
    by_destination: dict[str, list[str]] = {}
    for label, destination in where.items():
        by_destination.setdefault(os.path.realpath(destination), []).append(label)
    return [InputError(destination, f"{len(labels)} inputs would be written here: "
                       f"{', '.join(labels)}", hint="give their folder (its layout is mirrored) "
                       "or fix them one at a time")
            for destination, labels in by_destination.items() if len(labels) > 1]


def fix_paths(paths: Iterable[str], options: FixOptions, output: str | None,
              dry_run: bool = False) -> FixResult:
    libraries, errors = read_set(paths)
    result = FixResult(errors=errors)
    if not errors:
        errors.extend(_collisions(destinations(libraries, output)))
    if errors:
        return result  # never write part of a set whose other members could not be read
    result.plan = make_plan(libraries, options)
    if result.refused:
        return result
    where = destinations(libraries, output)
    for lib, plan in zip(libraries, result.plan.libraries, strict=True):
        destination = where[lib.source.label]
        if dry_run:
            result.outcomes.append(LibraryOutcome(plan, lib.source.path, None, False))
            continue
        try:
            written = _write_library(lib.source, plan, destination)
        except ElfpatchError as error:
            result.errors.append(error)
            continue
        result.outcomes.append(LibraryOutcome(plan, lib.source.path, str(destination), written))
    return result


def _write_library(source: ElfSource, plan: LibraryPlan, destination: Path) -> bool:
    """Write one library; returns whether a file was written."""
    source_path = Path(source.path)
    in_place = os.path.realpath(destination) == os.path.realpath(source_path)
    if not plan.changes and in_place:
        return False  # already fixed: leave the file byte-identical
    destination.parent.mkdir(parents=True, exist_ok=True)
    with ElfFile.open(source_path) as elf:
        try:
            write_atomically(source_path, destination, lambda: plan_edits(elf, plan),
                             lambda temporary: verify_output(elf, temporary, plan))
        except OSError as error:
            raise InputError(str(destination), f"cannot write: {error.strerror or error}") from None
    return True

