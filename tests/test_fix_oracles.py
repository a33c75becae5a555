"""A fixed library is valid ELF by every independent oracle: readelf, GNU ld, gold,
eu-elflint, LIEF and pyelftools; only the bytes of the tables involved change."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from conftest import require_tool, run_elfpatch
from elfpatch.fixtures import build
from test_scan import LIBRARY, remove_section_headers

from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocations import dynamic_relocation_tables
from elfpatch.elf.symbols import read_dynsym, symbol_tables

MODES = ["local", "weak-hidden", "global"]
VARIANTS = {
    "default": [],
    "sysv-hash": ["-Wl,--hash-style=sysv"],
    "both-hash": ["-Wl,--hash-style=both"],
    "relr": ["-Wl,-z,pack-relative-relocs"],
}
# Sections a fix may touch (besides the section header table).
TOUCHABLE = {".dynsym", ".symtab", ".rela.dyn", ".rela.plt", ".rel.dyn", ".rel.plt",
             ".gnu.version", ".gnu.hash", ".hash"}

PROGRAM = """
#include <cstdio>
extern "C" int use_all();
int main() { std::printf("use_all=%d\\n", use_all()); return 0; }
"""


def library(flags: list[str]) -> Path:
    return build.build_shared(LIBRARY, "libstatics", ["-O1", *flags])


def fix_to(source: Path, destination: Path, mode: str) -> Path:
    result = run_elfpatch("fix", "--to", mode, "-o", str(destination), str(source))
    assert result.returncode == 0, result.stderr
    return destination


def readelf_warnings(path: Path) -> list[str]:
    require_tool("readelf")
    result = subprocess.run(["readelf", "-W", "-a", str(path)], capture_output=True, text=True)
    return result.stderr.splitlines()


def changed_ranges(a: bytes, b: bytes) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def section_of(elf: ElfFile, offset: int) -> str:
    header_start = elf.header.shoff
    header_end = header_start + elf.header.shnum * elf.header.shentsize
    if header_start <= offset < header_end:
        return "<section headers>"
    for section in elf.sections:
        if section.occupies_file and section.offset <= offset < section.offset + section.size:
            return section.name
    return f"<outside any section at {offset:#x}>"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_output_is_valid_and_minimal(cxx: object, tmp_path: Path, variant: str,
                                     mode: str) -> None:
    source = library(VARIANTS[variant])
    fixed = fix_to(source, tmp_path / "libstatics.so", mode)
    before, after = source.read_bytes(), fixed.read_bytes()
    assert len(before) == len(after)
    assert readelf_warnings(fixed) == readelf_warnings(source) == []
    with ElfFile.open(fixed) as elf:
        touched = {section_of(elf, offset) for offset in changed_ranges(before, after)}
        assert touched <= TOUCHABLE | {"<section headers>"}, touched
        for table in symbol_tables(elf):
            assert not table.unique_indices()
    if mode != "local":
        assert touched <= {".dynsym", ".symtab"}


@pytest.mark.parametrize("linker", ["bfd", "gold"])
@pytest.mark.parametrize("mode", MODES)
def test_programs_link_without_diagnostics_and_run(cxx: object, tmp_path: Path, linker: str,
                                                   mode: str) -> None:
    require_tool(f"ld.{linker}")
    fix_to(library([]), tmp_path / "libstatics.so", mode)
    (tmp_path / "main.cpp").write_text(PROGRAM)
    link = subprocess.run(["g++", f"-fuse-ld={linker}", "main.cpp", "-L.", "-lstatics",
                           "-Wl,-rpath,$ORIGIN", "-o", "main"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert link.returncode == 0 and link.stderr == "" and link.stdout == "", link.stderr
    for bind_now in ("", "1"):
        env = {**os.environ, "LD_BIND_NOW": bind_now}
        run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert run.stdout == "use_all=17\n", run.stderr


def test_in_place_local_without_reordering_is_what_ld_warns_about(cxx: object,
                                                                  tmp_path: Path) -> None:
    """The oracle can fail: LOCAL written in place (no reordering) makes GNU ld complain."""
    source = library([])
    broken = tmp_path / "libstatics.so"
    data = bytearray(source.read_bytes())
    with ElfFile.open(source) as elf:
        table = read_dynsym(elf)
        assert table is not None
        for index in table.unique_indices():
            data[table.entry_offset(index) + table.field_offset("info")] &= 0x0F
    broken.write_bytes(bytes(data))
    assert any("local symbol" in w for w in readelf_warnings(broken))
    (tmp_path / "main.cpp").write_text(PROGRAM)
    link = subprocess.run(["g++", "-fuse-ld=bfd", "main.cpp", "-L.", "-lstatics", "-o", "main"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert "local symbol" in link.stderr


def elflint(path: Path) -> set[str]:
    require_tool("eu-elflint")
    result = subprocess.run(["eu-elflint", "--gnu-ld", str(path)], capture_output=True,
                            text=True)
    text = (result.stdout + result.stderr).replace(str(path), "FILE")
    return {line for line in text.splitlines() if line.strip() and line != "No errors"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_elflint_reports_nothing_new(cxx: object, tmp_path: Path, variant: str,
                                     mode: str) -> None:
    source = library(VARIANTS[variant])
    fixed = fix_to(source, tmp_path / "libstatics.so", mode)
    new = elflint(fixed) - elflint(source)
    if mode == "weak-hidden":
        new = {line for line in new if "non-default visibility" not in line}
    assert not new


def lief_view(path: Path) -> tuple[dict, list]:
    lief = pytest.importorskip("lief")
    binary = lief.parse(str(path))
    bindings = {(".dynsym", i): (s.name, str(s.binding).split(".")[-1])
                for i, s in enumerate(binary.dynamic_symbols)}
    relocations = sorted((r.address, r.type if isinstance(r.type, int) else int(r.type),
                          r.symbol.name if r.has_symbol else "", r.addend)
                         for r in binary.dynamic_relocations)
    return bindings, relocations


def pyelftools_view(path: Path) -> tuple[dict, list]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    with path.open("rb") as handle:
        elf = ELFFile(handle)
        bindings = {}
        for table_name in (".dynsym", ".symtab"):
            table = elf.get_section_by_name(table_name)
            for i, symbol in enumerate(table.iter_symbols() if table else []):
                bindings[(table_name, i)] = (symbol.name, symbol["st_info"]["bind"])
        dynsym = elf.get_section_by_name(".dynsym")
        relocations = []
        for section in elf.iter_sections():
            if isinstance(section, RelocationSection) and section["sh_link"] == \
                    elf.get_section_index(".dynsym"):
                for r in section.iter_relocations():
                    name = dynsym.get_symbol(r["r_info_sym"]).name if r["r_info_sym"] else ""
                    relocations.append((r["r_offset"], r["r_info_type"], name,
                                        r.entry.get("r_addend", 0)))
    return bindings, sorted(relocations)


BINDING_NAMES = {"STB_LOCAL": "LOCAL", "STB_GLOBAL": "GLOBAL", "STB_WEAK": "WEAK",
                 "STB_LOOS": "UNIQUE", "STB_GNU_UNIQUE": "UNIQUE"}


@pytest.mark.parametrize("mode", MODES)
def test_lief_and_pyelftools_agree_with_elfpatch(cxx: object, tmp_path: Path,
                                                  mode: str) -> None:
    source = library(["-Wl,--hash-style=both"])
    fixed = fix_to(source, tmp_path / "libstatics.so", mode)
    ours = {}
    with ElfFile.open(fixed) as elf:
        for table in symbol_tables(elf):
            for i in range(table.count):
                ours[(table.kind, i)] = (table.name(i),
                                         {0: "LOCAL", 1: "GLOBAL", 2: "WEAK"}.get(
                                             table.infos[i] >> 4, "UNIQUE"))
    theirs, relocations_after = pyelftools_view(fixed)
    assert {k: (n, BINDING_NAMES.get(b, b)) for k, (n, b) in theirs.items()} == ours
    _, relocations_before = pyelftools_view(source)
    assert relocations_after == relocations_before
    lief_bindings, lief_relocations_after = lief_view(fixed)
    assert {k: v for k, v in ours.items() if k[0] == ".dynsym"} == lief_bindings
    assert lief_relocations_after == lief_view(source)[1]


def test_refixing_is_a_noop(cxx: object, tmp_path: Path) -> None:
    fixed = fix_to(library([]), tmp_path / "libstatics.so", "local")
    before = fixed.read_bytes()
    mtime = fixed.stat().st_mtime_ns
    result = run_elfpatch("fix", "--in-place", "--json", str(fixed))
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["libraries"][0]["changes"] == [] and not document["libraries"][0]["written"]
    assert fixed.read_bytes() == before and fixed.stat().st_mtime_ns == mtime


def test_dry_run_writes_nothing(cxx: object, tmp_path: Path) -> None:
    copy = tmp_path / "libstatics.so"
    shutil.copy(library([]), copy)
    before = copy.read_bytes()
    result = run_elfpatch("fix", "--dry-run", str(copy))
    assert result.returncode == 0 and "dry run" in result.stdout
    assert "inline_counter()::count" in result.stdout
    assert copy.read_bytes() == before


def test_in_place_keeps_symlinks_and_mode(cxx: object, tmp_path: Path) -> None:
    real = tmp_path / "libstatics.so.1"
    shutil.copy(library([]), real)
    real.chmod(0o750)
    link = tmp_path / "libstatics.so"
    link.symlink_to(real.name)
    assert run_elfpatch("fix", "--in-place", str(link)).returncode == 0
    assert link.is_symlink() and link.readlink() == Path(real.name)
    assert stat.S_IMODE(real.stat().st_mode) == 0o750
    with ElfFile.open(real) as elf:
        assert all(not t.unique_indices() for t in symbol_tables(elf))


def test_output_folder_mirrors_input_folder(cxx: object, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    shutil.copy(library([]), tree / "a" / "b" / "libone.so")
    shutil.copy(library(["-Wl,--hash-style=sysv"]), tree / "libtwo.so")
    out = tmp_path / "out"
    result = run_elfpatch("fix", "-o", str(out), str(tree))
    assert result.returncode == 0, result.stderr
    assert (out / "a" / "b" / "libone.so").exists() and (out / "libtwo.so").exists()


def test_headerless_and_stripped_inputs(cxx: object, tmp_path: Path) -> None:
    require_tool("strip")
    stripped = tmp_path / "stripped.so"
    shutil.copy(library([]), stripped)
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    headerless = remove_section_headers(library([]), tmp_path / "headerless.so")
    # Link against the intact library (ld needs section headers), run against the fixed one.
    (tmp_path / "main.cpp").write_text(PROGRAM)
    shutil.copy(library([]), tmp_path / "libstatics.so")
    subprocess.run(["g++", "main.cpp", "-L.", "-lstatics", "-Wl,-rpath,$ORIGIN", "-o", "main"],
                   cwd=tmp_path, check=True, capture_output=True)
    for source in (stripped, headerless):
        fixed = fix_to(source, tmp_path / f"fixed-{source.name}", "local")
        with ElfFile.open(fixed) as elf:
            table = read_dynsym(elf)
            assert table is not None and not table.unique_indices()
            assert dynamic_relocation_tables(elf)
        shutil.copy(fixed, tmp_path / "libstatics.so")
        run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True)
        assert run.stdout == "use_all=17\n"


def test_interrupted_write_leaves_the_original(cxx: object, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from elfpatch.patch.plan import FixOptions
    from elfpatch.service import fix as fix_module
    from elfpatch.service.fix import fix_paths

    copy = tmp_path / "libstatics.so"
    shutil.copy(library([]), copy)
    before = copy.read_bytes()

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fix_module, "verify_output", interrupt)
    result = fix_paths([str(copy)], FixOptions(), None)
    assert result.interrupted
    assert [outcome.written for outcome in result.outcomes] == [False]
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libstatics.so"]


def test_fix_json_matches_schema_and_wheels_are_refused(cxx: object, tmp_path: Path) -> None:
    schema = json.loads(resources.files("elfpatch.report").joinpath("fix.schema.json")
                        .read_text())
    result = run_elfpatch("fix", "--dry-run", "--json", str(library([])))
    jsonschema.validate(json.loads(result.stdout), schema)
    from test_scan import make_wheel

    wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl",
                       {"pkg/x.so": library([]).read_bytes()})
    refused = run_elfpatch("fix", "--in-place", str(wheel))
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "wheel" in refused.stderr
    both = run_elfpatch("fix", "--in-place", "-o", str(tmp_path / "x"), str(library([])))
    assert both.returncode == 2
