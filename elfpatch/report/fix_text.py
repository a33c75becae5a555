"""Human-readable rendering of a fix plan and its outcome.

A fix of a big set or wheel touches thousands of symbols: by default each
library gets its counts, and one line for the whole run says why some kept
a GLOBAL binding, with a few names. ``--dry-run`` (the plan) and ``-v`` list
every symbol, grouped under its reason, so no reason is repeated per symbol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from elfpatch.cxx.demangle import demangle
from elfpatch.plan.bindings import HIDE_REASON, FixPlan, LibraryPlan, name_some
from elfpatch.report.style import Styler, plural
from elfpatch.service.fix import FixResult, LibraryOutcome

if TYPE_CHECKING:  # for the types only: a loose file's fix does not import the wheel code
    from elfpatch.service.wheel_fix import WheelFixResult, WheelsResult


def render_fix(result: FixResult, style: Styler, dry_run: bool, verbose: bool = False) -> str:
    plan = result.plan
    if plan is None:
        return ""
    if plan.refusals:
        return _render_refusals(plan, style)
    detailed = dry_run or verbose
    blocks = [_render_library(outcome, style, dry_run, detailed) for outcome in result.outcomes]
    if not detailed:
        blocks.append(_kept_note([o.plan for o in result.outcomes], style, "set"))
    blocks.append(_summary(result, dry_run))
    return "\n\n".join(block for block in blocks if block) + "\n"


def _render_library(outcome: LibraryOutcome, style: Styler, dry_run: bool,
                    detailed: bool) -> str:
    plan = outcome.plan
    arrow = "" if outcome.destination in (None, outcome.source) else f" -> {outcome.destination}"
    lines = [style(f"{outcome.source}{arrow}", "head")]
    if not plan.changes:
        lines.append("  " + style("no STB_GNU_UNIQUE symbols to rewrite (0 changes)", "good"))
    else:
        lines.append("  " + _counts_line(plan, dry_run, outcome.written))
        if detailed:
            lines.extend(_reasons(plan, style))
    if plan.skipped:
        lines.append(f"  {plural(len(plan.skipped), 'UNIQUE symbol')} left as is "
                     "(--only/--exclude)")
    if plan.kept_exported:
        name, reason = plan.kept_exported[0]
        lines.append(f"  {plural(len(plan.kept_exported), 'export')} --hide matched stay "
                     f"exported, e.g. {demangle(name)}: {reason}")
    if not dry_run and plan.changes and not outcome.written:
        lines.append("  not written")
    if outcome.written and outcome.hard_links_left:
        verb = "keeps" if outcome.hard_links_left == 1 else "keep"
        lines.append("  " + style(f"{plural(outcome.hard_links_left, 'other hard link')} of the "
                                  f"file {verb} the original (only the names given are "
                                  "replaced)", "warn"))
    return "\n".join(lines)


def _counts_line(plan: LibraryPlan, dry_run: bool, written: bool = True) -> str:
    by_table = Counter((c.table, c.target) for c in plan.changes)
    parts = [f"{table} {n} -> {target}" for (table, target), n in sorted(by_table.items())]
    done = "would be rewritten" if dry_run else "rewritten" if written else "to rewrite"
    kind = "UNIQUE symbol" if all(c.original == "UNIQUE" for c in plan.changes) else "symbol"
    return f"{plural(len(plan.changes), kind)} {done}: " + ", ".join(parts)


# The reasons that say only that the asked binding was given.
_PLAIN_REASONS = ("no other library of the set uses it", "--to global", HIDE_REASON)
# A summary names this many symbols that kept GLOBAL.
_EXAMPLES = 3


def _by_reason(plan: LibraryPlan) -> dict[tuple[str, str], list[str]]:
    """(target, reason) -> the demangled names, each symbol once (.symtab repeats
    .dynsym's decision), in table order."""
    groups: dict[tuple[str, str], list[str]] = {}
    seen: set[str] = set()
    for change in plan.changes:
        if change.name in seen:
            continue
        seen.add(change.name)
        groups.setdefault((change.target, change.reason), []).append(change.demangled)
    return groups


def _reasons(plan: LibraryPlan, style: Styler) -> list[str]:
    """Every symbol, under its binding and reason (each reason said once)."""
    lines = []
    for (target, reason), names in _by_reason(plan).items():
        role = "dim" if reason in _PLAIN_REASONS else "warn"
        lines.append(f"    {target} ({len(names):,}): " + style(reason, role))
        lines.extend(f"      {name}" for name in names)
    return lines


def _kept_note(plans: list[LibraryPlan], style: Styler, where: str) -> str:
    """One line for every symbol that did not get the asked binding, and why in short."""
    names = [name for plan in plans for (_target, reason), group in _by_reason(plan).items()
             if reason not in _PLAIN_REASONS for name in group]
    if not names:
        return ""
    from elfpatch.report.check_report import shorten

    examples = ", ".join(shorten(name, 50) for name in names[:_EXAMPLES]) + \
        (", ..." if len(names) > _EXAMPLES else "")
    return ("  " + style(f"{plural(len(names), 'symbol')} kept a GLOBAL binding: other "
                         f"libraries of the {where} define or reference them", "warn")
            + f" ({examples}); -v lists each with its reason")


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
    planned = _targets(lib for lib in result.plan.libraries)
    done_counts = _targets(o.plan for o in result.outcomes if o.written)
    if not planned:
        done = "nothing to rewrite"
    elif dry_run:
        done = f"would rewrite {planned}"
    elif not done_counts:
        done = f"planned {planned}, rewrote nothing"
    else:
        done = f"rewrote {done_counts}" + ("" if done_counts == planned else
                                           f" of {planned} planned")
    written = sum(1 for o in result.outcomes if o.written)
    tail = " (dry run: nothing written)" if dry_run else f"; {plural(written, 'file')} written"
    return f"{plural(len(result.plan.libraries), 'library', 'libraries')}: {done}{tail}"


def _targets(plans: Iterable[LibraryPlan]) -> str:
    """``12 -> LOCAL, 1 -> GLOBAL``: the changes of ``plans`` by new binding."""
    targets = Counter(c.target for plan in plans for c in plan.changes)
    return ", ".join(f"{n} -> {t}" for t, n in targets.most_common())


def render_wheels(result: WheelsResult, style: Styler, dry_run: bool, verbose: bool = False) -> str:
    """``fix -w``: each wheel, what became of it, and its ELF members' plans."""
    detailed = dry_run or verbose
    blocks = [_render_wheel(wheel, style, dry_run, detailed) for wheel in result.wheels]
    if len(result.wheels) > 1 or not blocks:
        blocks.append(_wheels_summary(result, dry_run))
    return "\n\n".join(block for block in blocks if block) + "\n"


def _render_wheel(wheel: WheelFixResult, style: Styler, dry_run: bool, detailed: bool) -> str:
    lines = [style(wheel.wheel, "head") + _wheel_outcome(wheel, style)]
    if wheel.plan is not None and wheel.plan.refusals:
        lines.append(_render_refusals(wheel.plan, style).rstrip())
        return "\n".join(lines)
    touched = [member for member in wheel.members
                if member.plan.changes or member.plan.skipped]
    shown = touched if detailed else touched[:_MEMBERS_SHOWN]
    for member in shown:
        lines += _member_lines(member.member, member.plan, style, dry_run, detailed)
    if len(shown) < len(touched):
        lines.append(style(f"  ... and {plural(len(touched) - len(shown), 'more member')} "
                           "rewritten (-v lists them)", "dim"))
    untouched = sum(1 for member in wheel.members if not member.plan.changes)
    if untouched and wheel.members:
        lines.append("  " + style(f"{plural(untouched, 'other ELF member')} without "
                                  "STB_GNU_UNIQUE symbols to rewrite", "good"))
    if not detailed:
        note = _kept_note([member.plan for member in wheel.members], style, "wheel")
        lines += [note] if note else []
    return "\n".join(lines)


# Without -v, a wheel lists this many of its rewritten members, a line each.
_MEMBERS_SHOWN = 20


def _member_lines(name: str, plan: LibraryPlan, style: Styler, dry_run: bool,
                  detailed: bool) -> list[str]:
    skipped = (f"{plural(len(plan.skipped), 'UNIQUE symbol')} left as is (--only/--exclude)"
               if plan.skipped else "")
    if not detailed:  # one line: the member and its counts
        parts = [_counts_line(plan, dry_run)] if plan.changes else []
        return [f"  {name}: " + "; ".join([*parts, *([skipped] if skipped else [])])]
    lines = [f"  {name}"]
    if plan.changes:
        lines.append("    " + _counts_line(plan, dry_run))
        lines.extend("  " + line for line in _reasons(plan, style))
    if skipped:
        lines.append(f"    {skipped}")
    return lines


def _wheel_outcome(wheel: WheelFixResult, style: Styler) -> str:
    """What became of the wheel, after its name."""
    from elfpatch.service.wheel_fix import WheelStatus  # imported already: the fix ran

    changed = len(wheel.changed_members)
    if wheel.status is WheelStatus.PLANNED:
        return f" (dry run: {plural(changed, 'member')} would be rewritten; nothing written)"
    if wheel.status is WheelStatus.REFUSED:
        return " " + style("(refused; nothing written)", "bad")
    if wheel.status is WheelStatus.FAILED:
        return " " + style("(failed; nothing written)", "bad")
    where = f" -> {wheel.destination}"
    if not wheel.written:
        return where + " " + style("(not written: the run did not complete)", "bad")
    if wheel.status is WheelStatus.UNCHANGED:
        return where + " " + style("(unchanged: nothing to fix, copied as it is)", "good")
    size = ""
    if wheel.size_after is not None and wheel.size_before:
        size = f", {_size_change(wheel.size_before, wheel.size_after)}"
    return where + f" ({plural(changed, 'member')} rewritten, RECORD updated{size})"


def _size_change(before: int, after: int) -> str:
    change = (after - before) / before * 100
    return f"{after / 1e6:,.1f} MB, {change:+.2f}%" if after >= 1e6 else f"{after:,} bytes"


def _wheels_summary(result: WheelsResult, dry_run: bool) -> str:
    statuses = Counter(wheel.status for wheel in result.wheels)
    parts = [f"{count} {status}" for status, count in statuses.most_common()]
    written = sum(1 for wheel in result.wheels if wheel.written)
    tail = " (dry run: nothing written)" if dry_run else f"; {plural(written, 'wheel')} written"
    return f"{plural(len(result.wheels), 'wheel')}: {', '.join(parts) or 'none'}{tail}"
