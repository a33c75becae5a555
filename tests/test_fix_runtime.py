"""What programs do with a library before and after `elfpatch fix`.

The oracle is the same program built with -fno-gnu-unique: a fixed library
must behave like it.  Two copies of the fix tests' library (VERSION 1 and 2)
are loaded with dlopen and RTLD_LOCAL, as the bug reports do, on x86-64 and
aarch64; every fixture scenario that carries UNIQUE symbols is fixed in each
mode and run; a library set whose members use each other's template members
is fixed together, blindly and with --force; a singleton shared on purpose
stays shared.  Each comparison is also shown able to fail: the unfixed
builds differ from the oracle.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.fixlib import (
    COUNT,
    CROSS_OUTPUT,
    HOST,
    LABEL,
    LABEL_GUARD,
    LIBRARY,
    MODES,
    PRIVATE,
    can_run,
    changes_by_name,
    cross_pair,
    elfpatch_symbols,
    fix,
    run_cross,
    run_program,
    toolchain,
)
from support.readelf import readelf_unique_names

# -- two copies loaded with dlopen --------------------------------------------------

PLATFORMS = ["host", "aarch64"]


def plugin_pair(machine: str, folder: Path, *flags: str) -> Path:
    """libfixv1.so and libfixv2.so (VERSION 1 and 2) and the host, copied to ``folder``."""
    chain = toolchain(machine)
    folder.mkdir(parents=True)
    for version in (1, 2):
        library = build.build_shared(LIBRARY, f"libfixv{version}",
                                     ["-O1", "-g0", f"-DVERSION={version}", *flags],
                                     toolchain=chain)
        shutil.copy(library, folder)
    shutil.copy(build.build_executable(HOST, "fixhost", ["-O1"], toolchain=chain, link=("dl",)),
                folder)
    return folder


def run_host(machine: str, folder: Path) -> str:
    chain = toolchain(machine)
    if not can_run(chain):
        pytest.skip(f"{chain.runner[0]} is not installed (apt-get install qemu-user)")
    run = run_program(chain, folder / "fixhost", "./libfixv1.so", "./libfixv2.so")
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def values(output: str) -> dict[str, str]:
    """{"copy1": "label=v1 names=...", "copy1 unloaded": "1", ...} from the host's output."""
    found = {}
    for line in output.splitlines():
        copy, rest = line.split(" ", 1)
        if rest.startswith("unloaded="):
            found[f"{copy} unloaded"] = rest.split("=")[1]
        else:
            found[copy] = rest
    return found


@pytest.mark.parametrize("machine", PLATFORMS)
def test_unfixed_copies_share_and_never_unload(machine: str, tmp_path: Path) -> None:
    """The bug, and the oracle's ability to see it: the second copy sees the first's values."""
    seen = values(run_host(machine, plugin_pair(machine, tmp_path / "as-built")))
    assert seen["copy1"] == "label=v1 names=table1,table1,hello1 total=160 bump=1 tls=8"
    assert seen["copy2"] == "label=v1 names=table1,table1,hello1 total=160 bump=2 tls=9"
    assert seen["copy1 unloaded"] == "0"  # marked NODELETE for entering unique symbols
    private = values(run_host(machine, plugin_pair(machine, tmp_path / "no-gnu-unique",
                                                   "-fno-gnu-unique")))
    assert private["copy2"] == "label=v2 names=table2,table2,hello2 total=180 bump=1 tls=15"
    assert private["copy1 unloaded"] == private["copy2 unloaded"] == "1"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("machine", PLATFORMS)
def test_fixed_copies_behave_like_no_gnu_unique(machine: str, mode: str, tmp_path: Path) -> None:
    # Each plugin on its own, as plugins loaded apart are fixed: as a set, the symbols
    # both define would be kept GLOBAL as shared on purpose.
    folder = plugin_pair(machine, tmp_path / "fixed")
    target = {"local": "LOCAL", "weak-hidden": "WEAK HIDDEN", "global": "GLOBAL"}[mode]
    for name in ("libfixv1.so", "libfixv2.so"):
        run = fix("--to", mode, "--in-place", folder / name)
        assert run.exit_code == 0, run.stderr
        assert run.document is not None
        assert {c["to"] for c in run.document["libraries"][0]["changes"]} == {target}
    oracle = run_host(machine, plugin_pair(machine, tmp_path / "oracle", "-fno-gnu-unique"))
    assert run_host(machine, folder) == oracle



# -- the fixture scenarios ---------------------------------------------------------------

UNIQUE_SCENARIOS = ["dlclose_noop", "rtld_local_clash", "tls_and_template_member",
                    "cross_library_reference", "shared_singleton", "unload_exposes_bug"]


def fixed_copy(scenario: str, tmp_path: Path, *options: str) -> build.ScenarioBuild:
    """A copy of the scenario's build with all its libraries fixed as one set, in place,
    by the command line in a subprocess."""
    copy = build.build_scenario(scenario).copy_to(tmp_path / scenario)
    names = [p.name for p in copy.libraries()]
    result = run_elfpatch("fix", "--in-place", *options, *names, cwd=copy.dir)
    assert result.returncode == 0, result.stderr
    return copy


def oracle_output(scenario: str) -> str:
    return build.build_scenario(scenario, "no-gnu-unique").run().stdout


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", UNIQUE_SCENARIOS)
def test_fixed_build_behaves_like_no_gnu_unique(cxx: object, tmp_path: Path, scenario: str,
                                                mode: str) -> None:
    fixed = fixed_copy(scenario, tmp_path, "--to", mode)
    assert not any(readelf_unique_names(lib) for lib in fixed.libraries())
    assert fixed.run().stdout == oracle_output(scenario)


def test_unfixed_copy_differs_from_oracle(cxx: object, tmp_path: Path) -> None:
    """The comparison above can fail: an untouched copy does not pass it."""
    for scenario in ("dlclose_noop", "rtld_local_clash", "tls_and_template_member",
                     "unload_exposes_bug"):
        copy = build.build_scenario(scenario).copy_to(tmp_path / scenario)
        assert copy.run().stdout != oracle_output(scenario)


def test_force_localises_and_splits_the_singleton(cxx: object, tmp_path: Path) -> None:
    default = fixed_copy("shared_singleton", tmp_path / "default")
    assert default.run().stdout.strip() == "sequence=1,2,3"
    forced = fixed_copy("shared_singleton", tmp_path / "forced", "--force")
    assert forced.run().stdout.strip() == "sequence=1,1,2"


# -- a set of libraries -----------------------------------------------------------------

def test_the_user_library_really_needs_the_template_member(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    undefined = {n for (t, _i), (n, _b, _v) in elfpatch_symbols(folder / "libuser.so").items()
                 if t == ".dynsym"}
    assert COUNT in undefined and LABEL in undefined and LABEL_GUARD not in undefined
    assert run_cross(folder).stdout == CROSS_OUTPUT


def test_blind_localising_breaks_the_user_library(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    assert fix("--to", "local", "--in-place", folder / "libbase.so").exit_code == 0
    run = run_cross(folder)
    assert run.returncode == 1
    assert f"undefined symbol: {COUNT}" in run.stdout or f"undefined symbol: {LABEL}" in run.stdout


def test_fixing_the_pair_keeps_what_the_user_needs(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    run = fix("--in-place", folder / "libbase.so", folder / "libuser.so")
    assert run.exit_code == 0, run.stderr
    assert run.document is not None
    base = changes_by_name(run.document)["libbase.so"]
    for name in (COUNT, LABEL):
        assert base[name]["to"] == "GLOBAL"
        assert "libuser.so" in base[name]["reason"]
    assert base[LABEL_GUARD]["to"] == "GLOBAL"  # kept with its object
    assert LABEL in base[LABEL_GUARD]["reason"]
    assert base[PRIVATE]["to"] == "LOCAL"
    symbols = elfpatch_symbols(folder / "libbase.so")
    assert all(b != "UNIQUE" for _n, b, _v in symbols.values())
    assert run_cross(folder).stdout == CROSS_OUTPUT
    assert run_cross(cross_pair(tmp_path / "oracle", "-fno-gnu-unique")).stdout == CROSS_OUTPUT


def test_force_localises_anyway(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    run = fix("--force", "--in-place", folder / "libbase.so", folder / "libuser.so")
    assert run.exit_code == 0, run.stderr
    assert run.document is not None
    base = changes_by_name(run.document)["libbase.so"]
    assert base[COUNT]["to"] == "LOCAL" and "--force" in base[COUNT]["reason"]
    assert "undefined symbol" in run_cross(folder).stdout


SINGLETON = {
    "singleton.h": """
#pragma once
#include <string>
// One object meant to exist once in the process, shared by two libraries.
inline std::string& shared_log() { static std::string log = "start"; return log; }
""",
    "first.cpp": """
#include "singleton.h"
inline int& private_tally() { static int tally = 0; return tally; }
extern "C" const char* first_add() { ++private_tally(); return (shared_log() += ",first").c_str(); }
""",
    "second.cpp": """
#include "singleton.h"
extern "C" const char* second_add() { return (shared_log() += ",second").c_str(); }
""",
    "main.cpp": """
#include <cstdio>
extern "C" const char* first_add();
extern "C" const char* second_add();
int main() { first_add(); std::printf("%s\\n", second_add()); return 0; }
""",
}
SINGLETON_OBJECT = "_ZZ10shared_logB5cxx11vE3log"
SINGLETON_GUARD = "_ZGVZ10shared_logB5cxx11vE3log"
TALLY = "_ZZ13private_tallyvE5tally"


def test_a_shared_singleton_and_its_guard_stay_global(tmp_path: Path) -> None:
    toolchain("host")
    built = build.build_targets(SINGLETON, [
        build.Target("libfirst.so", ("first.cpp",), shared=True),
        build.Target("libsecond.so", ("second.cpp",), shared=True),
        build.Target("main", ("main.cpp",), libraries=("libfirst.so", "libsecond.so")),
    ], ["-O2", "-g0"], label="fix-singleton")
    folder = tmp_path / "singleton"
    shutil.copytree(built, folder)
    run = fix("--in-place", folder / "libfirst.so", folder / "libsecond.so")
    assert run.exit_code == 0, run.stderr
    assert run.document is not None
    changes = changes_by_name(run.document)
    for mine, other in (("libfirst.so", "libsecond.so"), ("libsecond.so", "libfirst.so")):
        for name in (SINGLETON_OBJECT, SINGLETON_GUARD):
            assert changes[mine][name]["to"] == "GLOBAL", (mine, name)
            assert other in changes[mine][name]["reason"]
    assert changes["libfirst.so"][TALLY]["to"] == "LOCAL"
    output = subprocess.run(["./main"], cwd=folder, capture_output=True, text=True).stdout
    assert output == "start,first,second\n"
