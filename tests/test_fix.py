"""`elfpatch fix` must not break the ELF file or the program, by oracles that share no code.

For each build variant of the test library (GNU, System V and both hash
tables, packed relative relocations, stripped, without section headers,
linked by gold, with --emit-relocs, and built for aarch64, i686 and s390x)
and each mode, the library is fixed into a new file, then: readelf warns
about nothing new, GNU ld and gold link a program against it silently and
the program prints what it printed before (lazy and immediate binding),
eu-elflint reports nothing new, LIEF and pyelftools read the same bindings
and relocation targets as elfpatch, and only the bytes of the symbol,
relocation, version and hash tables (and section headers) change.  Then two
copies are loaded with dlopen, as the bug reports do, and compared with
-fno-gnu-unique builds; a set of libraries that share symbols is fixed
together; and the fix is broken on purpose, step by step, to show that
verification refuses it and that the oracles would have seen it.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _build import require_tool
from _fixbuild import (
    EXPECTED_UNIQUE,
    HOST,
    LIBRARY,
    MODES,
    PROGRAM,
    PROGRAM_OUTPUT,
    VARIANTS,
    Variant,
    built_library,
    can_run,
    changed_offsets,
    changes_by_name,
    elfpatch_relocations,
    elfpatch_symbols,
    file_regions,
    fix,
    lief_relocations,
    lief_symbols,
    new_elflint_lines,
    pyelftools_dynamic_symbols,
    pyelftools_relocations,
    pyelftools_static_relocations,
    pyelftools_symbols,
    readelf_warnings,
    region_of,
    run_program,
    temporary_files,
    tool_prefix,
    toolchain,
    variant_input,
)
from elfpatch.fixtures import build

from elfpatch.patch.reorder import Edit, Reordering
from elfpatch.service import fix as fix_module

# Sections whose bytes a LOCAL fix may change, by type (names differ per machine).
TOUCHABLE_TYPES = {"SHT_DYNSYM", "SHT_SYMTAB", "SHT_RELA", "SHT_REL", "SHT_GNU_versym",
                   "SHT_GNU_HASH", "SHT_HASH", ""}  # "" is the section header table


@dataclass(frozen=True)
class Fixed:
    variant: Variant
    mode: str
    source: Path  # the input, as given to elfpatch
    layout: Path  # a file with the same bytes and intact section headers
    output: Path
    document: dict[str, Any]


_FIXED: dict[tuple[str, str], Fixed] = {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fix")


def fixed(variant_name: str, mode: str, workdir: Path) -> Fixed:
    """The variant's library fixed in ``mode`` into a new file (once per module)."""
    key = (variant_name, mode)
    if key not in _FIXED:
        variant = VARIANTS[variant_name]
        source = variant_input(variant, workdir / variant_name / "input")
        output = workdir / variant_name / mode / source.name
        output.parent.mkdir(parents=True)
        run = fix("--to", mode, "-o", output, source)
        assert run.exit_code == 0, run.stderr
        assert run.stderr == ""
        layout = built_library(variant) if variant.alteration == "no-section-headers" else source
        _FIXED[key] = Fixed(variant, mode, source, layout, output, run.document or {})
    return _FIXED[key]


CASES = [(v, m) for v in VARIANTS for m in MODES]
parametrize_cases = pytest.mark.parametrize(("variant", "mode"), CASES,
                                            ids=[f"{v}-{m}" for v, m in CASES])


@parametrize_cases
def test_every_unique_symbol_is_rewritten(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    before = {n for (t, _i), (n, b, _v) in elfpatch_symbols(done.source).items()
              if t == ".dynsym" and b == "UNIQUE"}
    assert before >= EXPECTED_UNIQUE, EXPECTED_UNIQUE - before
    target = {"local": ("LOCAL", "DEFAULT"), "weak-hidden": ("WEAK", "HIDDEN"),
              "global": ("GLOBAL", "DEFAULT")}[mode]
    after = elfpatch_symbols(done.output)
    for (table, _index), (name, binding, visibility) in after.items():
        assert binding != "UNIQUE", (table, name)
        if name in before:
            assert (binding, visibility) == target, (table, name)
    changes = done.document["libraries"][0]["changes"]
    tables = 1 if done.variant.alteration else 2  # stripped/headerless: .dynsym only
    assert len(changes) == tables * len(before)


@parametrize_cases
def test_readelf_warns_about_nothing_new(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    assert readelf_warnings(done.output) == readelf_warnings(done.source)


def program_for(variant: Variant, folder: Path, linker: str) -> Path:
    """main.c linked with ``linker`` against the libfixme.so in ``folder``; stderr must be empty."""
    chain = toolchain(variant.machine)
    require_tool(f"{tool_prefix(chain)}ld.{linker}")
    source = folder / "main.c"
    source.write_text(PROGRAM["main.c"])
    program = folder / f"main-{linker}"
    link = subprocess.run([chain.cc, f"-fuse-ld={linker}", "-o", program.name, "main.c", "-L.",
                           "-lfixme", "-Wl,-rpath,$ORIGIN"], cwd=folder, capture_output=True,
                          text=True)
    assert link.returncode == 0, link.stderr
    assert link.stderr == "" and link.stdout == "", f"{linker} said: {link.stderr}"
    return program


def assert_program_output(variant: Variant, program: Path) -> None:
    chain = toolchain(variant.machine)
    if not can_run(chain):
        pytest.skip(f"{chain.runner[0]} is not installed: linked, not run")
    for env in ({}, {"LD_BIND_NOW": "1"}):
        run = run_program(chain, program, env=env)
        assert (run.returncode, run.stdout) == (0, PROGRAM_OUTPUT), (env, run.stderr)


@pytest.mark.parametrize("linker", ["bfd", "gold"])
@parametrize_cases
def test_program_links_silently_and_runs(variant: str, mode: str, linker: str,
                                         workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    folder = done.output.parent / f"link-{linker}"
    folder.mkdir()
    if done.variant.linkable:
        shutil.copy(done.output, folder / "libfixme.so")
        program = program_for(done.variant, folder, linker)
    else:  # link against the intact build, then run against the fixed file
        shutil.copy(done.layout, folder / "libfixme.so")
        program = program_for(done.variant, folder, linker)
        shutil.copy(done.output, folder / "libfixme.so")
    assert_program_output(done.variant, program)


@parametrize_cases
def test_elflint_reports_nothing_new(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    assert new_elflint_lines(done.source, done.output, mode) == set()


@parametrize_cases
def test_lief_and_pyelftools_agree_with_elfpatch(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    ours = elfpatch_symbols(done.output)
    assert pyelftools_symbols(done.output) == ours
    assert pyelftools_dynamic_symbols(done.output) == {k: v for k, v in ours.items()
                                                       if k[0] == ".dynsym"}
    assert lief_symbols(done.output) == ours
    for read in (elfpatch_relocations, pyelftools_relocations, lief_relocations):
        before, after = read(done.source), read(done.output)
        assert before, read.__name__
        assert after == before, read.__name__
    static = pyelftools_static_relocations(done.source)
    assert bool(static) == ("--emit-relocs" in " ".join(done.variant.flags))
    assert pyelftools_static_relocations(done.output) == static


@parametrize_cases
def test_only_table_bytes_change(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    before, after = done.source.read_bytes(), done.output.read_bytes()
    assert len(after) == len(before)
    regions = file_regions(done.layout)
    changed = changed_offsets(before, after)
    assert changed
    outside = {offset: region_of(regions, offset) for offset in changed}
    wrong = {hex(o): r.name if r else None for o, r in outside.items()
             if r is None or r.type not in TOUCHABLE_TYPES}
    assert not wrong, wrong
    if mode != "local":  # only st_info and st_other of symbol entries
        fields = (4, 5) if before[4] == 2 else (12, 13)
        for offset, region in outside.items():
            assert region is not None and region.type in ("SHT_DYNSYM", "SHT_SYMTAB")
            assert (offset - region.start) % region.entsize in fields, hex(offset)


@parametrize_cases
def test_fixing_again_changes_nothing(variant: str, mode: str, workdir: Path,
                                      tmp_path: Path) -> None:
    done = fixed(variant, mode, workdir)
    again = tmp_path / done.output.name
    shutil.copy2(done.output, again)
    before, mtime = again.read_bytes(), again.stat().st_mtime_ns
    run = fix("--to", mode, "--in-place", again)
    assert run.exit_code == 0, run.stderr
    library = run.document["libraries"][0] if run.document else {}
    assert library["changes"] == [] and library["written"] is False
    assert again.read_bytes() == before and again.stat().st_mtime_ns == mtime
    assert sorted(tmp_path.iterdir()) == [again]


@parametrize_cases
def test_dry_run_writes_nothing(variant: str, mode: str, workdir: Path, tmp_path: Path) -> None:
    done = fixed(variant, mode, workdir)
    copy = tmp_path / done.source.name
    shutil.copy2(done.source, copy)
    before = copy.read_bytes()
    for target in (("--in-place",), ("-o", str(tmp_path / "out.so"))):
        run = fix("--to", mode, "--dry-run", *target, copy)
        assert run.exit_code == 0, run.stderr
        assert run.document is not None and run.document["dry_run"] is True
        planned = run.document["libraries"][0]
        assert planned["changes"] == done.document["libraries"][0]["changes"]
        assert planned["written"] is False and planned["destination"] is None
        assert copy.read_bytes() == before
        assert sorted(tmp_path.iterdir()) == [copy]


@pytest.mark.parametrize("mode", MODES)
def test_in_place_through_a_symlink_keeps_link_and_mode(mode: str, workdir: Path,
                                                        tmp_path: Path) -> None:
    done = fixed("default", mode, workdir)
    real = tmp_path / "libfixme.so.1"
    shutil.copy(done.source, real)
    real.chmod(0o751)
    link = tmp_path / "libfixme.so"
    link.symlink_to(real.name)
    run = fix("--to", mode, "--in-place", link)
    assert run.exit_code == 0, run.stderr
    assert link.is_symlink() and link.readlink() == Path(real.name)
    assert stat.S_IMODE(real.stat().st_mode) == 0o751
    assert real.read_bytes() == done.output.read_bytes()  # the same bytes as with -o
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libfixme.so", "libfixme.so.1"]


ONLY_UNIQUE = {"only.cpp": """
inline int& counter() { static int value = 0; return value; }
__attribute__((visibility("hidden"))) int bump() { return ++counter(); }
"""}

LOOKUP = """
import ctypes, sys
library = ctypes.CDLL(sys.argv[1])
try:
    getattr(library, "_ZZ7countervE5value")
    print("exported")
except AttributeError:
    print("not exported")
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_library_whose_only_export_is_unique(mode: str, tmp_path: Path) -> None:
    """Made LOCAL, its one hashed symbol leaves both hash tables with nothing to hash."""
    toolchain("host")
    source = build.build_shared(ONLY_UNIQUE, "libonly", ["-O1", "-Wl,--hash-style=both"])
    output = tmp_path / source.name
    run = fix("--to", mode, "-o", output, source)
    assert run.exit_code == 0, run.stderr
    assert readelf_warnings(output) == readelf_warnings(source) == []
    assert new_elflint_lines(source, output, mode) == set()
    assert pyelftools_dynamic_symbols(output) == {k: v for k, v in elfpatch_symbols(output).items()
                                                  if k[0] == ".dynsym"}
    lookup = subprocess.run([sys.executable, "-c", LOOKUP, str(output)], capture_output=True,
                            text=True)
    assert lookup.stdout == ("exported\n" if mode == "global" else "not exported\n"), \
        lookup.stderr


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
        pytest.skip(f"{chain.runner[0]} is not installed")
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


# -- a broken fix is caught ----------------------------------------------------------

Dropper = Callable[[Edit], bool]
DYNAMIC_RELOCATIONS = (".rela.dyn", ".rela.plt")
# step -> (mode, variant, which edits to skip)
BROKEN_STEPS: dict[str, tuple[str, str, Dropper]] = {
    "symbol order": ("local", "both-hash", lambda e: e.what == ".dynsym entries"),
    "symtab order": ("local", "both-hash", lambda e: e.what == ".symtab entries"),
    "sh_info": ("local", "both-hash", lambda e: e.what == ".dynsym sh_info"),
    "relocation renumbering": ("local", "both-hash",
                               lambda e: e.what.endswith("symbol indices")),
    "static relocation renumbering": (
        "local", "emit-relocs",
        lambda e: e.what.endswith("symbol indices") and not e.what.startswith(DYNAMIC_RELOCATIONS)),
    "version table": ("local", "both-hash", lambda e: e.what == ".gnu.version"),
    "GNU hash buckets": ("local", "both-hash", lambda e: e.what == ".gnu.hash buckets"),
    "GNU hash chains": ("local", "both-hash", lambda e: e.what == ".gnu.hash chains"),
    "GNU hash symoffset": ("local", "both-hash", lambda e: e.what == ".gnu.hash symoffset"),
    "GNU hash Bloom filter": ("local", "both-hash",
                              lambda e: e.what == ".gnu.hash Bloom filter"),
    "System V hash buckets": ("local", "both-hash", lambda e: e.what == ".hash buckets"),
    "System V hash chains": ("local", "both-hash", lambda e: e.what == ".hash chains"),
    "binding bytes": ("weak-hidden", "both-hash", lambda e: e.what.startswith(".dynsym symbol")),
}


def break_step(monkeypatch: pytest.MonkeyPatch, drop: Dropper) -> None:
    """Make the writer skip the edits ``drop`` selects (and insist it had some to skip)."""
    real = fix_module.plan_edits

    def plan_edits_skipping(elf: Any, plan: Any) -> list[Edit]:
        edits = real(elf, plan)
        kept = [e for e in edits if not drop(e)]
        assert len(kept) < len(edits), "the step to skip produced no edit"
        return kept

    monkeypatch.setattr(fix_module, "plan_edits", plan_edits_skipping)


@pytest.mark.parametrize("step", sorted(BROKEN_STEPS))
def test_verification_rejects_a_broken_fix(step: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    mode, variant, drop = BROKEN_STEPS[step]
    source = tmp_path / "libfixme.so"
    shutil.copy2(built_library(VARIANTS[variant]), source)
    original = source.read_bytes()
    break_step(monkeypatch, drop)
    for target in (("-o", str(tmp_path / "out" / "libfixme.so")), ("--in-place",)):
        run = fix("--to", mode, *target, source)
        assert run.exit_code == 2, run.stdout
        assert run.document is not None
        errors = [e["error"] for e in run.document["errors"]]
        assert len(errors) == 1 and "verification" in errors[0], errors
        assert "original left untouched" in errors[0]
        assert source.read_bytes() == original
        assert not (tmp_path / "out" / "libfixme.so").exists()
        assert temporary_files(tmp_path) == []


@pytest.mark.parametrize("step", sorted(BROKEN_STEPS))
def test_the_oracles_see_each_broken_step(step: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """What verification guards against is real: unverified, the skip breaks the file."""
    mode, variant, drop = BROKEN_STEPS[step]
    source = built_library(VARIANTS[variant])
    break_step(monkeypatch, drop)
    monkeypatch.setattr(fix_module, "verify_output", lambda *args: None)
    broken = tmp_path / "libfixme.so"
    assert fix("--to", mode, "-o", broken, source).exit_code == 0
    problems = [*readelf_warnings(broken), *new_elflint_lines(source, broken, mode)]
    for read in (elfpatch_relocations, pyelftools_static_relocations):
        if read(broken) != read(source):
            problems.append(f"{read.__name__}: a relocation names another symbol")
    if any(b == "UNIQUE" for _n, b, _v in elfpatch_symbols(broken).values()):
        problems.append("still UNIQUE")
    assert problems, f"skipping {step} went unnoticed by every oracle"


def test_reordering_mapping_is_the_inverse_of_the_order() -> None:
    """The renumbering every index user relies on, checked on many shapes against each other."""
    for count in range(1, 12):
        for first in range(1, count + 1):
            for mask in range(1 << (count - first)):
                moved = tuple(first + i for i in range(count - first) if mask >> i & 1)
                r = Reordering(count, first, moved)
                order = r.order()
                assert sorted(order) == list(range(count))
                mapping = list(r.mapping())
                assert [mapping[old] for old in order] == list(range(count))
                assert mapping == [r.new_index(i) for i in range(count)]
                assert all(r.new_index(i) < r.new_first_global for i in moved)


# -- a set of libraries ----------------------------------------------------------------

CROSS = {
    "registry.h": """
#pragma once
#include <string>
template <class T> struct Registry {
    static int count;
    static std::string label;
    static int bump() { return ++count; }
};
""",
    "base.cpp": """
#include "registry.h"
template <class T> int Registry<T>::count = 0;
template <class T> std::string Registry<T>::label = "registry" + std::to_string(sizeof(T));
template struct Registry<int>;
inline int& private_counter() { static int value = 0; return value; }
extern "C" int base_private_bump() { return ++private_counter(); }
extern "C" int base_count() { return Registry<int>::count; }
""",
    "user.cpp": """
#include "registry.h"
extern template struct Registry<int>;
extern "C" int user_bump() { return Registry<int>::bump(); }
extern "C" const char* user_label() { return Registry<int>::label.c_str(); }
""",
    "host.cpp": """
#include <dlfcn.h>
#include <cstdio>
int main() {
    void* user = dlopen("./libuser.so", RTLD_NOW | RTLD_LOCAL);
    if (!user) { std::printf("error=%s\\n", dlerror()); return 1; }
    void* base = dlopen("./libbase.so", RTLD_NOW | RTLD_LOCAL);
    auto bump = reinterpret_cast<int (*)()>(dlsym(user, "user_bump"));
    auto label = reinterpret_cast<const char* (*)()>(dlsym(user, "user_label"));
    auto count = reinterpret_cast<int (*)()>(dlsym(base, "base_count"));
    auto mine = reinterpret_cast<int (*)()>(dlsym(base, "base_private_bump"));
    bump();
    bump();
    std::printf("user_bumps=2 base_sees=%d label=%s private=%d\\n", count(), label(), mine());
    return 0;
}
""",
}
CROSS_OUTPUT = "user_bumps=2 base_sees=2 label=registry4 private=1\n"
COUNT = "_ZN8RegistryIiE5countE"
LABEL = "_ZN8RegistryIiE5labelB5cxx11E"
LABEL_GUARD = "_ZGVN8RegistryIiE5labelB5cxx11E"
PRIVATE = "_ZZ15private_countervE5value"


def cross_pair(folder: Path, *flags: str) -> Path:
    """libbase.so, libuser.so (needs libbase.so) and a host dlopening libuser.so."""
    toolchain("host")
    built = build.build_targets(CROSS, [
        build.Target("libbase.so", ("base.cpp",), shared=True),
        build.Target("libuser.so", ("user.cpp",), shared=True, libraries=("libbase.so",)),
        build.Target("host", ("host.cpp",), link=("dl",)),
    ], ["-O2", "-g0", *flags], label="fix-cross")
    shutil.copytree(built, folder)
    (folder / ".complete").unlink()
    return folder


def run_cross(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["./host"], cwd=folder, capture_output=True, text=True, timeout=60)


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


def test_strict_refuses_and_writes_nothing(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    out = tmp_path / "out"
    for target in (("--in-place",), ("-o", str(out))):
        run = fix("--strict", *target, folder / "libbase.so", folder / "libuser.so",
                  as_json=False)
        assert run.exit_code == 1
        assert "Registry<int>::count" in run.stdout + run.stderr
        assert "libuser.so" in run.stdout + run.stderr
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
        assert not out.exists()


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
