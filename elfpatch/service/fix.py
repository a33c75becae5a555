"""``fix``: plan the rewrite of a set of libraries, then write each one safely.

Read (every input), analyse (as one set), plan (per symbol), write (every
file to a staged temporary copy, verified), then rename them all.  Nothing
is written when reading, planning, writing or verifying any file of the set
fails, when ``--strict`` refuses, or with ``--dry-run``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elfpatch.analysis.crosslib import LibrarySymbols, dynamic_symbols, shared_uses
from elfpatch.base.regular_file import HeldFile, cannot_open, hold_files
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.source import ElfSource
from elfpatch.elf.symbols import DYNSYM, read_dynsym, symbol_tables
from elfpatch.errors import (
    PARSE_FAILURES,
    ElfpatchError,
    InputError,
    UnsupportedElfError,
    malformed,
)
from elfpatch.patch.rewrite import plan_edits
from elfpatch.patch.staging import (
    ScratchFile,
    Staging,
    destination_problem,
    ensure_descriptors,
    existing_folder,
    user_path,
)
from elfpatch.patch.verify import verify_output
from elfpatch.patch.write import write_patched
from elfpatch.plan.bindings import (
    PLAIN_OPERATOR_NEW,
    Candidate,
    FixOptions,
    FixPlan,
    HideRule,
    LibraryPlan,
    hide_rules,
    plan_library,
)
from elfpatch.service.inputs import Aliases, existing_identities, split_sources
from elfpatch.service.parallel import run_alongside


@dataclass(frozen=True)
class LibraryOutcome:
    plan: LibraryPlan
    source: str
    destination: str | None  # None with --dry-run
    written: bool  # False when nothing changed in place, with --dry-run, or when interrupted
    hard_links_left: int = 0  # other names of a file replaced in place: they keep the original


@dataclass(frozen=True)
class FixResult:
    """What ``fix`` planned, wrote and could not do; made once, at the end."""

    plan: FixPlan | None = None
    outcomes: tuple[LibraryOutcome, ...] = ()
    errors: tuple[ElfpatchError, ...] = ()
    interrupted: bool = False  # Ctrl-C (or SIGTERM): ``outcomes`` say what was written

    @property
    def refused(self) -> bool:
        return bool(self.plan and self.plan.refusals)


@dataclass(frozen=True)
class FixInput:
    """One ELF file of a set: what reports call it, and where its bytes are read."""

    label: str  # a path, or wheel:member
    path: Path  # the file itself, or a scratch copy (``/proc/self/fd/N``)


@dataclass(frozen=True)
class _Library:
    item: FixInput
    candidates: tuple[Candidate, ...]
    symbols: LibrarySymbols


@dataclass
class SetPlan:
    """A set of libraries read and planned as one; nothing written yet."""

    libraries: list[_Library] = field(default_factory=list)
    plan: FixPlan | None = None
    errors: list[ElfpatchError] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return bool(self.plan and self.plan.refusals)

    def pairs(self) -> list[tuple[FixInput, LibraryPlan]]:
        assert self.plan is not None
        return [(lib.item, plan) for lib, plan in
                zip(self.libraries, self.plan.libraries, strict=True)]


def _open(item: FixInput) -> ElfFile:
    """The input mapped, every error naming its label rather than a scratch path."""
    try:
        elf = ElfFile.open(item.path)
    except ElfpatchError as error:
        raise error.relabelled(item.label) from None
    elf.name = item.label
    return elf


def _read_library(item: FixInput, with_symbols: bool,
                  hide: tuple[HideRule, ...] = ()) -> _Library:
    with _open(item) as elf:
        if elf.header.type not in (C.ET_DYN, C.ET_EXEC):
            raise UnsupportedElfError(item.label, f"cannot fix an ELF of type "
                                      f"{elf.header.type_name}; only executables and shared "
                                      "libraries", hint="rebuild objects with -fno-gnu-unique")
        candidates = tuple(Candidate(table.kind, index, table.name(index), table.defined(index))
                           for table in symbol_tables(elf) for index in table.unique_indices())
        if hide:
            candidates += hidden_exports(elf, hide)
        # Alone, a library has nobody to share with: skip reading every dynamic name.
        symbols = dynamic_symbols(elf, item.label) if with_symbols else \
            LibrarySymbols(item.label)
        return _Library(item, candidates, symbols)


def hidden_exports(elf: ElfFile, rules: Sequence[HideRule]) -> tuple[Candidate, ...]:
    """The exported, non-UNIQUE definitions of .dynsym some --hide rule matches."""
    table = read_dynsym(elf)
    if table is None:
        return ()
    bindings = table.bindings
    runtime = (elf.soname or "").startswith(("libstdc++.", "libc++."))
    names = {index: table.name(index) for index in table.exported_indices()}
    replaces_allocator = not PLAIN_OPERATOR_NEW.isdisjoint(names.values())
    found = []
    for index, name in names.items():
        binding = bindings[index]
        if binding == C.STB_GNU_UNIQUE:
            continue  # the UNIQUE rewrite decides these
        if any(rule.matches(name, runtime, replaces_allocator) for rule in rules):
            found.append(Candidate(DYNSYM, index, name, True, hidden=True,
                                   binding=C.BINDING_NAMES[binding]))
    return tuple(found)


def cxx_runtime_levels() -> dict[str, tuple[int, ...]]:
    """The exports of this machine's libstdc++.so.6 and the GLIBCXX level of each default
    version; empty when there is none (then only versioned references are trusted)."""
    from elfpatch.analysis.crosslib import version_level
    from elfpatch.elf.versions import read_versions
    from elfpatch.loader.dlopen import find_system_library

    path = find_system_library("libstdc++.so.6")
    if path is None:
        return {}
    try:
        with ElfFile.open(path) as elf:
            table = read_dynsym(elf)
            if table is None:
                return {}
            versions = read_versions(elf, table.count)
            levels = {}
            for index in table.exported_indices():
                version, hidden = versions.version_of(index)
                if version is not None and not hidden:
                    levels[table.name(index)] = version_level(version)
            return levels
    except ElfpatchError:
        return {}


def plan_inputs(inputs: Sequence[FixInput], options: FixOptions) -> SetPlan:
    """Read every input and plan the set; errors leave the plan empty."""
    result = SetPlan()
    hide = hide_rules(options)
    for item in inputs:
        try:
            result.libraries.append(_read_library(item, len(inputs) > 1, hide))
        except ElfpatchError as error:
            result.errors.append(error)
        except PARSE_FAILURES as error:
            result.errors.append(malformed(item.label, error))
    if not result.errors:
        result.plan = make_plan(result.libraries, options)
    return result


def make_plan(libraries: list[_Library], options: FixOptions) -> FixPlan:
    hidden = {lib.item.label: {c.name for c in lib.candidates if c.hidden} for lib in libraries}
    runtime = cxx_runtime_levels() if any(hidden.values()) else None
    uses = shared_uses([lib.symbols for lib in libraries], hidden, runtime)  # name -> use
    plans, refusals = [], []
    for lib in libraries:
        label = lib.item.label
        plan, refused = plan_library(label, lib.candidates, uses.get(label, {}), options)
        plans.append(plan)
        refusals.extend(refused)
    return FixPlan(options.mode, tuple(plans), tuple(refusals))


def write_patched_input(item: FixInput, plan: LibraryPlan, target: ScratchFile) -> None:
    """The input with its plan applied, written into ``target`` and verified there."""
    with _open(item) as elf:
        try:
            write_patched(item.path, target, lambda: plan_edits(elf, plan),
                          lambda written: verify_output(elf, written, plan, run_alongside))
        except OSError as error:
            raise InputError(item.label, f"cannot write the fixed copy: "
                             f"{error.strerror or error}") from None
        except PARSE_FAILURES as error:
            raise malformed(item.label, error) from None


# -- files on disk -------------------------------------------------------------

def _sources(paths: Iterable[str],
             aliases: Aliases) -> tuple[list[ElfSource], list[ElfpatchError]]:
    """The files to fix; a wheel's members are not files (wheels are repaired with -w)."""
    found, errors = split_sources(paths, aliases)
    errors += [InputError(s.label, "a wheel is repaired as a whole",
                          hint="elfpatch fix WHEEL -w OUTDIR") for s in found if s.member]
    return [s for s in found if s.member is None], errors


def destinations(sources: list[ElfSource], output: str | None) -> dict[str, Path]:
    """Where each library is written: in place, or under/at ``output``.

    ``output`` names a folder when it ends in a slash, is a folder already,
    or several inputs (or a folder input) are given; otherwise it is the
    new file's name.
    """
    if output is None:
        return {source.path: Path(source.path) for source in sources}
    out = Path(output)
    single = len(sources) == 1 and sources[0].root is None
    if single and not output.endswith("/") and not out.is_dir():
        return {sources[0].path: out}
    if out.exists() and not out.is_dir():
        raise InputError(output, f"is a file, but {len(sources)} inputs need an output folder",
                         hint="name a folder (a new one is created)")
    return {source.path: out / _relative_destination(source) for source in sources}


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
                       f"{', '.join(labels[:3])}{' ...' if len(labels) > 3 else ''}",
                       hint="give their folder (its layout is mirrored) or fix them one at a time")
            for destination, labels in by_destination.items() if len(labels) > 1]


def _unwritable(where: dict[str, Path]) -> list[ElfpatchError]:
    """Destinations that cannot be created: a file standing where a folder must be."""
    errors: list[ElfpatchError] = []
    for destination in where.values():
        folder = existing_folder(destination.parent)
        if not folder.is_dir():
            errors.append(InputError(str(destination), f"cannot write: {folder} is not a folder"))
        elif destination.is_dir():
            errors.append(InputError(str(destination), "cannot write: is a folder"))
    return errors


def _unsafe_outputs(where: dict[str, Path], sources: list[ElfSource]) -> list[ElfpatchError]:
    """Outputs that are inputs, devices, pipes, folders or links to nothing (``-o``)."""
    inputs = existing_identities(source.path for source in sources)
    errors: list[ElfpatchError] = []
    for destination in where.values():
        problem = destination_problem(destination, inputs)
        if problem is not None:
            hint = "--in-place replaces the inputs" if "inputs" in problem else None
            errors.append(InputError(str(destination), f"cannot write: {problem}", hint=hint))
    return errors


def fix_paths(paths: Iterable[str], options: FixOptions, output: str | None,
              dry_run: bool = False) -> FixResult:
    """Fix every ELF file under ``paths`` as one set: all are written, or none."""
    aliases: Aliases = {}
    sources, errors = _sources(paths, aliases)
    if errors:
        return FixResult(errors=tuple(errors))  # never write part of an unreadable set
    try:
        where = destinations(sources, output)
    except ElfpatchError as error:
        return FixResult(errors=(error,))
    errors = _collisions(where) + _unwritable(where)
    if output is not None and not dry_run and not errors:
        errors = _unsafe_outputs(where, sources)
    if errors:
        return FixResult(errors=tuple(errors))
    try:
        held = _hold(sources, exclusive=output is None and not dry_run)
    except ElfpatchError as error:
        return FixResult(errors=(error,))
    try:
        inputs = [FixInput(s.path, h.path) for s, h in zip(sources, held, strict=True)]
        planned = plan_inputs(inputs, options)
        if planned.errors or planned.refused:
            return FixResult(planned.plan, errors=tuple(planned.errors))
        if dry_run:
            return FixResult(planned.plan, tuple(LibraryOutcome(plan, item.label, None, False)
                                                 for item, plan in planned.pairs()))
        return _write_set(planned, where, {h.name: h for h in held},
                          _other_names(aliases) if output is None else {})
    finally:
        for item in held:
            item.close()


def _hold(sources: list[ElfSource], exclusive: bool) -> list[HeldFile]:
    """Every input opened once (and locked when it is to be replaced) for the whole run."""
    ensure_descriptors(2 * len(sources), Path(sources[0].path).parent if sources else Path())
    try:
        return hold_files([source.path for source in sources], exclusive)
    except OSError as error:
        raise cannot_open(str(error.filename or sources[0].path), error) from None


def _other_names(aliases: Aliases) -> dict[str, list[Path]]:
    """The other hard links given for each input (symbolic links lead to the same real file)."""
    names: dict[str, list[Path]] = {}
    for first, others in aliases.items():
        real = os.path.realpath(first)
        links = {os.path.realpath(other) for other in others} - {real}
        if links:
            names[first] = [Path(link) for link in sorted(links)]
    return names


def _write_set(planned: SetPlan, where: dict[str, Path], held: dict[str, HeldFile],
               other_names: dict[str, list[Path]]) -> FixResult:
    """Stage and verify every file, then rename them all; on any error, none.

    Right before the renames every input is checked to be the file, and the
    bytes, the plan was made from.
    """
    staged: dict[str, Path] = {}
    links_left: dict[str, int] = {}
    errors: list[ElfpatchError] = []
    interrupted = False
    destination = Path("output")
    with Staging() as staging:
        try:
            for item, plan in planned.pairs():
                destination = Path(os.path.realpath(where[item.label]))
                if _needs_writing(item, plan, destination):
                    also = other_names.get(item.label, [])
                    links_left[item.label] = _links(destination) - 1 - len(also)
                    target = staging.output(destination, also=also)
                    write_patched_input(item, plan, target)
                    staged[item.label] = destination
            errors += _changed_inputs(held.values())
            if not errors:
                staging.commit()
        except ElfpatchError as error:
            errors.append(error)
        except OSError as error:  # the user's path, never a temporary file's
            errors.append(InputError(user_path(error, destination),
                                     f"cannot write: {error.strerror or error}"))
        except KeyboardInterrupt:
            interrupted = True
        written = set(staging.committed)
    if errors and not written:
        return FixResult(planned.plan, errors=tuple(errors))
    outcomes = tuple(LibraryOutcome(plan, item.label, str(where[item.label]),
                                    staged.get(item.label) in written,
                                    max(0, links_left.get(item.label, 0)))
                     for item, plan in planned.pairs())
    return FixResult(planned.plan, outcomes, tuple(errors), interrupted)


def _links(destination: Path) -> int:
    """How many names the file at ``destination`` has (0 for a new file)."""
    try:
        return destination.stat().st_nlink
    except FileNotFoundError:
        return 0


def _changed_inputs(held: Iterable[HeldFile]) -> list[ElfpatchError]:
    return [InputError(item.name, "changed while elfpatch was fixing it (another program wrote "
                       "or replaced it); nothing was written", hint="run again")
            for item in held if not item.unchanged()]


def _needs_writing(item: FixInput, plan: LibraryPlan, destination: Path) -> bool:
    """A file fixed in place with nothing to change is only verified, never rewritten."""
    if plan.changes or destination != Path(os.path.realpath(item.label)):
        return True
    with _open(item) as elf:
        verify_output(elf, item.path, plan, run_alongside)
    return False


# -- what an interrupted run wrote, read off the files ----------------------------

def run_clock() -> int:
    """Now, to compare with the change times of the files a run writes.

    The kernel stamps changes with a clock up to a tick behind this one; no
    output is renamed in place within a tick of a run's start.
    """
    import time

    return time.time_ns()


def written_since(destinations: Iterable[str | Path], since: int) -> list[tuple[str, bool]]:
    """Each destination, and whether the file there changed since ``since`` (``run_clock``).

    Every output is put in place by a rename, which gives the path a file
    whose status changed during the run: this tells, from the files alone,
    what a run that was interrupted at any instant wrote.
    """
    found = []
    for destination in destinations:
        try:
            changed = Path(os.path.realpath(destination)).stat().st_ctime_ns >= since
        except OSError:
            changed = False
        found.append((str(destination), changed))
    return found


def planned_destinations(paths: Iterable[str], output: str | None) -> list[Path]:
    """Where ``fix_paths`` writes the files of ``paths`` (nothing when they cannot be read)."""
    sources, errors = _sources(paths, {})
    if errors:
        return []
    try:
        return list(destinations(sources, output).values())
    except ElfpatchError:
        return []
