"""``inits``: initializers in run order, what they do, and their risks, per object and closure."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from elfpatch.analysis.effects import Effects, EffectsAnalyzer
from elfpatch.analysis.initializers import InitializerEntry, ObjectInits, list_initializers
from elfpatch.analysis.risks import (
    AnalysedInitializer,
    ObjectInitialisation,
    Risk,
    cross_object_risks,
    destructor_risks,
    order_risks,
)
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym
from elfpatch.errors import ElfpatchError
from elfpatch.parallel import run_alongside
from elfpatch.runner import run_per_file


@dataclass(frozen=True)
class ObjectReport:
    path: str
    member: str | None
    machine: str
    elf_type: str
    soname: str | None
    initializers: tuple[InitializerEntry, ...]
    finalizers: tuple[InitializerEntry, ...]
    risks: tuple[Risk, ...]
    effects_complete: bool  # False when some machine code could not be followed


@dataclass(frozen=True)
class ClosureEntry:
    path: str
    soname: str | None


@dataclass
class InitsResult:
    objects: list[ObjectReport]
    closure: list[ClosureEntry] | None
    missing: list[tuple[str, str]]  # (needed name, requested by) not found
    errors: list[ElfpatchError]


def analyse_object(elf: ElfFile, path: str, member: str | None = None,
                   listing: ObjectInits | None = None,
                   ) -> tuple[ObjectReport, list[AnalysedInitializer]]:
    """``listing``: the object's initializers, when the caller has listed them already."""
    listing = listing or list_initializers(elf, path, member)
    entries = listing.followed
    analysed = [AnalysedInitializer(entry, effects)
                for entry, effects in zip(entries, _effects_of(elf, entries), strict=True)]
    registering = {item.entry for item in analysed if item.effects.atexit}
    initializers = tuple(dataclasses.replace(e, registers_destructor=True) if e in registering
                         else e for e in listing.initializers)
    risks = order_risks(analysed) + destructor_risks(analysed)
    report = ObjectReport(path, member, listing.machine, listing.elf_type,
                          elf.soname if elf.dynamic else None, initializers, listing.finalizers,
                          tuple(risks), all(item.effects.complete for item in analysed))
    return report, analysed


# Below this many initializers a second process costs more than it saves.
_PARALLEL_MINIMUM = 64


def _effects_of(elf: ElfFile, entries: list[InitializerEntry]) -> list[Effects]:
    """Each entry's effects; a big object's are shared out between two processes.

    The entries alternate between the halves, so that the big initializers
    of a library (often in neighbouring slots) do not all land on one side.
    """
    analyzer = EffectsAnalyzer(elf)

    def effects_of(part: list[InitializerEntry]) -> Callable[[], list[Effects]]:
        return lambda: [analyzer.effects(e.address) for e in part if e.address is not None]

    if len(entries) < _PARALLEL_MINIMUM:
        return effects_of(entries)()
    analyzer.index.prepare()  # once, before the fork: both halves use it
    even, odd = run_alongside(effects_of(entries[0::2]), effects_of(entries[1::2]))
    return [effects for pair in zip_longest(even, odd) for effects in pair if effects is not None]


def analyse_paths(paths: Iterable[str]) -> InitsResult:
    outcome = run_per_file(paths, lambda source, elf: analyse_object(elf, source.path,
                                                                      source.member)[0])
    return InitsResult(outcome.results, None, [], outcome.errors)


def analyse_closure(root: str, sort_algorithm: int) -> InitsResult:
    """Every object the loader brings in for ``root``, in the order their initializers run."""
    from elfpatch.analysis.closure import dependency_closure

    closure = dependency_closure(Path(root), sort_algorithm=sort_algorithm)
    reports: list[ObjectReport] = []
    states: list[ObjectInitialisation] = []
    errors: list[ElfpatchError] = []
    for position, loaded in enumerate(closure.objects):
        try:
            with ElfFile.open(loaded.path) as elf:
                report, analysed = analyse_object(elf, str(loaded.path))
                states.append(ObjectInitialisation(str(loaded.path), position, tuple(analysed),
                                                   _exported_definitions(elf)))
        except ElfpatchError as error:
            errors.append(error)
            continue
        reports.append(report)
    lookup = [str(o.path) for o in closure.load_order]
    extra = cross_object_risks(states, lookup)
    reports = [dataclasses.replace(r, risks=r.risks + tuple(extra.get(r.path, ())))
               for r in reports]
    entries = [ClosureEntry(str(o.path), o.soname) for o in closure.objects]
    missing = [(m.name, str(m.requested_by)) for m in closure.missing]
    return InitsResult(reports, entries, missing, errors)


def _exported_definitions(elf: ElfFile) -> frozenset[str]:
    table = read_dynsym(elf)
    if table is None:
        return frozenset()
    return frozenset(table.name(i) for i in range(1, table.count)
                     if table.shndxs[i] != C.SHN_UNDEF and table.infos[i] >> 4 != C.STB_LOCAL)
