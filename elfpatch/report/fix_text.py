"""Human-readable rendering of a fix plan and its outcome."""

from __future__ import annotations

from collections import Counter
from typing import Any

from elfpatch.patch.fix import FixResult, LibraryOutcome
from elfpatch.patch.plan import FixPlan, LibraryPlan
from elfpatch.report.style import Styler, plural


def render_fix(result: FixResult, style: Styler, dry_run: bool) -> str:
    plan = result.plan
    if plan is None:
        return ""
    if plan.refusals:
        return _render_refusals(plan, style)
    blocks = [_render_library(outcome, style, dry_run) for outcome in result.outcomes]
    blocks.append(_summary(result, dry_run))
    return "\n\n".join(blocks) + "\n"


def _render_library(outcome: LibraryOutcome, style: Styler, dry_run: bool) -> str:
    plan = outcome.plan
    arrow = "" if outcome.destination in (None, outcome.source) else f" -> {outcome.destination}"
    lines = [style(f"{outcome.source}{arrow}", "head")]
    if not plan.changes:
        lines.append("  " + style("no STB_GNU_UNIQUE symbols to rewrite (0 changes)", "good"))
    else:
        lines.append("  " + _counts_line(plan))
        lines.extend(_reasons(plan, style, verbose=dry_run))
    if plan.skipped:
        lines.append(f"  {plural(len(plan.skipped), 'UNIQUE symbol')} left as is "
                     "(--only/--exclude)")
    if not dry_run and plan.changes and not outcome.written:
        lines.append("  not written")
    return "\n".join(lines)


def _counts_line(plan: LibraryPlan) -> str:
    by_table = Counter((c.table, c.target) for c in plan.changes)
    parts = [f"{table} {n} -> {target}" for (table, target), n in sorted(by_table.items())]
    return f"{plural(len(plan.changes), 'UNIQUE symbol')} rewritten: " + ", ".join(parts)


def _reasons(plan: LibraryPlan, style: Styler, verbose: bool) -> list[str]:
    """Every change with --dry-run; otherwise only those that did not get the asked binding."""
    lines = []
    seen: set[str] = set()
    for change in plan.changes:  # .symtab repeats .dynsym's decision: show each symbol once
        noteworthy = change.reason not in ("no other library of the set uses it", "--to global")
        if change.name in seen or not (verbose or noteworthy):
            continue
        seen.add(change.name)
        role = "warn" if noteworthy else "dim"
        lines.append(f"    {change.target:11s} {change.demangled}")
        lines.append("      " + style(change.reason, role))
    return lines


def _render_refusals(plan: FixPlan, style: Styler) -> str:
    lines = [style("refused (--strict): these UNIQUE symbols are needed by other libraries "
                   "of the set; nothing was written", "bad")]
    for refusal in plan.refusals:
        lines.append(f"  {refusal.library}: {refusal.demangled} ({refusal.name})")
        if refusal.referenced_by:
            lines.append(f"    referenced (undefined) by {', '.join(refusal.referenced_by)}")
        if refusal.also_defined_by:
            lines.append(f"    also defined by {', '.join(refusal.also_defined_by)}")
    return "\n".join(lines) + "\n"


def _summary(result: FixResult, dry_run: bool) -> str:
    assert result.plan is not None
    targets = Counter(c.target for lib in result.plan.libraries for c in lib.changes)
    counts = ", ".join(f"{n} -> {t}" for t, n in targets.most_common()) or "0 changes"
    verb = "would rewrite" if dry_run else "rewrote"
    written = sum(1 for o in result.outcomes if o.written)
    tail = " (dry run: nothing written)" if dry_run else f"; {plural(written, 'file')} written"
    return (f"{plural(len(result.plan.libraries), 'library', 'libraries')}: {verb} "
            f"{counts}{tail}")


def render_wheels(results: list[Any], style: Styler, dry_run: bool) -> str:
    blocks = []
    for result in results:
        head = style(result.wheel, "head")
        if result.destination:
            head += f" -> {result.destination} ({plural(len(result.changed_members), 'member')} "
            head += "rewritten, RECORD updated)"
        blocks.append(head + "\n" + render_fix(result.fix, style, dry_run).rstrip())
    return "\n\n".join(blocks) + "\n"
