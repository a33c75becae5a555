"""``fix`` accepts every file the linker makes, and writes only inside the tables it owns.

Executables (fixed-address and position-independent, exporting their
symbols or not) and shared libraries, with each hash style, are fixed and
still run; one that exports nothing has a GNU hash table whose buckets are
all empty, which says nothing of .dynsym's size.

A file whose dynamic table, section headers or program headers disagree
about where a table is (DT_VERSYM on the ELF header or on the version
needs, DT_REL inside the program headers, a note segment or the program
header table over a table, a section header moved) is refused with one
line naming the conflict, exit 2, nothing written.  And should a writer
ever put a byte anywhere else, the verifier sees it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.build import invoke, remove_section_headers
from support.fixlib import (
    VARIANTS,
    Layout,
    built_library,
    elf_layout,
    fix,
    toolchain,
)
from support.readelf import readelf_warnings

from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import dynamic_symbol_count, gnu_hash_symbol_count, read_gnu_hash
from elfpatch.elf.symbols import read_dynsym
from elfpatch.errors import CorruptElfError
from elfpatch.patch import regions
from elfpatch.patch.edit import Edit
from elfpatch.patch.regions import RegionMap, Spans
from elfpatch.service import fix as fix_module

# A program with UNIQUE symbols (a static local of an inline function, a static
# data member of a class template) that prints what they hold.
PROGRAM = {
    "prog.cpp": """
#include <cstdio>
inline int& counter() { static int count = 0; return count; }
template <class T> struct Box { static int value; };
template <class T> int Box<T>::value = 5;
int main() {
    ++counter();
    std::printf("counter=%d box=%d\\n", counter(), Box<int>::value);
    return 0;
}
""",
}
PROGRAM_OUTPUT = "counter=1 box=5\n"
PLAIN = {"plain.c": '#include <stdio.h>\nint main(void) { puts("plain"); return 0; }\n'}

LINKS = {
    "no-pie": ("-fno-pie", "-no-pie"),
    "no-pie-exported": ("-fno-pie", "-no-pie", "-rdynamic"),
    "pie": ("-fPIE", "-pie"),
    "pie-exported": ("-fPIE", "-pie", "-rdynamic"),
}
HASH_STYLES = ("gnu", "sysv", "both")


def program(link: str, style: str, sources: dict[str, str] = PROGRAM,
            name: str = "uniqueprog") -> Path:
    return build.build_executable(sources, name, ["-O1", *LINKS[link],
                                                  f"-Wl,--hash-style={style}"],
                                  toolchain=toolchain("host"))


def run(path: Path) -> str:
    return subprocess.run([str(path)], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def all_buckets_empty(path: Path) -> bool:
    """What pyelftools reads in .gnu.hash: no bucket names a symbol."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.hash import GNUHashSection

    with path.open("rb") as stream:
        table = next(s for s in ELFFile(stream).iter_sections() if isinstance(s, GNUHashSection))
        return not any(table.params["buckets"])


# -- every linker output is fixed -------------------------------------------------------

@pytest.mark.parametrize("style", HASH_STYLES)
@pytest.mark.parametrize("link", sorted(LINKS))
def test_executables_are_fixed_and_still_run(link: str, style: str, tmp_path: Path) -> None:
    built = program(link, style)
    assert run(built) == PROGRAM_OUTPUT
    out = tmp_path / "fixed"
    result = fix(built, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.document is not None and result.document["libraries"][0]["changes"]
    assert run(out) == PROGRAM_OUTPUT
    assert readelf_warnings(out) == readelf_warnings(built)
    copy = tmp_path / "prog"
    shutil.copy2(built, copy)
    result = fix("--in-place", copy)
    assert result.exit_code == 0, result.stderr
    assert run(copy) == PROGRAM_OUTPUT
    assert copy.read_bytes() == out.read_bytes()


def test_an_executable_that_exports_nothing_hashes_nothing(tmp_path: Path) -> None:
    """The premise of the case GNU ld makes for a fixed-address executable: every
    bucket empty, symoffset 1, yet .dynsym holds the undefined imports; the count
    comes from elsewhere (a position-independent one hashes its weak
    __cxa_finalize reference, so its table is not empty)."""
    built = program("no-pie", "gnu")
    assert all_buckets_empty(built)
    bare = remove_section_headers(built, tmp_path / "bare")
    with ElfFile.open(built) as elf, ElfFile.open(bare) as headerless:
        dynsym, table = read_dynsym(elf), read_gnu_hash(elf)
        assert dynsym is not None and table is not None
        assert dynsym.count > table.symoffset  # so the old answer, symoffset, was wrong
        assert gnu_hash_symbol_count(elf, table) is None
        assert dynamic_symbol_count(elf) == dynsym.count
        assert dynamic_symbol_count(headerless) == dynsym.count
        rebuilt = read_dynsym(headerless)
        assert rebuilt is not None and rebuilt.count == dynsym.count


@pytest.mark.parametrize("link", ["no-pie", "pie"])
def test_an_executable_without_unique_symbols_is_left_as_it_is(link: str,
                                                               tmp_path: Path) -> None:
    built = program(link, "gnu", PLAIN, "plainprog")
    assert all_buckets_empty(built) == (link == "no-pie")
    out = tmp_path / "fixed"
    result = fix(built, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert not out.exists() or out.read_bytes() == built.read_bytes()
    copy = tmp_path / "plain"
    shutil.copy2(built, copy)
    assert fix("--in-place", copy).exit_code == 0
    assert copy.read_bytes() == built.read_bytes()


@pytest.mark.parametrize("variant", ["default", "sysv-hash", "both-hash"])
@pytest.mark.parametrize("mode", ["local", "global"])
def test_shared_libraries_of_every_hash_style_are_fixed(variant: str, mode: str,
                                                        tmp_path: Path) -> None:
    built = built_library(VARIANTS[variant])
    result = fix("--to", mode, built, "-o", tmp_path / "libfixme.so")
    assert result.exit_code == 0, result.stderr


# -- tables that disagree about where they are ----------------------------------------------

Mutation = Callable[[Layout, bytearray], None]


def _dynsym_count(layout: Layout) -> int:
    section = layout.section(".dynsym")
    assert section is not None
    return section.size // (24 if layout.elf_class == 64 else 16)


def _versym_at(offset: Callable[[Layout], int]) -> Mutation:
    return lambda layout, data: layout.set_dynamic(data, "DT_VERSYM",
                                                   layout.address_of(offset(layout)))


def _section_offset(name: str) -> Callable[[Layout], int]:
    def offset(layout: Layout) -> int:
        section = layout.section(name)
        assert section is not None, name
        return section.offset
    return offset


def _relocations_on_program_headers(layout: Layout, data: bytearray) -> None:
    """DT_REL at the program headers, three 8-byte entries long: their r_info words
    are p_offset, p_paddr, p_memsz and p_align values, small enough to pass for
    symbol indices, so renumbering the moved symbols would rewrite them."""
    layout.set_dynamic(data, "DT_REL", layout.address_of(layout.phoff))
    layout.set_dynamic(data, "DT_RELSZ", 3 * 8)


def _note_over_versym(layout: Layout, data: bytearray) -> None:
    note = next(s for s in layout.segments if s.type == "PT_NOTE")
    versym = layout.section(".gnu.version")
    assert versym is not None
    layout.set_segment(data, note.index, "offset", versym.offset)
    layout.set_segment(data, note.index, "filesz", versym.size)


def _program_headers_over_hash(layout: Layout, data: bytearray) -> None:
    """More program headers than there are: the table runs over .gnu.hash's header."""
    table = layout.section(".gnu.hash")
    assert table is not None
    layout.set_phnum(data, (table.offset + 8 - layout.phoff) // layout.phentsize + 1)


def _versym_section_onto_verneed(layout: Layout, data: bytearray) -> None:
    layout.set_section(data, ".gnu.version", "offset", _section_offset(".gnu.version_r")(layout))


def _verneed_section_onto_versym(layout: Layout, data: bytearray) -> None:
    layout.set_section(data, ".gnu.version_r", "offset", _section_offset(".gnu.version")(layout))


# name -> (variant, mutation, what the line names with section headers, without them);
# None: the case needs section headers.
CONFLICTS: dict[str, tuple[str, Mutation, str, str | None]] = {
    "DT_VERSYM on the ELF header": (
        "default", _versym_at(lambda layout: 8), "overlaps the ELF header",
        "overlaps the ELF header"),
    "DT_VERSYM on the program headers": (
        "default", _versym_at(lambda layout: layout.phoff + 8),
        "overlaps the program header table", "overlaps the program header table"),
    "DT_VERSYM on the version needs": (
        "default", _versym_at(_section_offset(".gnu.version_r")),
        "overlaps section .gnu.version_r", "overlaps the DT_VERNEED table"),
    "DT_VERSYM running into the version needs": (
        "default", _versym_at(lambda layout: _section_offset(".gnu.version_r")(layout)
                              - 2 * _dynsym_count(layout) + 8),
        "overlaps section .gnu.version_r", "overlaps the DT_VERNEED table"),
    "32-bit DT_VERSYM on the version needs": (
        "i686", _versym_at(_section_offset(".gnu.version_r")),
        "overlaps section .gnu.version_r", "overlaps the DT_VERNEED table"),
    "DT_REL inside the program headers": (
        "i686", _relocations_on_program_headers, "overlaps the program header table",
        "overlaps the program header table"),
    "a note segment over .gnu.version": (
        "default", _note_over_versym, "overlaps the note segment", "overlaps the note segment"),
    "program headers over .gnu.hash": (
        "default", _program_headers_over_hash, "overlaps the program header table",
        "overlaps the program header table"),
    "section .gnu.version moved onto the version needs": (
        "default", _versym_section_onto_verneed, "lies outside section .gnu.version", None),
    "section .gnu.version_r moved onto .gnu.version": (
        "default", _verneed_section_onto_versym, "overlaps section .gnu.version_r", None),
}


def conflicting_input(case: str, headerless: bool, folder: Path) -> tuple[Path, str]:
    variant, mutate, with_sections, without = CONFLICTS[case]
    built = built_library(VARIANTS[variant])
    data = bytearray(built.read_bytes())
    mutate(elf_layout(built), data)
    source = folder / "libfixme.so"
    source.write_bytes(bytes(data))
    if headerless:
        remove_section_headers(source, source)
    expected = without if headerless else with_sections
    assert expected is not None
    return source, expected


CASES = [(case, headerless) for case, (_v, _m, _s, without) in CONFLICTS.items()
         for headerless in (False, True) if not headerless or without is not None]


@pytest.mark.parametrize(("case", "headerless"), CASES)
def test_a_table_out_of_place_is_refused_and_nothing_written(case: str, headerless: bool,
                                                             tmp_path: Path) -> None:
    source, expected = conflicting_input(case, headerless, tmp_path)
    original = source.read_bytes()
    for target in (("-o", str(tmp_path / "fixed.so")), ("--in-place",)):
        result = invoke("fix", *target, str(source))
        assert result.exception is None, result.exception
        assert result.exit_code == 2, (target, result.stdout)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"elfpatch: error: {source}: ") and expected in lines[0]
        assert source.read_bytes() == original
        assert [p for p in tmp_path.rglob("*") if p.is_file()] == [source]


def test_the_installed_command_refuses_the_same_way(tmp_path: Path) -> None:
    source, expected = conflicting_input("DT_VERSYM on the ELF header", False, tmp_path)
    original = source.read_bytes()
    for target in (("-o", str(tmp_path / "fixed.so")), ("--in-place",)):
        result = run_elfpatch("fix", *target, str(source))
        assert result.returncode == 2
        assert len(result.stderr.splitlines()) == 1 and expected in result.stderr
        assert source.read_bytes() == original
        assert [p for p in tmp_path.rglob("*") if p.is_file()] == [source]


# -- the map itself ---------------------------------------------------------------------------

def test_an_edit_must_stay_inside_its_own_table() -> None:
    built = built_library(VARIANTS["default"])
    layout = elf_layout(built)
    versym, verneed = layout.section(".gnu.version"), layout.section(".gnu.version_r")
    assert versym is not None and verneed is not None
    with ElfFile.open(built) as elf:
        area = RegionMap.of(elf)
        area.check([Edit(versym.offset, bytes(versym.size), "whole", regions.VERSYM),
                    Edit(layout.shoff + 44, bytes(4), "an sh_info", regions.SECTION_HEADERS)])
        padding = versym.offset + versym.size  # before .gnu.version_r, aligned to 8
        assert padding + 2 <= verneed.offset
        refused = {
            "overlaps section .gnu.version ": Edit(versym.offset, bytes(2), "x",
                                                   regions.GNU_HASH),
            "overlaps section .gnu.version_r": Edit(verneed.offset - 2, bytes(4), "x",
                                                    regions.VERSYM),
            "overlaps the ELF header": Edit(0, bytes(2), "x", regions.DYNSYM),
            "lies outside section .gnu.version ": Edit(padding, bytes(2), "x", regions.VERSYM),
            "lies outside any .symtab_shndx table": Edit(padding, bytes(2), "x",
                                                         regions.SYMTAB_SHNDX),
            "overlaps the section header table": Edit(layout.shoff - 2, bytes(4), "x",
                                                      regions.SYMTAB),
        }
        for expected, edit in refused.items():
            with pytest.raises(CorruptElfError, match=expected):
                area.check([edit])


def test_spans() -> None:
    spans = Spans.of([(10, 20), (15, 30), (40, 50), (5, 5)])
    assert spans.ranges() == [(10, 30), (40, 50)]
    assert spans.contains(10, 30) and spans.contains(42, 43)
    assert not spans.contains(25, 41) and not spans.contains(0, 11)
    assert spans.overlaps(29, 31) and spans.overlaps(0, 11) and spans.overlaps(35, 41)
    assert not spans.overlaps(30, 40) and not spans.overlaps(0, 10) and not spans.overlaps(50, 99)
    assert spans.gaps(60) == [(0, 10), (30, 40), (50, 60)]
    assert Spans.of([]).gaps(5) == [(0, 5)]


# -- a byte written anywhere else is caught --------------------------------------------------

STRAY: dict[str, Callable[[Layout], int]] = {
    "a byte of .text": lambda layout: _section_offset(".text")(layout) + 4,
    "the ELF header's e_flags": lambda layout: 0x30,
    "a version need": lambda layout: _section_offset(".gnu.version_r")(layout) + 2,
    "a symbol name": lambda layout: _section_offset(".dynstr")(layout) + 3,
}


@pytest.mark.parametrize("mode", ["local", "weak-hidden"])
@pytest.mark.parametrize("where", sorted(STRAY))
def test_verification_catches_a_byte_written_elsewhere(where: str, mode: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    built = built_library(VARIANTS["both-hash"])
    offset = STRAY[where](elf_layout(built))
    source = tmp_path / "libfixme.so"
    shutil.copy2(built, source)
    original = source.read_bytes()
    real = fix_module.plan_edits

    def plan_with_a_stray_byte(elf: ElfFile, plan: object) -> list[Edit]:
        stray = Edit(offset, bytes([original[offset] ^ 0xFF]), "stray", regions.OTHER)
        return [*real(elf, plan), stray]  # type: ignore[arg-type]

    monkeypatch.setattr(fix_module, "plan_edits", plan_with_a_stray_byte)
    for target in (("-o", str(tmp_path / "fixed.so")), ("--in-place",)):
        result = fix("--to", mode, *target, source)
        assert result.exit_code == 2
        assert result.document is not None
        errors = [e["error"] for e in result.document["errors"]]
        assert len(errors) == 1 and f"byte {offset:#x}" in errors[0], errors
        assert "outside every table the plan rewrites" in errors[0]
        assert source.read_bytes() == original
        assert [p for p in tmp_path.rglob("*") if p.is_file()] == [source]
