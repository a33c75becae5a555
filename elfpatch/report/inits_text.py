"""Human-readable rendering of ``inits`` results.

Errors come first, then the warnings one can act on (an order that holds only
by the link order).  Findings that differ only in where the code comes from
(one object, one constructor, the same function touching it, reached from
many initializers: ZDoom's console commands each register through one
function) are one entry without ``-v``, the other places counted and the
first few named: ViZDoom's 677 errors are 6 such entries.  Exit-time
destructors are many in a real library (thousands in libtorch_cpu.so, most
of them ``<iostream>``'s init object): without ``-v`` they are one census
line, the objects read at exit named (where destroying them matters); ``-v``
groups them by translation unit and lists every one, as the JSON does.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from elfpatch.analysis.init_order import ClosurePhase, Coverage, InitsResult, ObjectReport
from elfpatch.analysis.initializers import InitializerEntry, InitializerPart
from elfpatch.analysis.risks import Risk, RiskKind, Severity
from elfpatch.cxx.demangle import demangle, demangle_label
from elfpatch.elf.constants import ELF_TYPE_NAMES, ET_REL
from elfpatch.report.style import Styler, failed_inputs, plural

# Without -v: this many other warnings (entries of them), units of exit-time destructors,
# objects per unit, other places a repeated finding comes from.
_WARNINGS_SHOWN = 5
_UNITS_SHOWN = 10
_OBJECTS_SHOWN = 3
_PLACES_SHOWN = 4
_QUIET_SHOWN = 3  # flags read as zero at load, named on the coverage line


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
                 if entry.phase == ClosurePhase.PREINIT_ARRAY else "")
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
    if report.elf_type == ELF_TYPE_NAMES[ET_REL]:
        lines.append(style("  a relocatable object (.o): never run as it is; its initializers "
                           "run in the order of what it is linked into", "dim"))
        return "\n".join(lines)
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
    errors = [r for r in risks if r.severity is Severity.ERROR]
    destructors = [r for r in risks if r.kind is RiskKind.EXIT_DESTRUCTOR]
    # By kind, not by ``in destructors``: comparing risks one by one is quadratic, and a
    # big library has thousands of exit-time destructors.
    others = [r for r in risks if r.severity is not Severity.ERROR
              and r.kind is not RiskKind.EXIT_DESTRUCTOR]
    head = f"  risks: {plural(len(errors), 'error')}, {plural(len(others), 'warning')}"
    if destructors:
        head += f"; {plural(len(destructors), 'object')} destroyed at exit"
    lines = [head]
    if verbose:
        lines += [_risk_line(risk, style) for risk in errors + others]
    else:
        warnings = _repeated(others)
        lines += [_entry(group, style) for group in _repeated(errors) + warnings[:_WARNINGS_SHOWN]]
        hidden = sum(map(len, warnings[_WARNINGS_SHOWN:]))
        if hidden:
            lines.append(style(f"    … and {hidden} more warnings (-v lists all)", "dim"))
    if destructors:
        lines.append(_destructor_census(destructors, style, verbose))
    if destructors and verbose:
        lines += _grouped_destructors(destructors, style)
        lines += [_risk_line(risk, style) for risk in destructors]
    return lines


def _risk_line(risk: Risk, style: Styler) -> str:
    role = "bad" if risk.severity is Severity.ERROR else "warn"
    line = "    " + style(f"{risk.severity}: {risk.kind}", role) + f": {risk.message}"
    if risk.via:
        line += "\n" + style("      via " + " → ".join(risk.via), "dim")
    return line


def _repeated(risks: list[Risk]) -> list[list[Risk]]:
    """``risks`` in entries of those that differ only in where the code comes from: one
    object, one constructor (or destructor), the same function touching it; in the
    order of each entry's first."""
    entries: dict[tuple[object, ...], list[Risk]] = {}
    for risk in risks:
        key = (risk.severity, risk.kind, risk.object, risk.object_address,
               risk.constructed_by, risk.constructed_by_address, risk.key,
               risk.via[-1] if risk.via else None)
        entries.setdefault(key, []).append(risk)
    return list(entries.values())


def _entry(risks: list[Risk], style: Styler) -> str:
    """The first of a repeated finding in full; the others counted, the first few named."""
    line = _risk_line(risks[0], style)
    if len(risks) > 1:
        places = _first(list(dict.fromkeys(risk.reader for risk in risks[1:])), _PLACES_SHOWN)
        line += "\n" + style(f"      and {len(risks) - 1} more of this finding, reached from "
                             f"other code: {places} (-v lists each)", "dim")
    return line


def _unit_of(risk: Risk) -> str:
    """The TU an exit-time-destructor warning is about (its message starts with it)."""
    unit, found, _rest = risk.message.partition(" registers ")
    return unit if found else risk.reader


# <iostream>'s init object: one per TU that includes it, nobody's to act on.
_IOS_INIT = ("_ZStL8__ioinit", "std::ios_base::Init::~Init()")
# The C++ runtime's own objects, when a library carries a copy of its code.
_RUNTIME_PREFIXES = ("_ZSt", "_ZNSt", "_ZN9__gnu_cxx", "_ZNKSt", "_ZGVNSt", "_ZZNSt",
                     "_ZN10__cxxabiv1")


def _destructor_class(risk: Risk) -> str:
    """"ios" (<iostream>'s init object), "runtime" (the C++ runtime's) or "own"."""
    if risk.object in _IOS_INIT or _IOS_INIT[1] in risk.message:
        return "ios"
    return "runtime" if risk.object.startswith(_RUNTIME_PREFIXES) else "own"


def _destructor_census(destructors: list[Risk], style: Styler, verbose: bool) -> str:
    """Every exit-time destructor in one line: how many, of what, and those read at exit."""
    kinds = Counter(_destructor_class(r) for r in destructors)
    units = {_unit_of(r) for r in destructors if _destructor_class(r) == "own"}
    parts = []
    if kinds["own"]:
        parts.append(f"{kinds['own']} in {plural(len(units), 'translation unit')}")
    if kinds["ios"]:
        parts.append(f"{kinds['ios']} <iostream> init "
                     f"{'object' if kinds['ios'] == 1 else 'objects'}")
    if kinds["runtime"]:
        parts.append(f"{kinds['runtime']} of the C++ runtime")
    read = sorted({demangle_label(r.object) for r in destructors if r.read_at_exit})
    text = (f"    {style('warning: exit-time-destructor', 'warn')}: "
            f"{plural(len(destructors), 'object')} destroyed at exit ({', '.join(parts)})")
    if read:
        text += ("; read at exit (by a destructor, an atexit function or a thread), where "
                 f"destroying them matters: {_first(read, _UNITS_SHOWN)}")
    else:
        text += "; none read at exit; never destroying them avoids use after destruction"
    return text + ("" if verbose else style("; -v lists them", "dim"))


def _grouped_destructors(destructors: list[Risk], style: Styler) -> list[str]:
    by_unit: dict[str, list[str]] = defaultdict(list)
    for risk in destructors:
        by_unit[_unit_of(risk)].append(demangle_label(risk.object))
    lines = []
    counts = Counter({unit: len(objects) for unit, objects in by_unit.items()})
    for unit, count in counts.most_common(_UNITS_SHOWN):
        lines.append(f"      {unit}: {count} ({_first(by_unit[unit], _OBJECTS_SHOWN)})")
    if len(counts) > _UNITS_SHOWN:
        lines.append(style(f"      … and {len(counts) - _UNITS_SHOWN} more translation units",
                           "dim"))
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
    decided, undecided = coverage.constant_branches
    if decided or undecided:
        # A constant argument selects a callee's path: say how often that was decided.
        text += (f"; branches on constant arguments: {decided} decided (the selected path "
                 f"alone followed), {undecided} not (every path kept)")
    if coverage.quiet_at_load:
        # Say which flags decided paths: a switch set at load by code not followed
        # would make those findings wrong.
        names = [demangle_label(label) for _address, _width, label in coverage.quiet_at_load]
        shown = ", ".join(names[:_QUIET_SHOWN]) + (", …" if len(names) > _QUIET_SHOWN else "")
        text += (f"; read as zero at load, no initializer writing them: "
                 f"{plural(len(names), 'flag')} ({shown})")
    # Followed to the end is not everything: what the code reaches through a pointer
    # it loads from data (a table of callbacks, an object's fields) is not attributed.
    text += "; not tracked: globals reached through pointers kept in data"
    complete = coverage.initializers_complete == coverage.initializers \
        and coverage.destructors_complete == coverage.destructors
    return style(text, "dim" if complete else "warn")


def _summary(result: InitsResult, style: Styler) -> str:
    count = sum(len(r.initializers) for r in result.objects)
    errors = sum(1 for r in result.objects for k in r.risks if k.severity is Severity.ERROR)
    text = (f"{plural(len(result.objects), 'object')}: {plural(count, 'initializer')}, "
            f"{plural(errors, 'error')}")
    if result.errors:
        text += "; " + style(failed_inputs(result.errors), "bad")
    return text
