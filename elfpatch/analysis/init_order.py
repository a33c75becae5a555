"""``inits``: initializers in run order, what they do, and their risks, per object and closure."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from elfpatch.analysis.effects import EffectsAnalyzer
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
    analyzer = EffectsAnalyzer(elf)
    analysed = [AnalysedInitializer(entry, analyzer.effects(entry.address))
                for entry in listing.initializers
                if entry.address is not None and not entry.is_runtime]
    registering = {item.entry for item in analysed if item.effects.atexit}
    initializers = tuple(dataclasses.replace(e, registers_destructor=True) if e in registering
                         else e for e in listing.initializers)
    risks = order_risks(analysed) + destructor_risks(analysed)
    report = ObjectReport(path, member, listing.machine, listing.elf_type,
                          elf.soname if elf.dynamic else None, initializers, listing.finalizers,
                          tuple(risks), all(item.effects.complete for item in analysed))
    return report, analysed


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
