"""Reports people read: the exit-time-destructor census, coverage as numbers, the policy.

- Text output puts exit-time destructors in one line (how many, in how many
  translation units, ``<iostream>``'s init objects apart) and names the
  objects read at exit; ``-v`` groups them per translation unit and lists
  every one, as the JSON does.
- Each object reports how many initializers and destructors were followed
  to the end, and why the others stopped.
- ``check`` can ask for exit-time destructors only where they matter
  (``exit-time-destructors-scope = "read-at-exit"``), and gates
  destruction-order errors on their own (``destruction-order``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.inits import DESTRUCTOR, inits_of, risks, scenario, toolchain

from elfpatch.analysis.check import CheckRule
from elfpatch.analysis.policy import policy_from_table
from elfpatch.errors import InputError
from elfpatch.service.check import run_check

MANY = {
    "many.cpp": "#include <string>\n" + "".join(
        f"std::string many_{k}(30, 'm');\n" for k in range(12)),
    "few.cpp": "#include <string>\nstd::string few_0(30, 'f');\nstd::string few_1(30, 'f');\n",
    "main.cpp": "int main() { return 0; }\n",
}


@pytest.fixture(scope="module")
def many_destructors() -> Path:
    return build.build_executable(MANY, "many_destructors", ["-O2"],
                                  toolchain=toolchain("x86_64"))


def test_text_groups_exit_time_destructors(many_destructors: Path) -> None:
    result = run_elfpatch("inits", str(many_destructors))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "risks: 0 errors, 0 warnings; 14 objects destroyed at exit" in text
    assert "14 objects destroyed at exit (14 in 2 translation units); none read at exit" in text
    assert text.count("warning: exit-time-destructor") == 1
    assert "many.cpp: 12" not in text  # one census line; -v groups and lists them
    verbose = run_elfpatch("inits", "-v", str(many_destructors)).stdout
    assert "many.cpp: 12 (many_0[abi:cxx11], many_1[abi:cxx11], many_2[abi:cxx11], …)" in verbose
    assert "few.cpp: 2 (few_0[abi:cxx11], few_1[abi:cxx11])" in verbose
    assert verbose.count("warning: exit-time-destructor") == 1 + 14
    record = inits_of(many_destructors)
    assert len(risks(record, DESTRUCTOR)) == 14  # the JSON keeps every one


def test_text_names_what_is_read_at_exit() -> None:
    text = run_elfpatch("inits", str(scenario("destruction_order").path("buggy"))).stdout
    assert "where destroying them matters: the_logger" in text
    assert "error: destruction-order" in text


# Four TUs read one string through one function before its TU builds it: one finding,
# reached from four initializers (ZDoom's console commands each register through one).
REPEATED = {
    **{f"reader{k}.cpp": (f"#include <cstddef>\nstd::size_t config_size();\n"
                          f"std::size_t seen{k} = config_size();\n") for k in range(4)},
    "access.cpp": ("#include <cstddef>\n#include <string>\nextern std::string config;\n"
                   "std::size_t config_size() { return config.size(); }\n"),
    "config.cpp": "#include <string>\nstd::string config(40, 'c');\n",
    "main.cpp": "int main() { return 0; }\n",
}


def test_text_gives_a_finding_reached_from_many_initializers_once() -> None:
    program = build.build_executable(REPEATED, "repeated", ["-O2"],
                                     toolchain=toolchain("x86_64"))
    record = inits_of(program)
    errors = risks(record, "init-order")
    assert len(errors) == 4 and {r["object"] for r in errors} == {"_Z6configB5cxx11"}
    text = run_elfpatch("inits", str(program)).stdout
    assert "risks: 4 errors" in text
    assert text.count("error: init-order") == 1
    assert ("and 3 more of this finding, reached from other code: "
            "_GLOBAL__sub_I_seen1, _GLOBAL__sub_I_seen2, _GLOBAL__sub_I_seen3 (-v lists each)"
            ) in text
    verbose = run_elfpatch("inits", "-v", str(program)).stdout
    assert verbose.count("error: init-order") == 4 and "more of this finding" not in verbose


# -- coverage -------------------------------------------------------------------------------

COVERAGE = {
    # A call through a function pointer: where it goes is not in the file.
    "hooked.cpp": ("extern int (*volatile hook)();\n"
                   "static int call_hook() { return hook(); }\n"
                   "int hooked = call_hook();\n"),
    # A chain of calls deeper than the walk follows.
    "deep.cpp": "__attribute__((noinline)) int level8(int n) { return n; }\n" + "".join(
        f"__attribute__((noinline)) int level{k}(int n) {{ return n ? level{k + 1}(n - 1) + 1"
        f" : 0; }}\n" for k in range(7, -1, -1))
    + "extern volatile int depth;\nint deep = level0(depth);\n",
    "plain.cpp": "extern volatile int depth;\nint plain = depth * 2;\n",
    "main.cpp": ("int (*volatile hook)() = nullptr;\nvolatile int depth = 3;\n"
                 "int main() { return 0; }\n"),
}


def test_coverage_counts_and_reasons() -> None:
    program = build.build_executable(COVERAGE, "coverage", ["-O2"],
                                     toolchain=toolchain("x86_64"))
    record = inits_of(program)
    assert record["coverage"] == {
        "initializers": {"followed": 3, "complete": 1},
        "destructors": {"followed": 0, "complete": 0},
        "stopped": {"call depth": 1, "indirect call": 1},
        "constant_branches": {"decided": 0, "undecided": 0},
    }
    assert record["effects_complete"] is False
    text = run_elfpatch("inits", str(program)).stdout
    assert ("code followed to the end: 1 of 3 initializers, 0 of 0 destructors; stopped at: "
            "call depth (1), indirect call (1)") in text


def test_list_only_reads_no_code() -> None:
    program = scenario("destruction_order").path("buggy")
    document = json.loads(run_elfpatch("inits", "--json", "--list-only", str(program)).stdout)
    (record,) = document["files"]
    assert record["risks"] == [] and "coverage" not in record
    assert [e["translation_unit"] for e in record["initializers"]][2:] == ["service.cpp",
                                                                           "logger.cpp"]
    schema = json.loads(resources.files("elfpatch.report").joinpath("inits.schema.json")
                        .read_text())
    jsonschema.validate(document, schema)
    text = run_elfpatch("inits", "--list-only", str(program)).stdout
    assert "machine code not read" in text


# -- the check policy ----------------------------------------------------------------------

def findings(path: Path, **table: str) -> list[tuple[str, str, str]]:
    policy = policy_from_table({key.replace("_", "-"): value for key, value in table.items()},
                               "test")
    result = run_check([str(path)], policy, set())
    return [(f.rule, f.subject, f.level) for f in result.findings]


def test_exit_time_destructors_only_where_they_matter() -> None:
    buggy = scenario("destruction_order").path("buggy")
    every = findings(buggy, exit_time_destructors="error")
    assert {(rule, subject) for rule, subject, _level in every} >= {
        (CheckRule.EXIT_DESTRUCTOR, "the_logger"), (CheckRule.EXIT_DESTRUCTOR, "the_service")}
    matter = findings(buggy, exit_time_destructors="error",
                      exit_time_destructors_scope="read-at-exit")
    assert [(rule, subject) for rule, subject, _level in matter
            if rule == CheckRule.EXIT_DESTRUCTOR] == [(CheckRule.EXIT_DESTRUCTOR, "the_logger")]


def test_destruction_order_has_its_own_level() -> None:
    buggy = scenario("destruction_order").path("buggy")
    gated = findings(buggy, destruction_order="error", exit_time_destructors="ignore")
    assert [(rule, level) for rule, _subject, level in gated] == [
        (CheckRule.DESTRUCTION_ORDER, "error")]
    assert gated[0][1].endswith("->the_logger")
    assert findings(buggy, destruction_order="ignore", exit_time_destructors="ignore") == []


def test_unknown_scope_is_refused() -> None:
    with pytest.raises(InputError, match="exit-time-destructors-scope"):
        policy_from_table({"exit-time-destructors-scope": "some"}, "pyproject.toml")


@pytest.mark.parametrize(("fixture", "program", "options"), [
    ("lto_init_order", "lto_ba", ()),  # parts, part positions in risks
    ("exit_use_after_free", "freed_first", ()),  # destruction-order, read_at_exit
    ("exit_use_after_free", "app", ("--closure",)),  # cross-object destruction order
])
def test_new_fields_match_the_schema(fixture: str, program: str,
                                     options: tuple[str, ...]) -> None:
    schema = json.loads(resources.files("elfpatch.report").joinpath("inits.schema.json")
                        .read_text())
    result = run_elfpatch("inits", "--json", *options, str(scenario(fixture).path(program)))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, schema)
    kinds = {r["kind"] for f in document["files"] for r in f["risks"]}
    assert kinds & {"init-order", "destruction-order", "cross-object-destruction-order"}
    assert all("coverage" in f for f in document["files"])


IOSTREAM = {
    "a.cpp": "#include <iostream>\nvoid a() { std::cout << 'a'; }\n",
    "b.cpp": "#include <iostream>\n#include <string>\nstd::string b_name(30, 'b');\n",
    "main.cpp": "int main() { return 0; }\n",
}


def test_the_census_sets_iostream_apart() -> None:
    """gcc 12's <iostream> gives each TU including it a std::ios_base::Init object whose
    destructor is registered at exit: counted apart from the program's own objects."""
    program = build.build_executable(IOSTREAM, "iostream_census", ["-O2", "-std=c++17"],
                                     toolchain=toolchain("x86_64"))
    record = inits_of(program)
    ios = [r for r in risks(record, DESTRUCTOR) if "ios_base::Init" in r["message"]]
    if not ios:
        pytest.skip("this C++ runtime's <iostream> registers no init object per TU")
    text = run_elfpatch("inits", str(program)).stdout
    own = len(risks(record, DESTRUCTOR)) - len(ios)
    assert f"({own} in 1 translation unit, {len(ios)} <iostream> init object" in text


def test_the_coverage_line_says_what_is_not_tracked() -> None:
    text = run_elfpatch("inits", str(scenario("destruction_order").path("buggy"))).stdout
    assert "not tracked: globals reached through pointers kept in data" in text
