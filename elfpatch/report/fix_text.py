"""Human-readable rendering of a fix plan and its outcome."""

from __future__ import annotations

from collections import Counter
from typing import Any

from elfpatch.demangle import demangle
from elfpatch.patch.plan import HIDE_REASON, FixPlan, LibraryPlan, name_some
from elfpatch.report.style import Styler, plural
from elfpatch.service.fix import FixResult, LibraryOutcome


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
        lines.append("  " + _counts_line(plan, dry_run))
        lines.extend(_reasons(plan, style, verbose=dry_run))
    if plan.skipped:
        lines.append(f"  {plural(len(plan.skipped), 'UNIQUE symbol')} left as is "
                     "(--only/--exclude)")
    if plan.kept_exported:
        name, reason = plan.kept_exported[0]
        lines.append(f"  {plural(len(plan.kept_exported), 'export')} --hide matched stay "
                     f"exported, e.g. {demangle(name)}: {reason}")
    if not dry_run and plan.changes and not outcome.written:
        lines.append("  not written")
    return "\n".join(lines)


def _counts_line(plan: LibraryPlan, dry_run: bool) -> str:
    by_table = Counter((c.table, c.target) for c in plan.changes)
    parts = [f"{table} {n} -> {target}" for (table, target), n in sorted(by_table.items())]
    done = "would be rewritten" if dry_run else "rewritten"
    kind = "UNIQUE symbol" if all(c.original == "UNIQUE" for c in plan.changes) else "symbol"
    return f"{plural(len(plan.changes), kind)} {done}: " + ", ".join(parts)


def _reasons(plan: LibraryPlan, style: Styler, verbose: bool) -> list[str]:
    """Every change with --dry-run; otherwise only those that did not get the asked binding."""
    lines = []
    seen: set[str] = set()
    for change in plan.changes:  # .symtab repeats .dynsym's decision: show each symbol once
        noteworthy = change.reason not in ("no other library of the set uses it", "--to global",
                                           HIDE_REASON)
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
        if refusal.referenced_count:
            lines.append("    referenced (undefined) by "
                         + name_some(refusal.referenced_by, refusal.referenced_count))
        if refusal.also_defined_count:
            lines.append("    also defined by "
                         + name_some(refusal.also_defined_by, refusal.also_defined_count))
    return "\n".join(lines) + "\n"


def _summary(result: FixResult, dry_run: bool) -> str:
    assert result.plan is not None
    targets = Counter(c.target for lib in result.plan.libraries for c in lib.changes)
    counts = ", ".join(f"{n} -> {t}" for t, n in targets.most_common())
    done = f"{'would rewrite' if dry_run else 'rewrote'} {counts}" if counts else \
        "nothing to rewrite"
    written = sum(1 for o in result.outcomes if o.written)
    tail = " (dry run: nothing written)" if dry_run else f"; {plural(written, 'file')} written"
    return f"{plural(len(result.plan.libraries), 'library', 'libraries')}: {done}{tail}"


def render_wheels(result: Any, style: Styler, dry_run: bool) -> str:
    """``fix -w``: each wheel, what became of it, and its ELF members' plans."""
    blocks = [_render_wheel(wheel, style, dry_run) for wheel in result.wheels]
    if len(result.wheels) > 1 or not blocks:
        blocks.append(_wheels_summary(result, dry_run))
    return "\n\n".join(block for block in blocks if block) + "\n"


def _render_wheel(wheel: Any, style: Styler, dry_run: bool) -> str:
    lines = [style(wheel.wheel, "head") + _wheel_outcome(wheel, style)]
    if wheel.plan is not None and wheel.plan.refusals:
        lines.append(_render_refusals(wheel.plan, style).rstrip())
        return "\n".join(lines)
    for member in wheel.members:
        plan = member.plan
        if not plan.changes and not plan.skipped:
            continue
        lines.append(f"  {member.member}")
        if plan.changes:
            lines.append("    " + _counts_line(plan, dry_run))
            lines.extend("  " + line for line in _reasons(plan, style, verbose=dry_run))
        if plan.skipped:
            lines.append(f"    {plural(len(plan.skipped), 'UNIQUE symbol')} left as is "
                         "(--only/--exclude)")
    untouched = sum(1 for member in wheel.members if not member.plan.changes)
    if untouched and wheel.members:
        lines.append("  " + style(f"{plural(untouched, 'other ELF member')} without "
                                  "STB_GNU_UNIQUE symbols to rewrite", "good"))
    return "\n".join(lines)


def _wheel_outcome(wheel: Any, style: Styler) -> str:
    """What became of the wheel, after its name."""
    changed = len(wheel.changed_members)
    if wheel.status == "planned":
        return f" (dry run: {plural(changed, 'member')} would be rewritten; nothing written)"
    if wheel.status == "refused":
        return " " + style("(refused; nothing written)", "bad")
    if wheel.status == "failed":
        return " " + style("(failed; nothing written)", "bad")
    where = f" -> {wheel.destination}"
    if not wheel.written:
        return where + " " + style("(not written: the run did not complete)", "bad")
    if wheel.status == "unchanged":
        return where + " " + style("(unchanged: nothing to fix, copied as it is)", "good")
    size = ""
    if wheel.size_after is not None and wheel.size_before:
        size = f", {_size_change(wheel.size_before, wheel.size_after)}"
    return where + f" ({plural(changed, 'member')} rewritten, RECORD updated{size})"


def _size_change(before: int, after: int) -> str:
    change = (after - before) / before * 100
    return f"{after / 1e6:,.1f} MB, {change:+.2f}%" if after >= 1e6 else f"{after:,} bytes"


def _wheels_summary(result: Any, dry_run: bool) -> str:
    statuses = Counter(wheel.status for wheel in result.wheels)
    parts = [f"{count} {status}" for status, count in statuses.most_common()]
    written = sum(1 for wheel in result.wheels if wheel.written)
    tail = " (dry run: nothing written)" if dry_run else f"; {plural(written, 'wheel')} written"
    return f"{plural(len(result.wheels), 'wheel')}: {', '.join(parts) or 'none'}{tail}"
