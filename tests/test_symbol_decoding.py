"""Binding, type and visibility decoded in one place, and the machine facts beside them.

The symbol table's decoded columns and per-entry accessors are checked
against pyelftools entry by entry; "exported" against glibc's lookup rule
written out again from pyelftools' fields; the relocation-type constants
against <elf.h>; the PLT-stub decoders against hand-assembled stubs and
against the JUMP_SLOT relocations of libraries gcc builds with and without
IBT/BTI.
"""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from support.build import STATICS, platform

from elfpatch.analysis.crosslib import dynamic_symbols
from elfpatch.analysis.effects import plt
from elfpatch.analysis.init_order import exported_definitions
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import SymbolTable, read_dynsym, read_symtab

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
ELF_H = Path("/usr/include/elf.h")

VISIBILITY = {
    "visibility.cpp": """
extern "C" {
int exported_function() { return 1; }
__attribute__((visibility("protected"))) int protected_function() { return 2; }
__attribute__((weak)) int weak_function() { return 3; }
__attribute__((visibility("hidden"))) int hidden_function() { return 4; }
int exported_data = 5;
extern int imported_data;
int use_imported() { return imported_data + hidden_function(); }
}
""",
    **STATICS,
}


# -- constants ------------------------------------------------------------------------

def test_st_info_round_trips_every_byte() -> None:
    for info in range(256):
        assert C.st_info(C.st_bind(info), C.st_type(info)) == info
        assert C.BINDING_OF_INFO[info] == C.st_bind(info) == info // 16
        assert C.TYPE_OF_INFO[info] == C.st_type(info) == info % 16


def test_visibility_keeps_the_other_bits_of_st_other() -> None:
    for other in range(256):
        assert C.VISIBILITY_OF_OTHER[other] == C.st_visibility(other) == other % 4
        for visibility in (C.STV_DEFAULT, C.STV_HIDDEN, C.STV_PROTECTED):
            changed = C.with_visibility(other, visibility)
            assert 0 <= changed < 256
            assert C.st_visibility(changed) == visibility and changed >> 2 == other >> 2


def _elf_h() -> dict[str, int]:
    if not ELF_H.exists():
        pytest.skip(f"no {ELF_H} (apt-get install libc6-dev)")
    defines = re.findall(r"^#define\s+(\w+)\s+(\w+)", ELF_H.read_text(), re.M)
    values: dict[str, int] = {}
    for name, value in defines:  # aliases (R_PPC64_RELATIVE R_PPC_RELATIVE) resolve in order
        if value in values:
            values[name] = values[value]
        elif re.fullmatch(r"0x[0-9a-fA-F]+|\d+", value):
            values[name] = int(value, 0)
    return values


def test_relocation_and_machine_constants_are_elf_h_s() -> None:
    known = _elf_h()
    ours = {name: getattr(C, name) for name in dir(C) if re.match(r"(R|EM)_[A-Z0-9]", name)}
    ours.pop("EM_ALPHA")  # Linux's unofficial number, which <elf.h> does not carry
    assert len(ours) > 35
    assert {name: known.get(name) for name in ours} == ours


def test_every_machine_s_relocations_are_its_own() -> None:
    prefixes = {C.EM_X86_64: "R_X86_64_", C.EM_386: "R_386_", C.EM_AARCH64: "R_AARCH64_",
                C.EM_ARM: "R_ARM_", C.EM_PPC64: "R_PPC64_", C.EM_S390: "R_390_",
                C.EM_RISCV: "R_RISCV_"}
    assert set(C.RELOCATIONS) == set(prefixes)
    for machine, kinds in C.RELOCATIONS.items():
        names = {getattr(C, n) for n in dir(C) if n.startswith(prefixes[machine])}
        types = {kinds.relative, kinds.absolute, *kinds.symbol_slots}
        types |= {kinds.irelative} if kinds.irelative is not None else set()
        assert types <= names, machine
        assert kinds.relative == getattr(C, prefixes[machine] + "RELATIVE")


# -- decoded columns ----------------------------------------------------------------

@pytest.fixture(scope="module")
def library() -> Path:
    return platform("host").library([], VISIBILITY, "libvisibility")


def _files(library: Path) -> list[Path]:
    return [library, *([LIBSTDCXX] if LIBSTDCXX.exists() else [])]


def _tables(elf: ElfFile) -> list[SymbolTable]:
    return [t for t in (read_dynsym(elf), read_symtab(elf)) if t is not None]


def test_decoded_columns_match_pyelftools(library: Path) -> None:
    for path in _files(library):
        with ElfFile.open(path) as elf, path.open("rb") as stream:
            theirs = ELFFile(stream)
            for table in _tables(elf):
                symbols = list(theirs.get_section_by_name(table.kind).iter_symbols())
                assert len(symbols) == table.count
                bindings = [s.entry.st_info.bind for s in symbols]
                types = [s.entry.st_info.type for s in symbols]
                visibilities = [s.entry.st_other.visibility for s in symbols]
                assert [_name_of_binding(b) for b in table.bindings] == bindings
                assert [_name_of_type(t) for t in table.symbol_types] == types
                assert [_name_of_visibility(v) for v in table.visibilities] == visibilities
                for index in range(0, table.count, 97):
                    row = table.row(index)
                    assert table.binding(index) == table.bindings[index] == row.binding
                    assert table.symbol_type(index) == table.symbol_types[index] == row.type
                    assert table.visibility(index) == table.visibilities[index] \
                        == row.visibility
                    assert table.defined(index) == row.defined


def _name_of_binding(value: int) -> str:
    return {C.STB_LOCAL: "STB_LOCAL", C.STB_GLOBAL: "STB_GLOBAL", C.STB_WEAK: "STB_WEAK",
            C.STB_GNU_UNIQUE: "STB_LOOS"}[value]


def _name_of_type(value: int) -> str:
    return {C.STT_GNU_IFUNC: "STT_LOOS"}.get(value, "STT_" + C.TYPE_NAMES[value])


def _name_of_visibility(value: int) -> str:
    return "STV_" + C.VISIBILITY_NAMES[value]


def test_indices_with_picks_bindings_and_types(library: Path) -> None:
    with ElfFile.open(library) as elf:
        table = read_symtab(elf)
        assert table is not None
        functions = table.indices_with(types=(C.STT_FUNC,))
        assert functions == [i for i in range(table.count) if table.symbol_type(i) == C.STT_FUNC]
        unique = table.indices_with(bindings=[C.STB_GNU_UNIQUE])
        assert unique == table.unique_indices() and unique
        local_files = table.indices_with(bindings={C.STB_LOCAL}, types={C.STT_FILE})
        assert local_files and all(table.symbol_type(i) == C.STT_FILE for i in local_files)
        assert table.indices_with() == list(range(table.count))


def test_first_local_and_nonlocal_agree_with_sh_info(library: Path) -> None:
    with ElfFile.open(library) as elf:
        for table in _tables(elf):
            assert table.first_nonlocal(1) == table.first_global
            assert table.first_local(table.first_global) is None
            assert table.first_local(0) == 0  # the null symbol
            assert table.first_nonlocal(table.count) is None


# -- exported definitions -------------------------------------------------------------

def _exported_by_pyelftools(path: Path) -> set[str]:
    """glibc's lookup rule, from pyelftools' fields: defined, GLOBAL/WEAK/UNIQUE, visible."""
    with path.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(".dynsym")
        return {s.name for s in section.iter_symbols()
                if s.entry.st_shndx != "SHN_UNDEF"
                and s.entry.st_info.bind in ("STB_GLOBAL", "STB_WEAK", "STB_LOOS")
                and s.entry.st_other.visibility in ("STV_DEFAULT", "STV_PROTECTED")}


def test_exported_definitions_follow_the_lookup_rule(library: Path) -> None:
    for path in _files(library):
        expected = _exported_by_pyelftools(path)
        with ElfFile.open(path) as elf:
            table = read_dynsym(elf)
            assert table is not None
            assert {table.name(i) for i in table.exported_indices()} == expected
            assert exported_definitions(elf) == expected
            found = dynamic_symbols(elf, path.name)
            assert found.unique_defined | found.other_defined == expected - {""}
    assert {"exported_function", "protected_function", "weak_function", "exported_data"} \
        <= _exported_by_pyelftools(library)
    assert "hidden_function" not in _exported_by_pyelftools(library)


def _with_hidden(library: Path, destination: Path, names: set[str]) -> Path:
    """A copy whose .dynsym entries ``names`` are made HIDDEN, as ``fix --to weak-hidden``
    leaves them (a loader skips them; the static linker never writes such entries)."""
    shutil.copyfile(library, destination)
    data = bytearray(destination.read_bytes())
    with ElfFile.open(library) as elf:
        table = read_dynsym(elf)
        assert table is not None
        at = table.field_offset("other")
        for index in range(table.count):
            if table.name(index) in names:
                offset = table.entry_offset(index) + at
                data[offset] = C.with_visibility(data[offset], C.STV_HIDDEN)
    destination.write_bytes(data)
    return destination


def test_hidden_definitions_are_not_exported(library: Path, tmp_path: Path) -> None:
    """A WEAK+HIDDEN (or hidden UNIQUE) entry of .dynsym is no export: before, the
    initializer analysis counted it among the object's exports and the cross-library
    check among its UNIQUE definitions."""
    unique = "_ZZ14inline_countervE5count"
    hidden = {"weak_function", unique}
    patched = _with_hidden(library, tmp_path / "libhidden.so", hidden)
    with ElfFile.open(patched) as elf:
        assert not hidden & exported_definitions(elf)
        assert "exported_function" in exported_definitions(elf)
        found = dynamic_symbols(elf, "libhidden.so")
        assert unique not in found.unique_defined and "weak_function" not in found.other_defined
        assert "exported_function" in found.other_defined


# -- PLT stubs --------------------------------------------------------------------------

def test_x86_64_stubs_by_hand() -> None:
    jmp = b"\xff\x25" + struct.pack("<i", 0x2000)
    assert plt.x86_64_stub_slot(jmp + b"\x68\0\0\0\0", 0x1000) == 0x1000 + 6 + 0x2000
    endbr = b"\xf3\x0f\x1e\xfa"
    assert plt.x86_64_stub_slot(endbr + b"\xf2" + jmp, 0x1000) == 0x1000 + 11 + 0x2000
    assert plt.x86_64_stub_slot(endbr + jmp, 0x1000) == 0x1000 + 10 + 0x2000
    negative = b"\xff\x25" + struct.pack("<i", -0x10)
    assert plt.x86_64_stub_slot(negative, 0x1000) == 0x1000 + 6 - 0x10
    assert plt.x86_64_stub_slot(b"\xe9\0\0\0\0", 0x1000) is None  # jmp rel32: no slot
    assert plt.x86_64_stub_slot(jmp[:5], 0x1000) is None  # cut short


def _adrp(rd: int, pages: int) -> int:
    immlo, immhi = pages & 3, (pages >> 2) & 0x7FFFF
    return 0x90000000 | immlo << 29 | immhi << 5 | rd


def _ldr(rt: int, rn: int, offset: int) -> int:
    return 0xF9400000 | (offset // 8) << 10 | rn << 5 | rt


def test_aarch64_stubs_by_hand() -> None:
    stub = 0x10_0010
    code = struct.pack("<II", _adrp(16, 3), _ldr(17, 16, 0x48))
    assert plt.aarch64_stub_slot(code, stub) == 0x10_0000 + 3 * 0x1000 + 0x48
    bti = struct.pack("<I", 0xD503245F)
    assert plt.aarch64_stub_slot(bti + code, stub - 4) == 0x10_0000 + 3 * 0x1000 + 0x48
    backwards = struct.pack("<II", _adrp(16, -2 & 0x1FFFFF), _ldr(17, 16, 8))
    assert plt.aarch64_stub_slot(backwards, stub) == 0x10_0000 - 2 * 0x1000 + 8
    other_register = struct.pack("<II", _adrp(15, 3), _ldr(17, 15, 0x48))
    assert plt.aarch64_stub_slot(other_register, stub) is None
    assert plt.aarch64_stub_slot(code[:4], stub) is None


def test_stub_slot_dispatches_by_machine() -> None:
    jmp = b"\xff\x25" + struct.pack("<i", 0x10)
    assert plt.stub_slot(C.EM_X86_64, True, jmp, 0) == 0x16
    assert plt.stub_slot(C.EM_386, True, jmp, 0) is None
    code = struct.pack("<II", _adrp(16, 1), _ldr(17, 16, 0x10))
    assert plt.stub_slot(C.EM_AARCH64, True, code, 0) == 0x1010
    assert plt.stub_slot(C.EM_AARCH64, False, code, 0) is None


# (platform, extra flags, PLT section, size of its header, size of each entry)
BUILT_STUBS = [
    ("host", ("-fcf-protection=none", "-Wl,-z,noibtplt"), ".plt", 16, 16),
    ("host", ("-fcf-protection=full", "-Wl,-z,ibtplt"), ".plt.sec", 0, 16),
    ("aarch64", ("-mbranch-protection=none",), ".plt", 32, 16),
    ("aarch64", ("-mbranch-protection=standard", "-Wl,-z,force-bti"), ".plt", 32, 16),
]
CALLS = {"calls.cpp": """
#include <cstdio>
#include <cstdlib>
extern "C" int external_one(int);
extern "C" int calls(int n) { std::puts("x"); return external_one(n) + std::abs(n); }
"""}


@pytest.mark.parametrize(("machine", "flags", "section", "header", "size"), BUILT_STUBS)
def test_built_stubs_lead_to_their_jump_slots(machine: str, flags: tuple[str, ...],
                                               section: str, header: int, size: int) -> None:
    path = platform(machine).library(list(flags), CALLS, f"libcalls{len(flags)}")
    with path.open("rb") as stream:
        theirs = ELFFile(stream)
        stubs = theirs.get_section_by_name(section)
        if stubs is None:
            pytest.skip(f"the linker made no {section} with {' '.join(flags)}")
        slots = {r["r_offset"] for r in theirs.get_section_by_name(".rela.plt").iter_relocations()}
        data, address = stubs.data(), stubs["sh_addr"]
        machine_number = C.EM_X86_64 if machine == "host" else C.EM_AARCH64
        decoded = {plt.stub_slot(machine_number, True, data[at : at + plt.STUB_BYTES],
                                 address + at)
                   for at in range(header, len(data), size)}
    assert len(slots) >= 2 and decoded == slots  # puts, external_one
