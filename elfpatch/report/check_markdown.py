"""``check --format markdown``: the summary a CI job page shows (GitHub's step summary).

The verdict first, then one table row per library with findings (the first
few; the rest counted), the clashes, and what to do next. Cells are escaped
so that a C++ name (``operator|``, ``<``) cannot break the table or open a tag.
"""

from __future__ import annotations

from collections import Counter

from elfpatch.analysis.check import CheckResult, LibraryCheck
from elfpatch.report.check_report import next_steps, shorten
from elfpatch.report.style import plural

# A summary, not the log: this many libraries and clashes are listed.
_ROWS = 25
_CLASHES = 10


def render_markdown(result: CheckResult) -> str:
    lines = [f"## elfpatch check: {_verdict(result)}", ""]
    noisy = [lib for lib in result.libraries if lib.findings]
    noisy.sort(key=lambda lib: -sum(f.violation for f in lib.findings))
    if noisy:
        lines += ["| library | UNIQUE | initializers | failing | warnings | in baseline |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [_row(library) for library in noisy[:_ROWS]]
        if len(noisy) > _ROWS:
            lines.append(f"\n… and {plural(len(noisy) - _ROWS, 'more library', 'more libraries')}"
                         " with findings (the job's log lists every one).")
        lines.append("")
    quiet = len(result.libraries) - len(noisy)
    if quiet:
        lines += [f"{plural(quiet, 'other library', 'other libraries')}: no findings.", ""]
    lines += _clash_lines(result)
    lines += [f"- {_cell(error.one_line())}" for error in result.errors]
    steps = next_steps(result)
    if steps:
        lines += ["", "**Next:**", *(f"- {_code(step)}" for step in steps)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _verdict(result: CheckResult) -> str:
    if result.errors:
        return f"could not read {plural(len(result.errors), 'input')} ❌"
    if result.passed:
        return f"passed ({plural(len(result.libraries), 'library', 'libraries')}) ✅"
    return f"FAILED ({plural(len(result.violations), 'violation')}) ❌"


def _row(library: LibraryCheck) -> str:
    facts = library.facts
    failing = Counter(f.rule for f in library.findings if f.violation)
    warnings = sum(1 for f in library.findings if not f.violation and not f.baselined)
    baselined = sum(1 for f in library.findings if f.baselined)
    rules = ", ".join(f"{rule} {count}" for rule, count in failing.most_common())
    name = facts.source.member or facts.identity
    return (f"| {_code(name)} | {len(facts.scan.dynamic_unique_definitions)} | "
            f"{facts.initializers} | {sum(failing.values())}"
            f"{f' ({_cell(rules)})' if rules else ''} | {warnings} | {baselined} |")


def _clash_lines(result: CheckResult) -> list[str]:
    if not result.clashes:
        return []
    level = "failing" if result.clashes_fail else "warning"
    lines = [f"**{plural(len(result.clashes), 'UNIQUE clash', 'UNIQUE clashes')} between "
             f"packages** ({level}):"]
    for clash in result.clashes[:_CLASHES]:
        where = ", ".join(f"{library} ({package})" for package, library in clash.defined_by)
        lines.append(f"- {_code(shorten(clash.demangled))} in {_cell(where)}")
    if len(result.clashes) > _CLASHES:
        lines.append(f"- … and {len(result.clashes) - _CLASHES} more")
    return [*lines, ""]


def _cell(text: str) -> str:
    """Plain text safe in a table cell: no pipe, tag, emphasis or line break."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
            .replace("*", "\\*").replace("_", "\\_").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " "))


def _code(text: str) -> str:
    """A code span: what it holds is shown as is (``<`` too), except that a table
    still splits on a pipe, so that one is escaped, and a backtick would end it."""
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"
