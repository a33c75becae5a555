"""Baseline keys: one per finding, the same wherever the build is, and a baseline lets
no new finding through. A library is built with one finding of each kind, its findings
recorded, then rebuilt with one more of a kind: each new one fails the gate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfpatch.fixtures import build

from elfpatch.analysis.check import Finding, LibraryCheck, distinct_keys, judge
from elfpatch.analysis.policy import Policy

SCRIPT = Path(sys.executable).with_name("elfpatch")
POLICY = """[tool.elfpatch]
unique = "error"
exit-time-destructors = "error"
init-order = "error"
destruction-order = "error"
max-initializers = { "*" = 2 }  # the library has 2 (one per translation unit)
"""


# One more translation unit, so one more initializer.
THIRD = "#include <string>\nstd::string third_text(40, 't');\n"


def sources(*more: str) -> dict[str, str]:
    """The library's sources with the ``MORE_*`` additions asked for."""
    defs = "".join(f"#define {m}\n" for m in more)
    return {
 "first.cpp": defs + r'''
#include <cstdio>
#include <string>
inline int& counter() { static int c = 0; return c; }
#ifdef MORE_UNIQUE
inline int& counter2() { static int c = 0; return c; }
#endif
extern "C" int use() { return counter()
#ifdef MORE_UNIQUE
 + counter2()
#endif
 ; }
extern std::string source_text;
std::string early_copy = source_text + "!";
#ifdef MORE_INIT_ORDER
extern std::string other_text;
std::string early_other = other_text + "?";
#endif
extern std::string name_text;
struct Reporter { ~Reporter() { std::printf("%s", name_text.c_str()); } } reporter;
#ifdef MORE_DESTRUCTION_ORDER
extern std::string last_text;
struct Closer { ~Closer() { std::printf("%s", last_text.c_str()); } } closer;
#endif
static std::string hidden_one(40, 'h');
static std::string hidden_two(41, 'h');
#ifdef MORE_UNNAMED
static std::string hidden_three(42, 'h');
#endif
extern "C" int hidden_sizes() { return hidden_one.size() + hidden_two.size()
#ifdef MORE_UNNAMED
 + hidden_three.size()
#endif
; }
''',
 "second.cpp": defs + r'''
#include <string>
std::string source_text(40, 's');
std::string name_text(40, 'n');
#ifdef MORE_INIT_ORDER
std::string other_text(40, 'o');
#endif
#ifdef MORE_DESTRUCTION_ORDER
std::string last_text(40, 'l');
#endif
#ifdef MORE_EXIT
std::string extra_text(40, 'e');
#endif
'''} | ({"third.cpp": THIRD} if "MORE_INITIALIZER" in more else {})



def library(*more: str, stripped: bool = False) -> Path:
    return build.build_shared(sources(*more), "libgate",
                              ["-O1", "-g0", *(["-s"] if stripped else [])])


def install(built: Path, folder: Path) -> Path:
    """The library where a build puts it: ``folder/lib/libgate.so``."""
    target = folder / "lib" / built.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, target)
    return folder


def gate(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    config = folder.parent / "policy.toml"
    config.write_text(POLICY)
    return subprocess.run([str(SCRIPT), "check", "--config", str(config), "--format", "json",
                           *args, str(folder)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})


def violations(run: subprocess.CompletedProcess[str]) -> list[dict[str, str]]:
    return list(json.loads(run.stdout)["violations"])


@pytest.fixture(scope="module")
def built(cxx: build.Toolchain) -> None:
    """Every variant is built once (and cached)."""


@pytest.mark.parametrize(("more", "stripped", "rule"), [
    ("MORE_UNIQUE", False, "unique"),
    ("MORE_EXIT", False, "exit-time-destructor"),
    ("MORE_INIT_ORDER", False, "init-order"),
    ("MORE_DESTRUCTION_ORDER", False, "destruction-order"),
    ("MORE_INITIALIZER", False, "max-initializers"),
    ("MORE_INIT_ORDER", True, "init-order"),  # its reader has no name: array and index
])
def test_each_new_finding_fails_past_the_baseline(more: str, stripped: bool, rule: str,
                                                  built: None, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    recorded = gate(install(library(stripped=stripped), tmp_path / "before"),
                    "--baseline", str(baseline), "--update-baseline")
    assert recorded.returncode == 0, recorded.stderr
    assert "recorded" in recorded.stderr and json.loads(recorded.stdout)["passed"] is True
    keys = json.loads(baseline.read_text())["findings"]
    assert len(keys) == len(set(keys)) >= 5
    assert {key.split("|")[1] for key in keys} >= {"unique", "exit-time-destructor",
                                                   "init-order", "destruction-order"}
    # The same build elsewhere passes: nothing of the folder is in a key.
    same = gate(install(library(stripped=stripped), tmp_path / "moved" / "elsewhere"),
                "--baseline", str(baseline))
    assert same.returncode == 0, (same.stdout, same.stderr)
    grown = gate(install(library(more, stripped=stripped), tmp_path / "after"),
                 "--baseline", str(baseline))
    assert grown.returncode == 1, grown.stderr
    new = violations(grown)
    # (a new global is also a new exit-time destructor)
    assert rule in {finding["rule"] for finding in new}, new
    assert all(finding["key"] not in keys for finding in new)


def test_update_baseline_prints_no_failure(built: None, tmp_path: Path) -> None:
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    folder = install(library(), tmp_path / "build")
    baseline = tmp_path / "baseline.json"
    run = subprocess.run([str(SCRIPT), "check", "--config", os.devnull, "--baseline",
                          str(baseline), "--update-baseline", str(folder)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 0, run.stderr
    assert "FAILED" not in run.stdout and "check passed" in run.stdout
    assert "in the baseline" in run.stdout and "recorded 1 error findings" in run.stderr


def test_a_library_given_as_a_file_is_keyed_by_its_name(built: None, tmp_path: Path) -> None:
    one = install(library(), tmp_path / "a") / "lib" / "libgate.so"
    other = install(library(), tmp_path / "b" / "c") / "lib" / "libgate.so"
    keys = [{v["key"] for v in violations(gate(path.parent, str(path)))}
            for path in (one, other)]
    assert keys[0] == keys[1] and all(key.startswith("lib/libgate.so|") or
                                      key.startswith("libgate.so|") for key in keys[0])


def test_a_version_1_baseline_is_refused(built: None, tmp_path: Path) -> None:
    baseline = tmp_path / "old.json"
    baseline.write_text('{"version": 1, "findings": []}')
    run = gate(install(library(), tmp_path / "build"), "--baseline", str(baseline))
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "--update-baseline" in run.stderr


# -- keys are never shared ----------------------------------------------------------------

def test_repeated_keys_are_numbered() -> None:
    assert distinct_keys(["a", "b", "a", "a"]) == ["a", "b", "a#2", "a#3"]


def test_two_findings_alike_are_two_keys(built: None) -> None:
    """Two exit-time destructors of objects without a name or an address (the worst case):
    a baseline holding one does not accept the other."""
    from elfpatch.elf.source import ElfSource
    from elfpatch.service.check import gather_facts

    facts = gather_facts(ElfSource(str(library())), need_effects=True)
    unnamed = ("an object registered by init_array[1]", "registers ~X for an object", False)
    twice = type(facts)(facts.source, facts.scan, facts.initializers,
                        (unnamed, unnamed), (), ())
    policy = Policy(unique="ignore", exit_time_destructors="error")
    checked: LibraryCheck = judge(twice, policy, set())
    first, second = (f.key for f in checked.findings)
    assert first != second
    again = judge(twice, policy, {first})
    assert [f.violation for f in again.findings] == [False, True]
    assert isinstance(again.findings[0], Finding)


# A static object defined in a header: one copy, with one symbol name, per translation unit.
HEADER = '#include <string>\nstatic std::string per_unit(40, \'p\');\n'


def per_unit_sources(units: int) -> dict[str, str]:
    sources = {"per_unit.h": HEADER}
    for n in range(units):
        sources[f"unit{n}.cpp"] = (f'#include "per_unit.h"\nextern "C" int size{n}() '
                                   "{ return (int)per_unit.size(); }\n")
    return sources


def test_copies_of_one_name_are_told_apart_by_their_unit(built: None) -> None:
    """Keyed by the initializer that registers each copy, not by position: a new unit
    adds a key and leaves the others as they were."""
    from elfpatch.elf.source import ElfSource
    from elfpatch.service.check import gather_facts

    policy = Policy(unique="ignore", exit_time_destructors="error")
    keys = []
    for units in (2, 3):
        library = build.build_shared(per_unit_sources(units), "libperunit", ["-O1", "-g0"])
        facts = gather_facts(ElfSource(str(library)), need_effects=True)
        keys.append({f.key for f in judge(facts, policy, set()).findings
                     if "_ZL8per_unit" in f.key})
    assert len(keys[0]) == 2 and len(keys[1]) == 3
    assert keys[0] < keys[1]
    assert all("registered by _GLOBAL__sub_I_unit" in key and "#" not in key for key in keys[1])
