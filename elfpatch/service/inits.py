"""Running ``inits``: opening each object, or a whole dependency closure, and analysing it.

The analysis of one object is ``analysis.init_order``; this module finds
the objects (the paths given, or every object the loader brings in for a
program), opens them, runs the two halves of a big object's work in two
processes, and joins the objects' risks across the closure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from elfpatch.analysis.init_order import (
    ClosureEntry,
    ClosurePhase,
    InitsResult,
    ObjectAnalysis,
    ObjectReport,
    analyse_object_fully,
    exported_definitions,
)
from elfpatch.analysis.registries import (
    KeyedUse,
    keyed_uses,
    registration_risks,
    with_keyed,
)
from elfpatch.analysis.risks import (
    ObjectInitialisation,
    cross_object_destruction_risks,
    cross_object_risks,
)
from elfpatch.elf.arrays import InitializerKind
from elfpatch.elf.file import ElfFile
from elfpatch.elf.source import ElfSource
from elfpatch.errors import ElfpatchError
from elfpatch.loader.closure import dependency_closure
from elfpatch.loader.host import HostProfile
from elfpatch.service.failures import failures_judged
from elfpatch.service.parallel import cycles_uncollected, run_alongside
from elfpatch.service.registries import dependencies, lookup_order_of, roles
from elfpatch.service.runner import Progress, run_per_file


def analyse_paths(paths: Iterable[str], follow_code: bool = True,
                  progress: Progress | None = None) -> InitsResult:
    def analyse(source: ElfSource, elf: ElfFile) -> ObjectReport:
        with cycles_uncollected():
            analysis = analyse_object_fully(elf, source.path, source.member,
                                            follow_code=follow_code, alongside=run_alongside)
            return _with_registrations(analysis, source)

    outcome = run_per_file(paths, analyse, progress)
    return InitsResult(tuple(outcome.results), None, (), tuple(outcome.errors))


def _with_registrations(analysis: ObjectAnalysis, source: ElfSource) -> ObjectReport:
    """One object's report with its look-ups that run before (or only by link order
    after) its own registrations of their key.  Registry functions of another
    object are read in the object's dependencies, found as the loader would
    for a file on disk (a wheel's member: only its own functions are read)."""
    report = analysis.report
    uses = keyed_uses(report.path, 0, analysis.analysed)
    if not uses:
        return report
    if source.member is not None:
        lookup, indexed = [report.path], {}
    else:  # a file on disk, open still: its own functions are read through its index
        lookup = lookup_order_of(report.path)
        indexed = {report.path: analysis.index} if analysis.index is not None else {}
    found = registration_risks(uses, roles(uses, lookup, indexed), lambda _a, _b: False)
    keyed = found.get(report.path, [])
    return dataclasses.replace(report, risks=with_keyed(report.risks, keyed)) if keyed \
        else report


def analyse_closure(root: str, sort_algorithm: int, follow_code: bool = True,
                    host: HostProfile | None = None,
                    progress: Progress | None = None) -> InitsResult:
    """Every object the loader brings in for ``root`` on ``host`` (default: this machine),
    in the order their initializers run."""
    closure = dependency_closure(Path(root), sort_algorithm=sort_algorithm, host=host)
    reports: list[ObjectReport] = []
    states: list[ObjectInitialisation] = []
    uses: list[KeyedUse] = []
    errors: list[ElfpatchError] = []
    for position, loaded in enumerate(closure.objects):
        if progress is not None:
            progress(f"{position + 1}/{len(closure.objects)} {loaded.path}")
        try:
            with ElfFile.open(loaded.path) as elf, cycles_uncollected(), \
                    failures_judged(str(loaded.path), elf):
                analysis = analyse_object_fully(elf, str(loaded.path), follow_code=follow_code,
                                                in_closure=True, alongside=run_alongside)
                states.append(ObjectInitialisation(str(loaded.path), position,
                                                   tuple(analysis.analysed),
                                                   exported_definitions(elf),
                                                   analysis.exit_code))
                uses += keyed_uses(str(loaded.path), position, analysis.analysed)
        except ElfpatchError as error:
            errors.append(error)
            continue
        reports.append(analysis.report)
    lookup = [str(o.path) for o in closure.load_order]
    extra = cross_object_risks(states, lookup)
    for label, risks in cross_object_destruction_risks(states, lookup).items():
        extra.setdefault(label, []).extend(risks)
    needs = dependencies(closure)
    keyed = registration_risks(
        uses, roles(uses, lookup), lambda user, registrar: registrar in needs.get(user, ()))
    reports = [dataclasses.replace(r, risks=with_keyed(r.risks + tuple(extra.get(r.path, ())),
                                                       keyed.get(r.path, [])))
               for r in reports]
    entries = [ClosureEntry(str(o.path), o.soname) for o in closure.objects]
    program = next((r for r in reports if r.path == str(closure.root.path)), None)
    if program is not None and any(e.kind == InitializerKind.PREINIT_ARRAY
                               for e in program.initializers):
        entries.insert(0, ClosureEntry(program.path, program.soname,
                                       ClosurePhase.PREINIT_ARRAY))
    missing = [(m.name, str(m.requested_by)) for m in closure.missing]
    return InitsResult(tuple(reports), tuple(entries), tuple(missing), tuple(errors))
