"""The file `elfpatch fix` writes, judged by oracles that share no code with it.

For each build variant of the test library (GNU, System V and both hash
tables, packed relative relocations, stripped, without section headers,
linked by gold, with --emit-relocs, and built for aarch64, i686 and s390x)
and each mode, the library is fixed into a new file, then: readelf warns
about nothing new, GNU ld and gold link a program against it silently and
the program prints what it printed before (lazy and immediate binding),
eu-elflint reports nothing new, LIEF and pyelftools read the same bindings
and relocation targets as elfpatch, and only the bytes of the symbol,
relocation, version and hash tables (and section headers) change.  Then the
fix is broken on purpose, step by step, to show that verification refuses
it and that the oracles would have seen it.  What programs do with fixed
libraries is in ``test_fix_runtime.py``; the command line's options,
messages and exit codes are in ``test_fix_cli.py``.
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
from elfpatch.fixtures import build
from support.build import require_tool
from support.fixlib import (
    EXPECTED_UNIQUE,
    MODES,
    PROGRAM,
    PROGRAM_OUTPUT,
    VARIANTS,
    Variant,
    built_library,
    can_run,
    changed_offsets,
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
    region_of,
    run_program,
    temporary_files,
    tool_prefix,
    toolchain,
    variant_input,
)
from support.readelf import readelf_warnings

from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym
from elfpatch.patch import rewrite
from elfpatch.patch.edit import Edit
from elfpatch.patch.reorder import Reordering
from elfpatch.plan.bindings import FixOptions
from elfpatch.service import fix as fix_module
from elfpatch.service.fix import fix_paths

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


# The variants readelf has nothing to say about, before or after.
SILENT_VARIANTS = {"default", "sysv-hash", "both-hash", "relr"}


@parametrize_cases
def test_readelf_warns_about_nothing_new(variant: str, mode: str, workdir: Path) -> None:
    done = fixed(variant, mode, workdir)
    assert readelf_warnings(done.output) == readelf_warnings(done.source)
    if variant in SILENT_VARIANTS:
        assert readelf_warnings(done.output) == []


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
        pytest.skip(f"{chain.runner[0]} is not installed: linked, not run "
                    "(apt-get install qemu-user)")
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


def test_a_fix_that_patches_nothing_is_caught(cxx: object, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With every edit dropped, verification refuses and the file stays as built."""
    copy = build.build_scenario("rtld_local_clash").copy_to(tmp_path / "broken")
    before = copy.path("libplugin_v1.so").read_bytes()
    monkeypatch.setattr(fix_module, "plan_edits", lambda elf, plan: [])
    result = fix_paths([str(copy.path("libplugin_v1.so"))], FixOptions(), None)
    assert result.errors and "still UNIQUE" in result.errors[0].reason
    assert copy.path("libplugin_v1.so").read_bytes() == before
    assert temporary_files(copy.dir) == []
    oracle = build.build_scenario("rtld_local_clash", "no-gnu-unique").run().stdout
    assert copy.run().stdout != oracle


def test_a_fix_that_forgets_relocations_is_caught(cxx: object, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    copy = build.build_scenario("dlclose_noop").copy_to(tmp_path / "broken")
    before = copy.path("libplugin.so").read_bytes()
    monkeypatch.setattr(rewrite.reorder, "relocation_edits", lambda *args: [])
    result = fix_paths([str(copy.path("libplugin.so"))], FixOptions(), None)
    assert result.errors and "no longer names its symbol" in result.errors[0].reason
    assert copy.path("libplugin.so").read_bytes() == before


def test_in_place_local_without_reordering_is_what_ld_warns_about(tmp_path: Path) -> None:
    """The linker oracle can fail: LOCAL written in place, with no reordering, leaves
    locals after the first global, and GNU ld and readelf both complain."""
    chain = toolchain("host")
    require_tool("ld.bfd")
    source = built_library(VARIANTS["default"])
    data = bytearray(source.read_bytes())
    with ElfFile.open(source) as elf:
        table = read_dynsym(elf)
        assert table is not None
        for index in table.unique_indices():
            data[table.entry_offset(index) + table.field_offset("info")] &= 0x0F
    (tmp_path / "libfixme.so").write_bytes(bytes(data))
    assert any("local symbol" in w for w in readelf_warnings(tmp_path / "libfixme.so"))
    (tmp_path / "main.c").write_text(PROGRAM["main.c"])
    link = subprocess.run([chain.cc, "-fuse-ld=bfd", "main.c", "-L.", "-lfixme", "-o", "main"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert "local symbol" in link.stderr


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
