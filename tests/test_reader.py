"""The ELF reader (elfpatch.elf) against two independent parsers, pyelftools and LIEF.

Every column the reader produces is compared entry by entry: section and
program headers, dynamic entries, DT_NEEDED and DT_SONAME, each field of
every .dynsym and .symtab entry, r_offset/r_info/r_addend of the dynamic
relocations, the addresses of packed relative relocations (also against
readelf), and the symbol count implied by the hash tables.  The files are
the test library built for several machines (little and big endian, 32
and 64 bit) and Debian's libstdc++.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import elftools.elf.enums as pyelftools_enums
import lief
import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.hash import ELFHashSection, ELFHashTable, GNUHashSection, GNUHashTable
from elftools.elf.relocation import RelocationSection, RelrRelocationSection
from support.build import (
    PLATFORMS,
    POINTERS,
    STATICS,
    platform,
    remove_section_headers,
)
from support.readelf import readelf_relr

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import (
    dynamic_symbol_count,
    gnu_hash,
    gnu_hash_symbol_count,
    read_gnu_hash,
    read_sysv_hash,
    sysv_hash,
)
from elfpatch.elf.relocations import decode_relr, dynamic_relocation_tables, relr_addresses
from elfpatch.elf.symbols import SymbolTable, read_dynsym, read_symtab

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
SOURCES = {**STATICS, **POINTERS}
FILES = (*PLATFORMS, "host-sysv", "bigendian-sysv", "host-relr", "32bit-relr", "libstdc++")

lief.logging.disable()


@cache  # a skip is an exception, so it is not cached: every test using the file skips
def path_of(name: str) -> Path:
    if name == "libstdc++":
        if not LIBSTDCXX.exists():
            pytest.skip(f"no system libstdc++ at {LIBSTDCXX} (apt-get install libstdc++6)")
        return LIBSTDCXX
    machine, _, variant = name.partition("-")
    flags = {"": [], "sysv": ["-Wl,--hash-style=sysv"],
             "relr": ["-Wl,-z,pack-relative-relocs"]}[variant]
    return platform(machine).library(flags, SOURCES, "libreader")


@pytest.fixture(params=FILES)
def subject(request: pytest.FixtureRequest) -> Iterator[tuple[ElfFile, ELFFile, Any]]:
    """The reader, pyelftools and LIEF, each on the same file."""
    path = path_of(request.param)
    with ElfFile.open(path) as ours, path.open("rb") as stream:
        theirs = lief.parse(str(path))
        assert theirs is not None
        yield ours, ELFFile(stream), theirs


def number(value: int | str, prefix: str) -> int:
    """pyelftools' enum name (``SHT_PROGBITS``) back to its number."""
    if isinstance(value, int):
        return value
    for name in dir(pyelftools_enums):
        if name.startswith(prefix):
            table = getattr(pyelftools_enums, name)
            if value in table:
                return table[value]
    raise KeyError(value)


def lief_number(value: Any) -> int:
    """LIEF keeps a machine id above bit 32 of processor-specific values: drop it."""
    return int(value) & 0xFFFFFFFF


# -- headers --------------------------------------------------------------------------

def test_file_header(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, _ = subject
    h, theirs = ours.header, pyelf.header
    assert h.elf_class == pyelf.elfclass
    assert h.little_endian == pyelf.little_endian
    assert h.type == number(theirs.e_type, "ENUM_E_TYPE")
    assert h.machine == number(theirs.e_machine, "ENUM_E_MACHINE")
    assert (h.entry, h.phoff, h.shoff, h.flags, h.ehsize, h.phentsize, h.phnum, h.shentsize,
            h.shnum, h.shstrndx) == (
        theirs.e_entry, theirs.e_phoff, theirs.e_shoff, theirs.e_flags, theirs.e_ehsize,
        theirs.e_phentsize, theirs.e_phnum, theirs.e_shentsize, theirs.e_shnum,
        theirs.e_shstrndx)


def test_sections(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    mine = [(s.name, s.type, s.flags, s.addr, s.offset, s.size, s.link, s.info, s.addralign,
             s.entsize) for s in ours.sections]
    assert mine == [(s.name, number(s["sh_type"], "ENUM_SH_TYPE"), s["sh_flags"], s["sh_addr"],
                     s["sh_offset"], s["sh_size"], s["sh_link"], s["sh_info"],
                     s["sh_addralign"], s["sh_entsize"]) for s in pyelf.iter_sections()]
    assert mine == [(s.name, lief_number(s.type), s.flags, s.virtual_address, s.file_offset,
                     s.size, s.link, s.information, s.alignment, s.entry_size)
                    for s in binary.sections]
    assert all(ours.section_by_name(s.name) is not None for s in ours.sections)
    header_size = ours.header.shentsize
    assert [s.header_offset for s in ours.sections] == [
        ours.header.shoff + i * header_size for i in range(len(ours.sections))]


def test_segments(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    mine = [(s.type, s.flags, s.offset, s.vaddr, s.filesz, s.memsz) for s in ours.segments]
    assert mine == [(number(s["p_type"], "ENUM_P_TYPE"), s["p_flags"], s["p_offset"],
                     s["p_vaddr"], s["p_filesz"], s["p_memsz"]) for s in pyelf.iter_segments()]
    assert mine == [(lief_number(s.type), int(s.flags), s.file_offset, s.virtual_address,
                     s.physical_size, s.virtual_size) for s in binary.segments]


def test_dynamic_entries_needed_and_soname(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    dynamic = next(s for s in pyelf.iter_sections() if isinstance(s, DynamicSection))
    theirs = [(number(t.entry.d_tag, "ENUM_D_TAG"), t.entry.d_val) for t in dynamic.iter_tags()]
    assert ours.dynamic == theirs[: theirs.index((C.DT_NULL, 0))]
    lief_entries = [(lief_number(e.tag), e.value) for e in binary.dynamic_entries]
    assert ours.dynamic == lief_entries[: lief_entries.index((C.DT_NULL, 0))]
    assert ours.needed == [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    assert ours.needed == list(binary.libraries)
    sonames = [t.soname for t in dynamic.iter_tags() if t.entry.d_tag == "DT_SONAME"]
    assert [ours.soname] == sonames
    assert ours.soname in ("libreader.so", "libstdc++.so.6")
    assert ours.nodelete is False


# -- symbol tables --------------------------------------------------------------------

def symbol_rows(table: SymbolTable) -> list[tuple[str, int, int, int, int, int, int]]:
    """(name, st_name, info, other, shndx, value, size) of every entry, from the columns."""
    names, infos, others = table.name_offsets, table.infos, table.others
    shndxs, values = table.shndxs, table.values
    rows = []
    for i in range(table.count):
        row = table.row(i)
        assert (row.index, row.value, row.shndx) == (i, values[i], shndxs[i])
        assert (row.binding, row.type, row.visibility) == (infos[i] >> 4, infos[i] & 0xF,
                                                           others[i] & 3)
        rows.append((table.name(i), names[i], infos[i], others[i], shndxs[i], values[i],
                     row.size))
    return rows


def pyelftools_rows(section: Any) -> list[tuple[str, int, int, int, int, int, int]]:
    rows = []
    for symbol in section.iter_symbols():
        e = symbol.entry
        info = (number(e.st_info.bind, "ENUM_ST_INFO_BIND") << 4
                | number(e.st_info.type, "ENUM_ST_INFO_TYPE"))
        other = number(e.st_other.visibility, "ENUM_ST_VISIBILITY") | (e.st_other.local << 5)
        rows.append((symbol.name, e.st_name, info, other, number(e.st_shndx, "ENUM_ST_SHNDX"),
                     e.st_value, e.st_size))
    return rows


def lief_rows(symbols: Any) -> list[tuple[str, int, int, int, int, int]]:
    return [(s.name, s.information, s.other, s.shndx, s.value, s.size) for s in symbols]


def without_st_name(rows: list[tuple[str, int, int, int, int, int, int]]) -> list[tuple[Any, ...]]:
    return [(name, *rest) for name, _st_name, *rest in rows]


def test_dynsym_every_entry(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    table = read_dynsym(ours)
    assert table is not None and table.section is not None
    rows = symbol_rows(table)
    assert rows == pyelftools_rows(pyelf.get_section_by_name(".dynsym"))
    assert without_st_name(rows) == lief_rows(binary.dynamic_symbols)
    assert table.first_global == pyelf.get_section_by_name(".dynsym")["sh_info"]
    assert len(rows) > 20


def test_symtab_every_entry(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    table = read_symtab(ours)
    section = pyelf.get_section_by_name(".symtab")
    if section is None:
        assert table is None and not list(binary.symtab_symbols)
        return
    assert table is not None
    rows = symbol_rows(table)
    assert rows == pyelftools_rows(section)
    assert without_st_name(rows) == lief_rows(binary.symtab_symbols)
    assert table.unique_indices() == [i for i, row in enumerate(rows) if row[2] >> 4 == 10]


def test_dynsym_found_without_section_headers(subject: tuple[ElfFile, ELFFile, Any],
                                              tmp_path: Path) -> None:
    """Through PT_DYNAMIC and a hash table, the same entries, columns and strings."""
    ours, _, _ = subject
    headerless = remove_section_headers(Path(ours.name), tmp_path / "headerless.so")
    with ElfFile.open(headerless) as bare:
        assert bare.sections == [] and bare.segments == ours.segments
        assert bare.dynamic == ours.dynamic and bare.needed == ours.needed
        table, original = read_dynsym(bare), read_dynsym(ours)
        assert table is not None and original is not None
        assert (table.offset, table.count, table.strtab_offset) == (
            original.offset, original.count, original.strtab_offset)
        assert table.section is None and read_symtab(bare) is None
        assert symbol_rows(table) == symbol_rows(original)
        assert dynamic_symbol_count(bare) == original.count
        assert relr_addresses(bare) == relr_addresses(ours)
        assert [(t.offset, list(t.offsets), list(t.infos), list(map(t.entry, range(t.count))))
                for t in dynamic_relocation_tables(bare)] == [
                    (t.offset, list(t.offsets), list(t.infos), list(map(t.entry, range(t.count))))
                    for t in dynamic_relocation_tables(ours)]


# -- relocations ----------------------------------------------------------------------

def test_dynamic_relocations(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, binary = subject
    mine = [(offset, info, *table.entry(k)) for table in dynamic_relocation_tables(ours)
            for k, (offset, info) in enumerate(zip(table.offsets, table.infos, strict=True))]
    dynsym = pyelf.get_section_index(".dynsym")
    sections = sorted((s for s in pyelf.iter_sections() if isinstance(s, RelocationSection)
                       and s["sh_link"] == dynsym), key=lambda s: s["sh_offset"])
    theirs = [(r["r_offset"], r["r_info"], r["r_info_type"], r["r_info_sym"],
               r["r_addend"] if s.is_RELA() else 0)
              for s in sections for r in s.iter_relocations()]
    assert mine == theirs and len(mine) > 5
    # LIEF lists them by purpose (dynamic, PLT/GOT), RELR decoded among them: compare as sets.
    word = ours.header.elf_class
    lief_set = sorted((r.address, r.r_info(getattr(lief.ELF.Header.CLASS, f"ELF{word}")),
                       r.addend if r.is_rela else 0)
                      for r in (*binary.dynamic_relocations, *binary.pltgot_relocations)
                      if not r.is_relatively_encoded)
    assert sorted((offset, info, addend) for offset, info, _, _, addend in mine) == lief_set
    for table in dynamic_relocation_tables(ours):
        shift = 32 if word == 64 else 8
        assert list(table.symbol_indices) == [info >> shift for info in table.infos]
        assert list(table.types) == [info & ((1 << shift) - 1) for info in table.infos]


@pytest.mark.parametrize("name", ["host-relr", "32bit-relr"])
def test_relr_decoding(name: str) -> None:
    path = path_of(name)
    with ElfFile.open(path) as ours:
        if ours.dynamic_value(C.DT_RELR) is None:
            pytest.skip(f"the {name} linker did not pack relative relocations")
        addresses = relr_addresses(ours)
        word = ours.word_size
    expected = readelf_relr(path)
    assert addresses == expected
    assert len(addresses) > 150  # the pointer tables: bitmaps and lone addresses
    with path.open("rb") as stream:
        relr = next(s for s in ELFFile(stream).iter_sections()
                    if isinstance(s, RelrRelocationSection))
        assert addresses == [r["r_offset"] for r in relr.iter_relocations()]
    binary = lief.parse(str(path))
    assert addresses == sorted(r.address for r in binary.relocations
                               if r.is_relatively_encoded)
    with ElfFile.open(path) as ours:
        entries = (ours.dynamic_value(C.DT_RELRSZ) or 0) // word
    assert 0 < entries < len(addresses) // 10  # neighbouring words share bitmap entries


def test_decode_relr_by_hand() -> None:
    # An address, then a bitmap of the next 63 words (bits 0, 2), then one of the 63 after.
    entries = [0x1000, (0b101 << 1) | 1, (1 << 1) | 1, 0x9000]
    assert decode_relr(entries, 8) == [0x1000, 0x1008, 0x1018, 0x1008 + 63 * 8, 0x9000]
    # 32-bit: 31 words per bitmap.
    assert decode_relr([0x100, (1 << 31) | 1], 4) == [0x100, 0x104 + 30 * 4]
    assert decode_relr([], 8) == []


# -- hash tables ----------------------------------------------------------------------

def test_hash_tables_size_dynsym(subject: tuple[ElfFile, ELFFile, Any]) -> None:
    ours, pyelf, _ = subject
    dynsym = read_dynsym(ours)
    assert dynsym is not None
    gnu, sysv = read_gnu_hash(ours), read_sysv_hash(ours)
    assert gnu is not None or sysv is not None
    gnu_section = next((s for s in pyelf.iter_sections() if isinstance(s, GNUHashSection)), None)
    sysv_section = next((s for s in pyelf.iter_sections() if isinstance(s, ELFHashSection)),
                        None)
    assert (gnu is None, sysv is None) == (gnu_section is None, sysv_section is None)
    if gnu is not None:
        assert gnu_hash_symbol_count(ours, gnu) == dynsym.count
        assert gnu_hash_symbol_count(ours, gnu) == gnu_section.get_number_of_symbols()
        assert (gnu.nbuckets, gnu.symoffset, gnu.bloom_size, gnu.bloom_shift) == (
            gnu_section.params["nbuckets"], gnu_section.params["symoffset"],
            gnu_section.params["bloom_size"], gnu_section.params["bloom_shift"])
        assert list(gnu.buckets) == list(gnu_section.params["buckets"])
    if sysv is not None:
        assert sysv.nchain == dynsym.count
        if sysv.entry_size == 4:  # pyelftools reads 4-byte entries only
            assert sysv.nchain == sysv_section.get_number_of_symbols()
            assert sysv.nbucket == sysv_section.params["nbuckets"]
    assert dynamic_symbol_count(ours) == dynsym.count


def test_hash_functions() -> None:
    assert (gnu_hash(b""), gnu_hash(b"printf")) == (5381, 0x156B2BB8)
    assert (sysv_hash(b""), sysv_hash(b"printf")) == (0, 0x077905A6)
    with ElfFile.open(path_of("libstdc++")) as ours:
        dynsym = read_dynsym(ours)
        assert dynsym is not None
        names = [dynsym.name(i) for i in range(dynsym.count)]
    for name in names:  # long names exercise the high-nibble folding of the SysV hash
        assert gnu_hash(name.encode()) == GNUHashTable.gnu_hash(name)
        assert sysv_hash(name.encode()) == ELFHashTable.elf_hash(name)
