"""Renderings of a ``check`` result: text, JSON, GitHub workflow commands, JUnit XML.

The last two are read by programs, not people, and are shaped by what those
programs accept. GitHub's runner reads ``::error file=…,title=…::message``
lines; it splits the properties on ',' and '=', unescapes ``%25 %0D %0A %3A
%2C`` in them and ``%25 %0D %0A`` in the message, and turns only the first 10
error and 10 warning commands of a step into annotations (the rest reach the
log only). The JUnit consumers (Jenkins, GitLab, the GitHub test-report
actions) read testsuites > testsuite > testcase, take a test case's first
``failure`` or ``error`` child as its outcome, and need ``name`` on suites and
cases and ``tests``, ``failures``, ``errors`` on suites, counted in test cases.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Any
from xml.etree import ElementTree

from elfpatch.analysis.check import (
    REGISTERED_BY,
    UNNAMED_OBJECT,
    CheckResult,
    CheckRule,
    Clash,
    Finding,
    LibraryCheck,
)
from elfpatch.analysis.policy import Level
from elfpatch.analysis.unique import UniqueSymbol
from elfpatch.errors import ElfpatchError, InternalError
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record, file_record
from elfpatch.report.style import Styler, failed_inputs, plural

# The group of libraries given as files rather than found in an archive.
_LOOSE_FILES = "(files)"


def _by_archive(result: CheckResult) -> dict[str, list[LibraryCheck]]:
    groups: dict[str, list[LibraryCheck]] = defaultdict(list)
    for library in result.libraries:
        source = library.facts.source
        groups[source.path if source.member else _LOOSE_FILES].append(library)
    return groups


# The summary (text without -v) fits a screen: this many libraries with findings
# per archive, this many named examples per rule, names shortened to this width.
_SUMMARY_LIBRARIES = 20
_SUMMARY_EXAMPLES = 3
_SUMMARY_CLASHES = 5
_NAME_WIDTH = 70
_EXAMPLE_WIDTH = 40


def render_text(result: CheckResult, style: Styler, verbose: bool = False) -> str:
    """Per archive, the libraries with findings; a summary unless ``verbose``."""
    lines = []
    for archive, libraries in _by_archive(result).items():
        lines.append(style(archive, "head"))
        noisy = [lib for lib in libraries
                 if lib.findings or lib.facts.scan.dynamic_unique_definitions]
        if not verbose:
            noisy.sort(key=lambda lib: -sum(1 for f in lib.findings if not f.baselined))
        shown = noisy if verbose else noisy[:_SUMMARY_LIBRARIES]
        for library in shown:
            lines += _library_lines(library, style) if verbose else \
                _library_summary(library, style)
        if len(shown) < len(noisy):
            more = plural(len(noisy) - len(shown), "more library", "more libraries")
            lines.append(style(f"  ... {more} with findings (-v lists every one)", "dim"))
        quiet = len(libraries) - len(noisy)
        if quiet:
            lines.append(style(f"  {plural(quiet, 'other library', 'other libraries')}: "
                               "no findings", "dim"))
    lines += _clash_lines(result, style, verbose)
    lines.append(_verdict(result, style))
    return "\n".join(lines) + "\n"


def _clash_lines(result: CheckResult, style: Styler, verbose: bool) -> list[str]:
    shown = result.clashes if verbose else result.clashes[:_SUMMARY_CLASHES]
    lines = [style(f"clash: {_clash_message(clash)}", "warn") for clash in shown]
    if len(shown) < len(result.clashes):
        more = plural(len(result.clashes) - len(shown), "more clash", "more clashes")
        lines.append(style(f"... {more} (-v lists every one)", "dim"))
    return lines


def _library_head(library: LibraryCheck) -> str:
    facts = library.facts
    unique = len(facts.scan.dynamic_unique_definitions)
    return (f"  {facts.identity}: {plural(unique, 'UNIQUE definition')}, "
            f"{plural(facts.initializers, 'static initializer')}, "
            f"{plural(len(facts.exit_destructors), 'exit-time destructor')}")


def _library_summary(library: LibraryCheck, style: Styler) -> list[str]:
    """The head line, then one line per level and rule: a count and the first few subjects."""
    lines = [_library_head(library)]
    groups: dict[tuple[Level, CheckRule], list[Finding]] = defaultdict(list)
    for finding in library.findings:
        if not finding.baselined:
            groups[(finding.level, finding.rule)].append(finding)
    names = {s.name: s for s in library.facts.scan.dynamic_unique_definitions}
    for (level, rule), findings in groups.items():
        role = "bad" if level is Level.ERROR else "warn"
        detail = _unique_kinds(findings, names) if rule == CheckRule.UNIQUE else ""
        width = (_EXAMPLE_WIDTH if rule in (CheckRule.UNIQUE, CheckRule.EXIT_DESTRUCTOR)
                 else _NAME_WIDTH * 2)
        named = _distinct_names(findings, names, width)
        examples = ", ".join(named[:_SUMMARY_EXAMPLES])
        more = ", ..." if len(named) > _SUMMARY_EXAMPLES else ""
        lines.append("    " + style(f"{level}: {rule}", role) + f": {len(findings)}{detail}"
                     + (": " + style(f"{examples}{more}", "dim") if examples else ""))
    return lines + _baselined_line(library, style)


def _distinct_names(findings: list[Finding], names: dict[str, UniqueSymbol],
                    width: int) -> list[str]:
    """The findings' subjects, shortened, each once, leaving out the ones without a name."""
    seen: dict[str, None] = {}
    for finding in findings:
        name = shorten(_subject_name(finding, names), width)
        if name != UNNAMED_OBJECT:  # an object the analysis could not name: no example
            seen.setdefault(name)
        if len(seen) > _SUMMARY_EXAMPLES:
            break
    return list(seen)


def _baselined_line(library: LibraryCheck, style: Styler) -> list[str]:
    baselined = sum(1 for f in library.findings if f.baselined)
    return [style(f"    ({plural(baselined, 'finding')} in the baseline)", "dim")] \
        if baselined else []


def _unique_kinds(findings: list[Finding], names: dict[str, UniqueSymbol]) -> str:
    kinds = Counter(names[f.subject].kind.replace("_", " ") for f in findings
                    if f.subject in names)
    if not kinds:
        return ""
    named = [f"{n} {kind}" for kind, n in kinds.most_common(2)]
    return " (" + ", ".join(named) + (", ..." if len(kinds) > 2 else "") + ")"


def _subject_name(finding: Finding, names: dict[str, UniqueSymbol]) -> str:
    """What a finding is about, in few words: the symbol or object, else its message."""
    symbol = names.get(finding.subject)
    if symbol is not None:
        return symbol.demangled
    if finding.rule == CheckRule.EXIT_DESTRUCTOR:
        from elfpatch.cxx.demangle import demangle_label

        return demangle_label(finding.subject.split(REGISTERED_BY, 1)[0])
    return finding.message


# Operators whose names hold angle brackets that open or close no template.
_OPERATOR = re.compile(r"operator(<=>|<<=|>>=|<<|>>|<=|>=|->\*|->|<|>)")
_LT, _GT = "\ue000", "\ue001"  # stand-ins for those brackets while templates are folded


def shorten(name: str, width: int = _NAME_WIDTH) -> str:
    """A C++ name a person can read: template arguments past the first level as ``…``,
    then cut to ``width``."""
    hidden = _OPERATOR.sub(lambda m: m.group(0).replace("<", _LT).replace(">", _GT), name)
    out, depth = [], 0
    for char in hidden:
        if char == "<":
            depth += 1
            out.append("<" if depth == 1 else "…" if depth == 2 else "")
        elif char == ">":
            out.append(">" if depth == 1 else "")
            depth = max(0, depth - 1)
        elif depth <= 1:
            out.append(char)
    short = "".join(out).replace(_LT, "<").replace(_GT, ">")
    return short if len(short) <= width else short[: width - 1] + "…"


def _library_lines(library: LibraryCheck, style: Styler) -> list[str]:
    lines = [_library_head(library)]
    for finding in library.findings:
        if finding.baselined:
            continue
        role = "bad" if finding.level is Level.ERROR else "warn"
        lines.append("    " + style(f"{finding.level}: {finding.rule}", role) +
                     f": {finding.message}")
    return lines + _baselined_line(library, style)


def _verdict(result: CheckResult, style: Styler) -> str:
    """The last line: the same verdict as ``result.passed`` and the exit code, and what next."""
    if result.errors:
        if any(isinstance(error, InternalError) for error in result.errors):
            return style(f"check failed: {failed_inputs(result.errors)}", "bad")
        return style(f"check could not read {plural(len(result.errors), 'input')}", "bad")
    if result.passed:
        return style(f"check passed ({plural(len(result.libraries), 'library', 'libraries')})",
                     "good")
    reasons = []
    if result.violations:
        reasons.append(plural(len(result.violations), "violation"))
    if result.clashes and result.clashes_fail:
        reasons.append(plural(len(result.clashes), "UNIQUE clash", "UNIQUE clashes"))
    return "\n".join([style(f"check FAILED: {', '.join(reasons)}", "bad"),
                      *(f"  next: {step}" for step in next_steps(result))])


def next_steps(result: CheckResult) -> list[str]:
    """What a user can do about a failing check, most direct first."""
    wheels = sorted({lib.facts.source.path for lib in result.libraries
                     if lib.facts.source.member is not None
                     and any(f.violation and f.rule == CheckRule.UNIQUE for f in lib.findings)})
    steps = []
    if wheels:
        steps.append(f"elfpatch fix {' '.join(wheels[:3])}{' ...' if len(wheels) > 3 else ''} "
                     "-w fixed/   (rewrite the UNIQUE bindings, then check fixed/*.whl)")
    elif any(f.rule == CheckRule.UNIQUE for f in result.violations):
        steps.append("elfpatch fix --in-place LIBRARY...   (or rebuild with -fno-gnu-unique)")
    if result.violations:
        steps.append('accept known symbols: allow = ["^regex on the demangled name"] under '
                     "[tool.elfpatch] in pyproject.toml")
        steps.append("or record today's findings: --baseline elfpatch-baseline.json "
                     "--update-baseline (later runs fail only on new ones)")
    if result.clashes and result.clashes_fail:
        steps.append("a clash is two packages defining one UNIQUE symbol: fix one of them, or "
                     'set unique = "warn"')
    return steps


def _finding(finding: Finding) -> dict[str, Any]:
    return {"library": finding.library, "rule": finding.rule.value, "subject": finding.subject,
            "level": finding.level.value, "baselined": finding.baselined, "key": finding.key,
            "message": finding.message}


def render_json(result: CheckResult) -> dict[str, Any]:
    files = []
    for library in result.libraries:
        record = file_record(library.facts.scan)
        record["initializers"] = library.facts.initializers
        record["findings"] = [_finding(f) for f in library.findings]
        files.append(record)
    return {
        "version": SCHEMA_VERSION,
        "policy_source": result.policy.source,
        "files": files,
        "violations": [_finding(f) for f in result.violations],
        "clashes": [{"symbol": c.symbol, "demangled": c.demangled,
                     "defined_by": [{"package": p, "library": lib} for p, lib in c.defined_by]}
                    for c in result.clashes],
        "passed": result.passed,
        "errors": [error_record(e) for e in result.errors],
    }


# GitHub Actions workflow commands.

# The runner keeps the first 10 error and the first 10 warning annotations of a
# step; every later one is a line in the step's log and nothing more.
GITHUB_SHOWN_PER_KIND = 10
# Messages quoted in an annotation that stands for many.
_EXAMPLES_PER_HEADLINE = 5
_GROUPS_NAMED_IN_REMAINDER = 20


@dataclass(frozen=True)
class _Annotation:
    level: str  # the workflow command: "error" or "warning"
    title: str  # also what annotations are grouped by when there are too many to show
    message: str
    file: str | None = None
    subject: str = ""  # what the message is about when the message does not say it


def _escape_property(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A") \
        .replace(":", "%3A").replace(",", "%2C")


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _workflow_command(annotation: _Annotation) -> str:
    properties = ",".join(f"{name}={_escape_property(value)}"
                          for name, value in (("file", annotation.file),
                                              ("title", annotation.title)) if value)
    if properties[-1:].isspace():
        # The runner trims the property list as a whole, which would take white
        # space ending the last value with it; it drops empty entries, so a
        # trailing comma keeps the value whole.
        properties += ","
    head = f"{annotation.level} {properties}" if properties else annotation.level
    return f"::{head}::{_escape_data(annotation.message)}"


def _finding_annotations(result: CheckResult) -> list[_Annotation]:
    return [_Annotation("error" if finding.level is Level.ERROR else "warning",
                        f"elfpatch {finding.rule} in {finding.library}", finding.message,
                        library.facts.source.path, finding.library)
            for library in result.libraries for finding in library.findings
            if not finding.baselined]


def _clash_message(clash: Clash) -> str:
    where = ", ".join(f"{lib} ({package})" for package, lib in clash.defined_by)
    return (f"{clash.demangled} is STB_GNU_UNIQUE in {where}: loaded together, "
            "they share one copy")


def _clash_annotations(result: CheckResult) -> list[_Annotation]:
    # A clash fails the check like a finding does, so it must not pass unseen.
    level = "error" if result.clashes_fail else "warning"
    return [_Annotation(level, "elfpatch UNIQUE clash between packages", _clash_message(c))
            for c in result.clashes]


def _input_error_annotations(result: CheckResult) -> list[_Annotation]:
    return [_Annotation("error", "elfpatch", error.reason, error.path, error.path)
            for error in result.errors]


def _headline(group: list[_Annotation]) -> _Annotation:
    """One annotation standing for a group of the same title: its count and first messages."""
    if len(group) == 1:
        return group[0]
    first = group[0]
    shown = [a.message for a in group[:_EXAMPLES_PER_HEADLINE]]
    more = len(group) - len(shown)
    lines = [f"{len(group)} {first.level}s, every one in this step's log; the first "
             f"{len(shown)}:", *shown]
    if more:
        lines.append(f"… and {more} more")
    return replace(first, title=f"{first.title} ({len(group)} {first.level}s)",
                   message="\n".join(lines))


def _remainder(groups: list[list[_Annotation]]) -> _Annotation:
    """One annotation naming the groups that no longer fit, with their counts."""
    level = groups[0][0].level
    total = sum(len(group) for group in groups)
    named = groups[:_GROUPS_NAMED_IN_REMAINDER]
    lines = [f"{len(group)}: {group[0].title}" for group in named]
    if len(groups) > len(named):
        lines.append(f"… and {len(groups) - len(named)} more groups")
    return _Annotation(level, f"elfpatch: {total} more {level}s",
                       "\n".join([f"{total} more {level}s, every one in this step's log:",
                                  *lines]))


def _headlines(annotations: list[_Annotation]) -> list[_Annotation]:
    """At most GITHUB_SHOWN_PER_KIND annotations that account for all of ``annotations``."""
    groups: dict[tuple[str | None, str], list[_Annotation]] = defaultdict(list)
    for annotation in annotations:
        groups[annotation.file, annotation.title].append(annotation)
    ordered = list(groups.values())
    if len(ordered) <= GITHUB_SHOWN_PER_KIND:
        return [_headline(group) for group in ordered]
    kept = GITHUB_SHOWN_PER_KIND - 1
    return [*(_headline(group) for group in ordered[:kept]), _remainder(ordered[kept:])]


def _for_the_log(annotation: _Annotation) -> _Annotation:
    # Past the shown ones, the runner writes only the message to the log: it
    # has to name its library or input itself.
    if not annotation.subject:
        return annotation
    return replace(annotation, message=f"{annotation.subject}: {annotation.message}")


def render_github(result: CheckResult) -> str:
    """GitHub Actions workflow commands: one annotation per finding, clash and unreadable input.

    Findings in the baseline are left out. GitHub shows only the first 10 error
    and the first 10 warning annotations of a step. When there are more of a
    kind, headlines of that kind come first: one per library and rule (per
    input for unreadable ones, one for all clashes) with the count and the
    first messages, and, past nine such groups, a tenth naming the remaining
    groups with their counts; so what is shown accounts for every finding.
    Every annotation of that kind follows, its message naming its library, so
    the step's log still lists them all.
    """
    annotations = [*_finding_annotations(result), *_clash_annotations(result),
                   *_input_error_annotations(result)]
    crowded = [level for level in ("error", "warning")
               if sum(a.level == level for a in annotations) > GITHUB_SHOWN_PER_KIND]
    headlines = [headline for level in crowded
                 for headline in _headlines([a for a in annotations if a.level == level])]
    lines = [_workflow_command(a) for a in headlines]
    lines += [_workflow_command(_for_the_log(a) if a.level in crowded else a)
              for a in annotations]
    return "\n".join(lines) + ("\n" if lines else "")


# JUnit XML.

# Characters XML 1.0 cannot carry, even escaped; a symbol or member name could hold one.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_safe(text: str) -> str:
    return _NOT_XML.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


def _element(parent: ElementTree.Element | None, tag: str, text: str | None = None,
             **attributes: str) -> ElementTree.Element:
    safe = {name: _xml_safe(value) for name, value in attributes.items()}
    element = (ElementTree.Element(tag, safe) if parent is None
               else ElementTree.SubElement(parent, tag, safe))
    if text is not None:
        element.text = _xml_safe(text)
    return element


def _test_case(classname: str, name: str) -> ElementTree.Element:
    # No per-library timing exists; a time of 0 is still given because some
    # readers (dorny/test-reporter) show NaN without one.
    return _element(None, "testcase", classname=classname, name=name, time="0")


def _violation_line(finding: Finding) -> str:
    return f"{finding.rule}: {finding.message} (baseline key: {finding.key})"


def _note_line(finding: Finding) -> str:
    status = "in the baseline" if finding.baselined else finding.level
    return f"{status} {finding.rule}: {finding.message}"


def _failure_summary(violations: list[Finding]) -> tuple[str, str]:
    """The failure's type and message: the rule and message of one, or counts of several."""
    if len(violations) == 1:
        return violations[0].rule.value, violations[0].message
    rules = Counter(f.rule for f in violations)
    counts = ", ".join(f"{rule} ({count})" for rule, count in rules.items())
    kind = next(iter(rules)).value if len(rules) == 1 else "elfpatch"
    return kind, f"{plural(len(violations), 'violation')}: {counts}"


def _library_case(archive: str, library: LibraryCheck) -> ElementTree.Element:
    case = _test_case(archive, library.facts.identity)
    violations = [f for f in library.findings if f.violation]
    if violations:
        # One failure holding every violation: Jenkins, dorny/test-reporter and
        # mikepenz/action-junit-report read only a test case's first failure.
        # Its type is a rule name, never one of the values GitLab's XML reader
        # gives a meaning to (symbol, yaml, array, integer...).
        kind, message = _failure_summary(violations)
        _element(case, "failure", "\n".join(_violation_line(f) for f in violations),
                 type=kind, message=message)
    notes = [f for f in library.findings if not f.violation]
    if notes:
        _element(case, "system-out", "\n".join(_note_line(f) for f in notes))
    return case


def _clash_case(clash: Clash, fails: bool) -> ElementTree.Element:
    case = _test_case("clashes", clash.demangled)
    message = _clash_message(clash)
    if fails:
        _element(case, "failure", f"{message} (symbol {clash.symbol})", type="unique-clash",
                 message=message)
    else:
        _element(case, "system-out", message)
    return case


def _input_case(error: ElfpatchError) -> ElementTree.Element:
    case = _test_case("inputs", error.path)
    # GitLab shows an error's text, Jenkins its message attribute: both are given.
    _element(case, "error", error.one_line(), type=type(error).__name__, message=error.reason)
    return case


def _counts(cases: list[ElementTree.Element]) -> dict[str, str]:
    """The counts consumers expect on a suite, in test cases (not in findings)."""
    return {"tests": str(len(cases)),
            "failures": str(sum(case.find("failure") is not None for case in cases)),
            "errors": str(sum(case.find("error") is not None for case in cases))}


def _add_suite(parent: ElementTree.Element, name: str, cases: list[ElementTree.Element],
               file: str | None = None) -> None:
    suite = _element(parent, "testsuite", name=name, **_counts(cases), skipped="0", time="0")
    if file is not None:
        # mikepenz/action-junit-report places its annotations on the suite's file.
        suite.set("file", _xml_safe(file))
    suite.extend(cases)


def render_junit(result: CheckResult) -> str:
    """JUnit XML: a test suite per archive with a test case per library, failing on violations.

    A failing test case has one ``failure`` listing all its violations (its
    ``message`` counts them); warnings and findings in the baseline go to its
    ``system-out``. UNIQUE clashes between packages are a suite of their own,
    failing when the policy makes UNIQUE definitions errors, and inputs that
    could not be read are test cases in ``error``. Counts are in test cases, as
    the Ant format has them. Characters XML cannot carry are written as
    ``\\xNN`` escapes.
    """
    root = _element(None, "testsuites", name="elfpatch check")
    for archive, libraries in _by_archive(result).items():
        _add_suite(root, archive, [_library_case(archive, lib) for lib in libraries],
                   file=None if archive == _LOOSE_FILES else archive)
    if result.clashes:
        _add_suite(root, "clashes", [_clash_case(clash, result.clashes_fail)
                                     for clash in result.clashes])
    if result.errors:
        _add_suite(root, "inputs", [_input_case(error) for error in result.errors])
    for total in ("tests", "failures", "errors"):
        root.set(total, str(sum(int(suite.get(total, "0")) for suite in root)))
    root.set("time", "0")
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
