"""Human-readable rendering of ``inits`` results."""

from __future__ import annotations

from elfpatch.analysis.init_order import InitsResult, ObjectReport
from elfpatch.analysis.initializers import InitializerEntry
from elfpatch.analysis.risks import SEVERITY_ERROR, Risk
from elfpatch.report.style import Styler, plural


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
              for n, entry in enumerate(result.closure, 1)]
    lines += [style(f"  not found: {name} (needed by {by})", "warn")
              for name, by in result.missing]
    return "\n".join(lines)


def _entry_line(number: int, entry: InitializerEntry) -> str:
    name = entry.demangled or entry.symbol or "(unnamed)"
    where = f"{entry.address:#x}" if entry.address is not None else "unresolved"
    details = []
    if entry.priority is not None:
        details.append(f"init_priority {entry.priority}")
    if entry.translation_unit:
        details.append(f"TU {entry.translation_unit}")
    if entry.registers_destructor:
        details.append("registers an exit-time destructor")
    if entry.is_runtime:
        details.append("C runtime")
    suffix = f"  [{'; '.join(details)}]" if details else ""
    return f"  {number:4d}. {entry.kind:13s} {where:>12s}  {name}{suffix}"


def _render_object(report: ObjectReport, style: Styler, verbose: bool) -> str:
    where = f"{report.path}:{report.member}" if report.member else report.path
    lines = [style(f"{where}  ({report.machine}, {report.elf_type})", "head")]
    lines.append(f"  {plural(len(report.initializers), 'initializer')}, in run order:")
    lines += [_entry_line(n, e) for n, e in enumerate(report.initializers, 1)]
    if verbose:
        lines.append(f"  {plural(len(report.finalizers), 'finalizer')}, in run order:")
        lines += [_entry_line(n, e) for n, e in enumerate(report.finalizers, 1)]
    lines += _render_risks(report.risks, style, verbose)
    if not report.effects_complete:
        lines.append(style("  note: some initializer code could not be followed to the end; "
                           "risks may be missing", "dim"))
    return "\n".join(lines)


def _render_risks(risks: tuple[Risk, ...], style: Styler, verbose: bool) -> list[str]:
    if not risks:
        return ["  " + style("no initialization-order risks found", "good")]
    errors = [r for r in risks if r.severity == SEVERITY_ERROR]
    warnings = [r for r in risks if r.severity != SEVERITY_ERROR]
    lines = [f"  risks: {plural(len(errors), 'error')}, {plural(len(warnings), 'warning')}"]
    shown = errors + (warnings if verbose else warnings[:5])
    for risk in shown:
        role = "bad" if risk.severity == SEVERITY_ERROR else "warn"
        lines.append("    " + style(f"{risk.severity}: {risk.kind}", role) + f": {risk.message}")
    if len(shown) < len(risks):
        lines.append(style(f"    … and {len(risks) - len(shown)} more warnings (-v lists all)",
                           "dim"))
    return lines


def _summary(result: InitsResult, style: Styler) -> str:
    count = sum(len(r.initializers) for r in result.objects)
    errors = sum(1 for r in result.objects for k in r.risks if k.severity == SEVERITY_ERROR)
    text = (f"{plural(len(result.objects), 'object')}: {plural(count, 'initializer')}, "
            f"{plural(errors, 'init-order error')}")
    if result.errors:
        text += "; " + style(plural(len(result.errors), "input") + " could not be read", "bad")
    return text
