"""Translation-unit names from the compile units' top entries alone (``analysis/dwarf.py``).

The reader decodes each compile unit's header and first entry and skips the
rest; pyelftools, which builds the whole DWARF context, is the oracle: the
same (low, high, name) ranges for DWARF 4 and 5, with and without
``-ffunction-sections`` (ranges in ``.debug_ranges``/``.debug_rnglists``),
-flto, and aarch64.  A corrupt ``.debug_info`` costs the names, never an error.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from elfpatch.fixtures import build
from support.build import compile_linked
from support.inits import toolchain

from elfpatch.analysis import dwarf
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_symtab

SOURCES = {
    "a.cpp": "#include <string>\nstd::string a_name(40, 'a');\nint f(int x) { return x + 1; }\n",
    "b.cpp": ("#include <map>\n#include <string>\nextern std::string a_name;\n"
              "std::map<std::string, int> table = {{a_name, 1}};\n"
              "int main() { return (int)table.size(); }\n"),
}
FLAGS = {
    "dwarf5": ("-O2", "-g"),
    "dwarf4": ("-O2", "-gdwarf-4"),
    "dwarf5-sections": ("-O2", "-g", "-ffunction-sections"),
    "dwarf4-sections": ("-O2", "-gdwarf-4", "-ffunction-sections"),
    "O0": ("-O0", "-g"),
    "lto": ("-O2", "-g", "-flto"),
}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("variant", sorted(FLAGS))
def test_the_same_ranges_as_pyelftools(machine: str, variant: str) -> None:
    program = build.build_executable(SOURCES, f"dwarf_units_{variant}", FLAGS[variant],
                                     toolchain=toolchain(machine))
    with ElfFile.open(program) as elf:
        found = sorted(dwarf.compile_unit_ranges(elf))
        assert found == sorted(dwarf._through_pyelftools(elf))
    names = {name for _low, _high, name in found}
    if variant != "lto":  # -flto adds "<artificial>" units for the merged code
        assert names == {"a.cpp", "b.cpp"}, names


def test_corrupt_debug_info_costs_only_the_names() -> None:
    program = build.build_executable(SOURCES, "dwarf_units_dwarf5", FLAGS["dwarf5"],
                                     toolchain=toolchain("x86_64"))
    data = bytearray(program.read_bytes())
    with ElfFile.open(program) as elf:
        info = elf.section_by_name(".debug_info")
        assert info is not None
    for at in range(info.offset, info.offset + min(info.size, 64)):
        data[at] ^= 0xFF
    with ElfFile(bytes(data), "corrupt") as elf:
        assert isinstance(dwarf.compile_unit_ranges(elf), list)


@pytest.mark.parametrize("variant", sorted(FLAGS))
def test_units_of_addresses_as_the_ranges_say(variant: str) -> None:
    """``units_of`` (through .debug_aranges, decoding only the units it names) names each
    function's unit as the first compile unit whose pyelftools ranges cover it."""
    program = build.build_executable(SOURCES, f"dwarf_units_{variant}", FLAGS[variant],
                                     toolchain=toolchain("x86_64"))
    with ElfFile.open(program) as elf:
        symtab = read_symtab(elf)
        assert symtab is not None
        functions = sorted({symtab.values[i] for i in range(symtab.count)
                            if symtab.symbol_type(i) == C.STT_FUNC and symtab.values[i]})
        ranges = dwarf._through_pyelftools(elf)
        expected = {}
        for address in functions:
            name = next((n for low, high, n in ranges if low <= address < high), None)
            if name is not None:
                expected[address] = name
        assert expected
        assert dwarf.units_of(elf, functions) == expected


def test_names_are_read_from_views_of_any_length() -> None:
    """The string sections are not copied: a name is looked for a chunk at a time, so a
    long one is whole, and one without its terminator is unreadable, not cut short."""
    data = memoryview(b"a" * 1000 + b"\0b")
    unit = dwarf._Unit(SimpleNamespace(data={".debug_str": data}), 5, 4, 8)  # type: ignore[arg-type]
    assert unit.cstring(".debug_str", 0) == b"a" * 1000
    assert unit.cstring(".debug_str", 998) == b"aa"
    with pytest.raises(dwarf._Unreadable):
        unit.cstring(".debug_str", 1001)


# A compile unit whose DW_AT_low_pc is an inline string (DW_FORM_string): no producer
# writes that, and where a number is read a string must cost the names, not raise.
STRING_LOW_PC = """
    .section .debug_abbrev,"",@progbits
    .uleb128 1, 0x11                 # abbreviation 1: DW_TAG_compile_unit
    .byte 0                          # no children
    .uleb128 0x03, 0x08              # DW_AT_name, DW_FORM_string
    .uleb128 0x11, 0x08              # DW_AT_low_pc, DW_FORM_string (the corrupt one)
    .uleb128 0x12, 0x07              # DW_AT_high_pc, DW_FORM_data8 (a length)
    .uleb128 0, 0
    .byte 0
    .section .debug_info,"",@progbits
    .long 2f - 1f                    # unit_length
1:  .short 4                         # DWARF 4
    .long 0                          # abbreviation offset
    .byte 8                          # address size
    .uleb128 1
    .asciz "unit.c"
    .asciz "x"
    .quad 16
2:
"""


def test_a_string_where_an_address_belongs_costs_only_the_names(tmp_path: Path) -> None:
    library = compile_linked("gcc", "assembler", tmp_path / "libstringpc.so", STRING_LOW_PC,
                             soname="libstringpc.so")
    with ElfFile.open(library) as elf:
        assert elf.section_by_name(".debug_info") is not None
        assert dwarf.compile_unit_ranges(elf) == []
        assert dwarf.units_of(elf, [0x1000]) == {}
