"""Human-readable rendering of ``inits`` results.

Errors are listed one by one.  Exit-time destructors are many in a real
library (thousands in libtorch_cpu.so): without ``-v`` they are grouped by
translation unit (a count and the first few objects), the ones read at exit
named first; ``-v`` and the JSON list every one.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from elfpatch.analysis.init_order import PHASE_PREINIT, Coverage, InitsResult, ObjectReport
from elfpatch.analysis.initializers import InitializerEntry, InitializerPart
from elfpatch.analysis.risks import KIND_EXIT_DESTRUCTOR, SEVERITY_ERROR, Risk
from elfpatch.demangle import demangle
from elfpatch.report.style import Styler, plural

# Without -v: this many other warnings, units of exit-time destructors, objects per unit.
_WARNINGS_SHOWN = 5
_UNITS_SHOWN = 10
_OBJECTS_SHOWN = 3


def render_inits(result: InitsResult, style: Styler, verbose: bool = False) -> str:
    blocks = []
    if result.closure is not None:
        blocks.append(_render_closure(result, style))
    blocks.extend(_render_object(report, style, verbose) for report in result.objects)
    blocks.append(_summary(result, style))
    return "\n\n".join(blocks) + "\n"


def _render_closure(result: InitsResult, style: Styler) -> str:
    assert result.closure is not None
    lines = [style("initializers run in this order across objects (dependencies first):",
                   "head")]
    lines += [f"  {n:3d}. {entry.path}" + (f"  ({entry.soname})" if entry.soname else "")
              + ("  [its .preinit_array: a program's runs before every library]"
                 if entry.phase == PHASE_PREINIT else "")
              for n, entry in enumerate(result.closure, 1)]
    lines += [style(f"  not found: {name} (needed by {by})", "warn")
              for name, by in result.missing]
    return "\n".join(lines)


def _unnamed(entry: InitializerEntry) -> str:
    """What can be said of a function no symbol names (a stripped file)."""
    if entry.address == 0:
        return "(a null slot: the loader calls address 0 and the process crashes)"
    if entry.nearest:
        return f"(no symbol names it; {demangle_nearest(entry.nearest)})"
    return "(stripped: no symbol names it)"


def demangle_nearest(nearest: str) -> str:
    name, plus, offset = nearest.partition("+")
    from elfpatch.demangle import demangle

    return f"after {demangle(name)}{plus}{offset}" if plus else f"at {demangle(name)}"


def _entry_line(number: int, entry: InitializerEntry) -> str:
    name = entry.demangled or entry.symbol or _unnamed(entry)
    where = f"{entry.address:#x}" if entry.address is not None else "unresolved"
    details = []
    if entry.priority is not None:
        details.append(f"init_priority {entry.priority}")
    if entry.translation_unit:
        details.append(f"TU {entry.translation_unit}")
    if entry.parts:
        details.append(f"link-time optimised: {plural(len(entry.parts), 'part')}")
    if entry.registers_destructor:
        details.append("registers an exit-time destructor")
    if entry.is_runtime:
        details.append("C runtime")
    suffix = f"  [{'; '.join(details)}]" if details else ""
    return f"  {number:4d}. {entry.kind:13s} {where:>12s}  {name}{suffix}"


def _part_line(part: InitializerPart) -> str:
    where = f"{part.address:#x}" if part.address is not None else "inlined"
    name = part.demangled or part.symbol or "code of several TUs inlined here"
    unit = f"  [TU {part.translation_unit}]" if part.translation_unit else ""
    return f"{'':9s}part {part.position:<3d} {where:>12s}  {name}{unit}"


def _render_object(report: ObjectReport, style: Styler, verbose: bool) -> str:
    where = f"{report.path}:{report.member}" if report.member else report.path
    lines = [style(f"{where}  ({report.machine}, {report.elf_type})", "head")]
    lines.append(f"  {plural(len(report.initializers), 'initializer')}, in run order:")
    for n, entry in enumerate(report.initializers, 1):
        lines.append(_entry_line(n, entry))
        lines += [_part_line(part) for part in entry.parts]
    if verbose:
        lines.append(f"  {plural(len(report.finalizers), 'finalizer')}, in run order:")
        lines += [_entry_line(n, e) for n, e in enumerate(report.finalizers, 1)]
    if report.coverage is None:
        lines.append(style("  machine code not read: no risks looked for", "dim"))
        return "\n".join(lines)
    lines += _render_risks(report.risks, style, verbose)
    lines.append(_coverage_line(report.coverage, style))
    return "\n".join(lines)


def _render_risks(risks: tuple[Risk, ...], style: Styler, verbose: bool) -> list[str]:
    if not risks:
        return ["  " + style("no initialization-order risks found", "good")]
    errors = [r for r in risks if r.severity == SEVERITY_ERROR]
    destructors = [r for r in risks if r.kind == KIND_EXIT_DESTRUCTOR]
    others = [r for r in risks if r.severity != SEVERITY_ERROR and r not in destructors]
    warnings = len(risks) - len(errors)
    lines = [f"  risks: {plural(len(errors), 'error')}, {plural(warnings, 'warning')}"]
    shown = errors + (others if verbose else others[:_WARNINGS_SHOWN])
    if verbose:
        shown += destructors
    lines += [_risk_line(risk, style) for risk in shown]
    if len(shown) < len(errors) + len(others):
        hidden = len(errors) + len(others) - len(shown)
        lines.append(style(f"    … and {hidden} more warnings (-v lists all)", "dim"))
    if destructors and not verbose:
        lines += _grouped_destructors(destructors, style)
    return lines


def _risk_line(risk: Risk, style: Styler) -> str:
    role = "bad" if risk.severity == SEVERITY_ERROR else "warn"
    return "    " + style(f"{risk.severity}: {risk.kind}", role) + f": {risk.message}"


def _unit_of(risk: Risk) -> str:
    """The TU an exit-time-destructor warning is about (its message starts with it)."""
    unit, found, _rest = risk.message.partition(" registers ")
    return unit if found else risk.reader


def _grouped_destructors(destructors: list[Risk], style: Styler) -> list[str]:
    by_unit: dict[str, list[str]] = defaultdict(list)
    for risk in destructors:
        by_unit[_unit_of(risk)].append(demangle(risk.object))
    read = sorted({demangle(r.object) for r in destructors if r.read_at_exit})
    header = (f"    {style('warning: exit-time-destructor', 'warn')}: "
              f"{plural(len(destructors), 'object')} destroyed at exit, in "
              f"{plural(len(by_unit), 'translation unit')}")
    lines = [header + ("; never destroying them avoids use after destruction" if not read
                       else "")]
    if read:
        lines.append(f"      read at exit (by a destructor, an atexit function or a thread), "
                     f"where destroying them matters: {_first(read, len(read))}")
    counts = Counter({unit: len(objects) for unit, objects in by_unit.items()})
    for unit, count in counts.most_common(_UNITS_SHOWN):
        lines.append(f"      {unit}: {count} ({_first(by_unit[unit], _OBJECTS_SHOWN)})")
    if len(counts) > _UNITS_SHOWN:
        lines.append(style(f"      … and {len(counts) - _UNITS_SHOWN} more translation units "
                           "(-v or --json lists every destructor)", "dim"))
    return lines


def _first(names: list[str], count: int) -> str:
    shown = ", ".join(names[:count])
    return shown + (", …" if len(names) > count else "")


def _coverage_line(coverage: Coverage, style: Styler) -> str:
    text = (f"  code followed to the end: {coverage.initializers_complete} of "
            f"{plural(coverage.initializers, 'initializer')}, {coverage.destructors_complete} "
            f"of {plural(coverage.destructors, 'destructor')}")
    if coverage.stopped:
        reasons = ", ".join(f"{reason} ({count})" for reason, count in coverage.stopped)
        text += f"; stopped at: {reasons}; risks may be missing"
    complete = coverage.initializers_complete == coverage.initializers \
        and coverage.destructors_complete == coverage.destructors
    return style(text, "dim" if complete else "warn")


def _summary(result: InitsResult, style: Styler) -> str:
    count = sum(len(r.initializers) for r in result.objects)
    errors = sum(1 for r in result.objects for k in r.risks if k.severity == SEVERITY_ERROR)
    text = (f"{plural(len(result.objects), 'object')}: {plural(count, 'initializer')}, "
            f"{plural(errors, 'error')}")
    if result.errors:
        text += "; " + style(plural(len(result.errors), "input") + " could not be read", "bad")
    return text
