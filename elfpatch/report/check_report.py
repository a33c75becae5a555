"""Renderings of a ``check`` result: text, JSON, GitHub workflow commands, JUnit XML."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from xml.etree import ElementTree

from elfpatch.analysis.check import CheckResult, Finding, LibraryCheck
from elfpatch.report.scan_json import SCHEMA_VERSION, error_record, file_record
from elfpatch.report.style import Styler, plural


def _by_archive(result: CheckResult) -> dict[str, list[LibraryCheck]]:
    groups: dict[str, list[LibraryCheck]] = defaultdict(list)
    for library in result.libraries:
        source = library.facts.source
        groups[source.path if source.member else "(files)"].append(library)
    return groups


def render_text(result: CheckResult, style: Styler) -> str:
    lines = []
    for archive, libraries in _by_archive(result).items():
        lines.append(style(archive, "head"))
        quiet = 0
        for library in libraries:
            facts = library.facts
            if library.findings or facts.scan.dynamic_unique_definitions:
                lines += _library_lines(library, style)
            else:
                quiet += 1
        if quiet:
            lines.append(style(f"  {plural(quiet, 'other library', 'other libraries')}: "
                               "no findings", "dim"))
    for clash in result.clashes:
        where = ", ".join(f"{lib} ({package})" for package, lib in clash.defined_by)
        lines.append(style(f"clash: {clash.demangled} is STB_GNU_UNIQUE in {where}: loaded "
                           "together, they share one copy", "warn"))
    lines.append(_verdict(result, style))
    return "\n".join(lines) + "\n"


def _library_lines(library: LibraryCheck, style: Styler) -> list[str]:
    facts = library.facts
    unique = len(facts.scan.dynamic_unique_definitions)
    head = (f"  {facts.identity}: {plural(unique, 'UNIQUE definition')}, "
            f"{plural(facts.initializers, 'static initializer')}, "
            f"{plural(len(facts.exit_destructors), 'exit-time destructor')}")
    lines = [head]
    for finding in library.findings:
        if finding.baselined:
            continue
        role = "bad" if finding.level == "error" else "warn"
        lines.append("    " + style(f"{finding.level}: {finding.rule}", role) +
                     f": {finding.message}")
    baselined = sum(1 for f in library.findings if f.baselined)
    if baselined:
        lines.append(style(f"    ({plural(baselined, 'finding')} in the baseline)", "dim"))
    return lines


def _verdict(result: CheckResult, style: Styler) -> str:
    count = len(result.violations)
    if result.errors:
        return style(f"check could not read {plural(len(result.errors), 'input')}", "bad")
    if count:
        return style(f"check FAILED: {plural(count, 'violation')}", "bad")
    return style(f"check passed ({plural(len(result.libraries), 'library', 'libraries')})",
                 "good")


def _finding(finding: Finding) -> dict[str, Any]:
    return {"library": finding.library, "rule": finding.rule, "subject": finding.subject,
            "level": finding.level, "baselined": finding.baselined, "key": finding.key,
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


def _escape_property(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A") \
        .replace(":", "%3A").replace(",", "%2C")


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render_github(result: CheckResult) -> str:
    """GitHub Actions workflow commands: one annotation per finding and error."""
    lines = []
    for library in result.libraries:
        path = library.facts.source.path
        for finding in library.findings:
            if finding.baselined:
                continue
            command = "error" if finding.level == "error" else "warning"
            title = f"elfpatch {finding.rule} in {finding.library}"
            lines.append(f"::{command} file={_escape_property(path)},"
                         f"title={_escape_property(title)}::{_escape_data(finding.message)}")
    for error in result.errors:
        lines.append(f"::error file={_escape_property(error.path)},"
                     f"title=elfpatch::{_escape_data(error.reason)}")
    return "\n".join(lines) + ("\n" if lines else "")


def render_junit(result: CheckResult) -> str:
    """JUnit XML: a test suite per archive, a test case per library."""
    suites = ElementTree.Element("testsuites", name="elfpatch check")
    for archive, libraries in _by_archive(result).items():
        violations = sum(1 for lib in libraries for f in lib.findings if f.violation)
        suite = ElementTree.SubElement(suites, "testsuite", name=archive,
                                       tests=str(len(libraries)), failures=str(violations),
                                       errors="0", skipped="0")
        for library in libraries:
            case = ElementTree.SubElement(suite, "testcase", classname=archive,
                                          name=library.facts.identity)
            for finding in library.findings:
                if finding.violation:
                    failure = ElementTree.SubElement(case, "failure", type=finding.rule,
                                                     message=finding.message)
                    failure.text = finding.key
    if result.errors:
        suite = ElementTree.SubElement(suites, "testsuite", name="inputs",
                                       tests=str(len(result.errors)), failures="0",
                                       errors=str(len(result.errors)), skipped="0")
        for error in result.errors:
            case = ElementTree.SubElement(suite, "testcase", classname="inputs", name=error.path)
            ElementTree.SubElement(case, "error", message=error.reason)
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
