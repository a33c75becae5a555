"""What the real readers make of ``check --format github`` and ``check --format junit``.

GitHub: every line is read the way the Actions runner reads a workflow command
(actions/runner, ActionCommand.TryParseV2): the line, white space at its start
dropped, must start with '::'; the command name runs to the first space, its
properties to the next '::'; the properties are trimmed as a whole, split on
',' (empty entries dropped) and each on its first '=' (kept when both sides are
non-empty); '%0D' '%0A' '%3A' '%2C' '%25' are undone in the values and '%0D'
'%0A' '%25' in the message, '%25' last. Annotations take the properties file,
line, endLine, col, endColumn and title. A step shows its first 10 error and
first 10 warning annotations; the rest only reach the log.

JUnit: the document is validated against tests/data/junit.xsd, then read the
way GitLab and Jenkins read it (testsuites > testsuite > testcase, a case's
outcome its failure, error or skipped child), and the counts on every suite
must agree with its test cases.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest
import xmlschema
from conftest import run_elfpatch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import elfpatch
from elfpatch.analysis.check import (
    CheckResult,
    CheckRule,
    Clash,
    Finding,
    LibraryCheck,
    LibraryFacts,
)
from elfpatch.analysis.policy import Policy
from elfpatch.analysis.unique import FileScan
from elfpatch.elf.source import ElfSource
from elfpatch.errors import InputError
from elfpatch.report.check_report import GITHUB_SHOWN_PER_KIND, render_github, render_junit

JUNIT_SCHEMA = Path(__file__).parent / "data" / "junit.xsd"

# -- GitHub workflow commands, read as the runner reads them -------------------------------

ANNOTATION_COMMANDS = {"error", "warning", "notice"}
ANNOTATION_PROPERTIES = {"file", "line", "endLine", "col", "endColumn", "title"}
# Undone in this order, '%25' last, so an escaped '%' never starts another escape.
PROPERTY_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
MESSAGE_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))


@dataclass(frozen=True)
class WorkflowCommand:
    name: str
    properties: dict[str, str]
    message: str


def unescape(text: str, escapes: Iterable[tuple[str, str]]) -> str:
    for code, character in escapes:
        text = text.replace(code, character)
    return text


def parse_properties(text: str) -> dict[str, str]:
    properties = {}
    for entry in text.strip().split(","):
        key, _, value = entry.partition("=")
        if key and value:
            properties[key] = unescape(value, PROPERTY_ESCAPES)
    return properties


def parse_workflow_command(line: str) -> WorkflowCommand | None:
    """The annotation command a line is to the runner, or None if it is plain output."""
    line = line.lstrip()
    if not line.startswith("::"):
        return None
    end = line.find("::", 2)
    if end < 0:
        return None
    name, space, properties = line[2:end].partition(" ")
    if name not in ANNOTATION_COMMANDS:
        return None
    return WorkflowCommand(name, parse_properties(properties) if space else {},
                           unescape(line[end + 2:], MESSAGE_ESCAPES))


def runner_lines(output: str) -> list[str]:
    # The runner reads the output a line at a time, ending lines at '\r' too.
    assert "\r" not in output
    assert output == "" or output.endswith("\n")
    return output[:-1].split("\n") if output else []


def read_commands(output: str) -> list[WorkflowCommand]:
    """Every line as a workflow command, failing on any line the runner would not take."""
    commands = []
    for line in runner_lines(output):
        command = parse_workflow_command(line)
        assert command is not None, f"not a workflow command: {line!r}"
        assert set(command.properties) <= ANNOTATION_PROPERTIES, command.properties
        commands.append(command)
    return commands


def shown(commands: list[WorkflowCommand], kind: str) -> list[WorkflowCommand]:
    """The annotations of a kind GitHub shows for the step: the first ones."""
    return [c for c in commands if c.name == kind][:GITHUB_SHOWN_PER_KIND]


# -- check results made without building anything ------------------------------------------

def library(path: str, member: str | None, findings: list[tuple[str, str, str, str]],
            baselined: bool = False) -> LibraryCheck:
    """A judged library; ``findings`` are (rule, subject, message, level)."""
    source = ElfSource(path, member)
    scan = FileScan(path, member, "x86_64", 64, "DYN", None, False, ())
    facts = LibraryFacts(source, scan, 0, (), ())
    identity = facts.identity
    return LibraryCheck(facts, tuple(Finding(identity, rule, subject, message, level, baselined)
                                     for rule, subject, message, level in findings))


def unique_findings(count: int, prefix: str = "sym") -> list[tuple[str, str, str, str]]:
    return [(CheckRule.UNIQUE, f"_Z{prefix}{i}", f"STB_GNU_UNIQUE variable: {prefix}{i}", "error")
            for i in range(count)]


def warnings(count: int) -> list[tuple[str, str, str, str]]:
    return [(CheckRule.EXIT_DESTRUCTOR, f"obj{i}", f"obj{i} is destroyed at exit", "warn")
            for i in range(count)]


def result_of(*libraries: LibraryCheck, policy: Policy | None = None) -> CheckResult:
    return CheckResult(policy or Policy(), libraries)


def expected_annotations(result: CheckResult) -> list[WorkflowCommand]:
    return [WorkflowCommand("error" if f.level == "error" else "warning",
                            {"file": lib.facts.source.path,
                             "title": f"elfpatch {f.rule} in {f.library}"}, f.message)
            for lib in result.libraries for f in lib.findings if not f.baselined]


TORCH = "dist/torch-2.5.0-cp311-cp311-linux_x86_64.whl"

# -- GitHub: the real wheel -----------------------------------------------------------------


def test_github_commands_of_a_real_wheel(wheel: Path, tmp_path: Path) -> None:
    output = run_elfpatch("check", "--format", "github", str(wheel), cwd=tmp_path).stdout
    commands = read_commands(output)
    expected = expected_annotations(elfpatch.check([str(wheel)], policy=Policy()))
    assert commands == expected
    assert [c.name for c in commands].count("error") == 2
    assert {c.properties["file"] for c in commands} == {str(wheel)}


# -- GitHub: awkward names and messages round-trip ------------------------------------------

AWKWARD_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(path=AWKWARD_TEXT, member=AWKWARD_TEXT, message=AWKWARD_TEXT, reason=AWKWARD_TEXT)
@example(path="dist/a:b,c%25d %0A ü 😀.whl", member="lib/x,y:z%3A=1.so ",
         message="::error::inner %0A, a:b\r\nsecond line 100%", reason="broken: %2C,\n")
@example(path=" lead", member="tab\t", message="\u2028\x85\x00", reason="%")
def test_github_round_trips_awkward_text(path: str, member: str, message: str,
                                         reason: str) -> None:
    result = result_of(library(path, member, [(CheckRule.UNIQUE, "_Zx", message, "error")]))
    result = dataclasses.replace(result, errors=(InputError(path, reason),))
    commands = read_commands(render_github(result))
    assert commands == [
        WorkflowCommand("error", {"file": path, "title": f"elfpatch unique in {member}"},
                        message),
        WorkflowCommand("error", {"file": path, "title": "elfpatch"}, reason),
    ]


# -- GitHub: the display limit --------------------------------------------------------------


def test_up_to_the_limit_every_finding_is_its_own_annotation() -> None:
    result = result_of(library(TORCH, "torch/lib/libtorch_cpu.so",
                               unique_findings(GITHUB_SHOWN_PER_KIND)
                               + warnings(GITHUB_SHOWN_PER_KIND)))
    assert read_commands(render_github(result)) == expected_annotations(result)


def test_baselined_findings_are_not_annotated() -> None:
    result = result_of(library(TORCH, "torch/lib/a.so", unique_findings(3), baselined=True))
    assert render_github(result) == ""


def test_hundreds_of_findings_are_summed_up_where_github_shows_them() -> None:
    torch_cpu, c10 = "torch/lib/libtorch_cpu.so", "torch/lib/libc10.so"
    result = result_of(library(TORCH, torch_cpu, unique_findings(800) + warnings(3)),
                       library(TORCH, c10, unique_findings(12, "c")))
    commands = read_commands(render_github(result))

    headlines = shown(commands, "error")
    assert [h.properties["title"] for h in headlines[:2]] == [
        f"elfpatch unique in {torch_cpu} (800 errors)", f"elfpatch unique in {c10} (12 errors)"]
    assert "STB_GNU_UNIQUE variable: sym0" in headlines[0].message
    assert all(h.properties["file"] == TORCH for h in headlines[:2])
    # Every error is still in the log, naming its library.
    logged = {c.message for c in commands if c.name == "error"}
    for lib in result.libraries:
        assert {f"{lib.facts.identity}: {f.message}" for f in lib.findings
                if f.level == "error"} <= logged
    assert len([c for c in commands if c.name == "error"]) == 2 + 812
    # Three warnings fit: they are as they always were.
    assert [c for c in commands if c.name == "warning"] == [
        c for c in expected_annotations(result) if c.name == "warning"]


def test_more_groups_than_github_shows_end_in_one_naming_the_rest() -> None:
    libraries = [library(TORCH, f"torch/lib/lib{i:02}.so", unique_findings(2, f"s{i}"))
                 for i in range(25)]
    commands = read_commands(render_github(result_of(*libraries)))
    headlines = shown(commands, "error")
    assert len(headlines) == GITHUB_SHOWN_PER_KIND
    rest = headlines[-1]
    remaining = 25 - (GITHUB_SHOWN_PER_KIND - 1)
    assert rest.properties["title"] == f"elfpatch: {2 * remaining} more errors"
    text = "\n".join(f"{h.properties['title']}\n{h.message}" for h in headlines)
    assert all(lib.facts.identity in text for lib in libraries)


def test_a_clash_is_annotated_as_the_policy_judges_it() -> None:
    clash = Clash("_ZN1a1bE", "a::b", (("a-1.0.whl", "a/x.so"), ("b-2.0.whl", "b/y.so")))
    for level, policy in (("error", Policy()), ("warning", Policy(unique="warn"))):
        result = CheckResult(policy, clashes=(clash,))
        (command,) = read_commands(render_github(result))
        assert command.name == level and "file" not in command.properties
        assert command.message.startswith("a::b is STB_GNU_UNIQUE in a/x.so (a-1.0.whl), "
                                          "b/y.so (b-2.0.whl)")


# -- JUnit ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(JUNIT_SCHEMA)


@dataclass(frozen=True)
class ReadCase:
    suite: str
    classname: str
    name: str
    status: str  # as GitLab files it: failed, error, skipped or success
    message: str | None  # what Jenkins shows first: the outcome's message attribute
    details: str | None  # the outcome's text


def read_case(suite: ElementTree.Element, case: ElementTree.Element) -> ReadCase:
    where = (suite.get("name", ""), case.get("classname", ""), case.get("name", ""))
    # GitLab's order: a failure wins over an error, an error over a skip.
    for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        outcome = case.find(tag)
        if outcome is not None:
            return ReadCase(*where, status, outcome.get("message"), outcome.text)
    return ReadCase(*where, "success", None, None)


def read_like_gitlab(document: str) -> list[ReadCase]:
    """The test cases, read as GitLab and Jenkins do; the counts checked on the way."""
    root = ElementTree.fromstring(document.encode())
    assert root.tag == "testsuites"
    cases = []
    for suite in root.findall("testsuite"):
        mine = [read_case(suite, case) for case in suite.findall("testcase")]
        counted = {"tests": len(mine),
                   "failures": sum(c.status == "failed" for c in mine),
                   "errors": sum(c.status == "error" for c in mine),
                   "skipped": sum(c.status == "skipped" for c in mine)}
        assert {key: int(suite.get(key, "0")) for key in counted} == counted, suite.get("name")
        cases += mine
    totals = {"tests": len(cases), "failures": sum(c.status == "failed" for c in cases),
              "errors": sum(c.status == "error" for c in cases)}
    assert {key: int(root.get(key, "0")) for key in totals} == totals
    return cases


def test_junit_of_a_real_wheel(wheel: Path, tmp_path: Path,
                               schema: xmlschema.XMLSchema) -> None:
    missing = str(tmp_path / "missing.whl")
    junit = run_elfpatch("check", "--format", "junit", str(wheel), missing, cwd=tmp_path)
    schema.validate(io.BytesIO(junit.stdout.encode()))
    cases = read_like_gitlab(junit.stdout)
    native, unreadable = cases
    assert (native.suite, native.status) == (str(wheel), "failed")
    assert native.name.startswith("uniqpkg/_native") and native.message is not None
    assert native.message.startswith("2 violations")
    violations = json.loads(run_elfpatch("check", "--format", "json", str(wheel),
                                         cwd=tmp_path).stdout)["violations"]
    assert native.details is not None
    assert all(v["key"] in native.details and v["message"] in native.details
               for v in violations)
    assert (unreadable.suite, unreadable.name, unreadable.status) == ("inputs", missing, "error")


def test_junit_of_hundreds_of_findings(schema: xmlschema.XMLSchema) -> None:
    result = result_of(library(TORCH, "torch/lib/libtorch_cpu.so",
                               unique_findings(800) + warnings(3)),
                       library(TORCH, "torch/lib/libclean.so", []))
    document = render_junit(result)
    schema.validate(document)
    busy, clean = read_like_gitlab(document)
    assert (busy.status, busy.message) == ("failed", "800 violations: unique (800)")
    assert busy.details is not None and len(busy.details.splitlines()) == 800
    assert clean.status == "success"
    system_out = ElementTree.fromstring(document.encode()).find(".//system-out")
    assert system_out is not None and system_out.text is not None
    assert "obj2 is destroyed at exit" in system_out.text


def test_junit_with_awkward_names_clashes_and_inputs(schema: xmlschema.XMLSchema) -> None:
    member = 'lib/ü<&>"\x01.so'
    result = result_of(library("dist/a&b.whl", member,
                               [(CheckRule.UNIQUE, "_Zx", "line one\nline \x1b two", "error")]),
                       library("plain/libfoo.so", None, warnings(1)))
    result = dataclasses.replace(
        result, clashes=(Clash("_ZN1a1bE", "a::b", (("a.whl", "a/x.so"), ("b.whl", "b/y.so"))),),
        errors=(InputError("dist/broken.whl", "not a zip file"),))
    document = render_junit(result)
    schema.validate(document)
    cases = {(c.suite, c.name): c for c in read_like_gitlab(document)}
    assert cases["dist/a&b.whl", 'lib/ü<&>"\\x01.so'].message == "line one\nline \\x1b two"
    assert cases["(files)", "plain/libfoo.so"].status == "success"
    assert cases["clashes", "a::b"].status == "failed"
    assert cases["inputs", "dist/broken.whl"].message == "not a zip file"
    warn = render_junit(CheckResult(Policy(unique="warn"), clashes=result.clashes))
    assert [c.status for c in read_like_gitlab(warn)] == ["success"]


def test_junit_with_nothing_to_check(schema: xmlschema.XMLSchema) -> None:
    document = render_junit(result_of())
    schema.validate(document)
    assert read_like_gitlab(document) == []


VALID = """<testsuites>
  <testsuite name="s" tests="2" failures="1" errors="0" time="0">
    <testcase classname="s" name="a" time="0"><failure message="m" type="t">x</failure></testcase>
    <testcase classname="s" name="b" time="0.5"/>
  </testsuite>
</testsuites>"""

BROKEN = {
    "a test case without a name": ('classname="s" name="a"', 'classname="s"'),
    "a failure outside a test case": ('<testcase classname="s" name="b" time="0.5"/>',
                                      '<failure message="m">x</failure>'),
    "a suite without its count of tests": ('tests="2" ', ""),
    "a count that is not a number": ('failures="1"', 'failures="one"'),
    "two outcomes for one test case": ("</failure></testcase>",
                                       "</failure><error/></testcase>"),
    "a suite nested in a suite": ('<testcase classname="s" name="b" time="0.5"/>',
                                  '<testsuite name="t" tests="0" failures="0" errors="0" '
                                  'time="0"/>'),
    "a root that is not testsuites": ("<testsuites>", "<testsuitez>"),
    "a negative time": ('time="0.5"', 'time="-1"'),
}


def test_the_schema_accepts_a_plain_report(schema: xmlschema.XMLSchema) -> None:
    schema.validate(VALID)


@pytest.mark.parametrize("flaw", sorted(BROKEN))
def test_the_schema_rejects(schema: xmlschema.XMLSchema, flaw: str) -> None:
    old, new = BROKEN[flaw]
    assert old in VALID
    broken = VALID.replace(old, new, 1)
    if flaw == "a root that is not testsuites":
        broken = broken.replace("</testsuites>", "</testsuitez>")
    assert not schema.is_valid(broken)
