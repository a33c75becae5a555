"""Relocation tables (REL, RELA, packed RELR) as columns.

The dynamic relocations the loader applies are found through the dynamic
table (DT_RELA, DT_REL, DT_JMPREL), which stays valid when section headers
are stripped; sections that link to .dynsym but fall outside those ranges
are added.  Overlapping ranges (some linkers let DT_RELA cover .rela.plt)
are merged so that no entry is seen twice.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import cached_property

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column
from elfpatch.elf.file import ElfFile


@dataclass
class RelocationTable:
    elf: ElfFile
    name: str
    offset: int
    count: int
    is_rela: bool

    @property
    def entsize(self) -> int:
        return self.elf.word_size * (3 if self.is_rela else 2)

    @property
    def raw(self) -> memoryview:
        return self.elf.view[self.offset : self.offset + self.count * self.entsize]

    def _column(self, slot: int) -> array[int]:
        w = self.elf.word_size
        return column(self.raw, self.entsize, slot * w, w, self.elf.header.little_endian)

    @cached_property
    def offsets(self) -> array[int]:
        """r_offset: the address each relocation patches."""
        return self._column(0)

    @cached_property
    def infos(self) -> array[int]:
        return self._column(1)

    @cached_property
    def addends(self) -> array[int]:
        """r_addend of each entry of a RELA table, unsigned (a RELATIVE one's is the
        address it makes)."""
        return self._column(2)

    def entry(self, k: int) -> tuple[int, int, int]:
        """(type, symbol index, signed addend) of entry ``k``, read on its own.

        For the few entries a caller picks out of a large table: no column
        is built (a 321k-entry .rela.dyn's addends take 35 ms as a column).
        """
        elf = self.elf
        fields = "3" + elf.word if self.is_rela else "2" + elf.word
        _offset, info, *addend = elf.unpack(fields, self.offset + k * self.entsize,
                                            f"{self.name} entry {k}")
        shift = self.symbol_shift
        signed = _signed(addend[0], elf.word_size) if addend else 0
        return info & ((1 << shift) - 1), info >> shift, signed

    @property
    def symbol_shift(self) -> int:
        return 32 if self.elf.word_size == 8 else 8

    @cached_property
    def symbol_indices(self) -> array[int]:
        """The symbol index in each r_info (its upper 32 bits in ELF64, upper 24 in ELF32)."""
        if self.elf.word_size == 8:
            return self._half_of_info(upper=True)
        return array("I", [info >> 8 for info in self.infos])

    @cached_property
    def types(self) -> array[int]:
        """The relocation type in each r_info (its lower 32 bits in ELF64, lowest 8 in ELF32)."""
        if self.elf.word_size == 8:
            return self._half_of_info(upper=False)
        return array("I", [info & 0xFF for info in self.infos])

    def info_half_offset(self, upper: bool) -> int:
        """Offset in an ELF64 entry of r_info's upper or lower 32-bit half."""
        little = self.elf.header.little_endian
        return 8 + (4 if upper == little else 0)

    def _half_of_info(self, upper: bool) -> array[int]:
        return column(self.raw, self.entsize, self.info_half_offset(upper), 4,
                      self.elf.header.little_endian)


def _signed(value: int, word_size: int) -> int:
    sign = 1 << (word_size * 8 - 1)
    return (value ^ sign) - sign


def _dynamic_ranges(elf: ElfFile) -> list[tuple[int, int, bool, str]]:
    """(file offset, size, is_rela, name) of each relocation range in the dynamic table."""
    ranges = []
    for addr_tag, size_tag, is_rela, name in ((C.DT_RELA, C.DT_RELASZ, True, "DT_RELA"),
                                              (C.DT_REL, C.DT_RELSZ, False, "DT_REL")):
        addr, size = elf.dynamic_value(addr_tag), elf.dynamic_value(size_tag)
        if addr is not None and size:
            ranges.append((elf.vaddr_to_offset(addr, name), size, is_rela, name))
    jmprel, pltsz = elf.dynamic_value(C.DT_JMPREL), elf.dynamic_value(C.DT_PLTRELSZ)
    if jmprel is not None and pltsz:
        is_rela = elf.dynamic_value(C.DT_PLTREL) != C.DT_REL
        ranges.append((elf.vaddr_to_offset(jmprel, "DT_JMPREL"), pltsz, is_rela, "DT_JMPREL"))
    return ranges


def _section_ranges(elf: ElfFile, dynsym_index: int | None) -> list[tuple[int, int, bool, str]]:
    ranges = []
    for section in elf.sections:
        if section.type in (C.SHT_RELA, C.SHT_REL) and section.link == dynsym_index \
                and section.size:
            ranges.append((section.offset, section.size, section.type == C.SHT_RELA,
                           section.name))
    return ranges


def _merge(ranges: list[tuple[int, int, bool, str]]) -> list[tuple[int, int, bool, str]]:
    merged: list[tuple[int, int, bool, str]] = []
    for offset, size, is_rela, name in sorted(ranges):
        if merged and offset < merged[-1][0] + merged[-1][1] and merged[-1][2] == is_rela:
            last = merged[-1]
            end = max(last[0] + last[1], offset + size)
            merged[-1] = (last[0], end - last[0], is_rela, last[3])
        else:
            merged.append((offset, size, is_rela, name))
    return merged


def dynamic_relocation_tables(elf: ElfFile) -> list[RelocationTable]:
    """Every relocation table whose symbol indices refer to .dynsym, each entry once."""
    dynsym = elf.sections_of_type(C.SHT_DYNSYM)
    dynsym_index = dynsym[0].index if dynsym else None
    ranges = _merge(_dynamic_ranges(elf) + _section_ranges(elf, dynsym_index))
    tables = []
    for offset, size, is_rela, name in ranges:
        entsize = elf.word_size * (3 if is_rela else 2)
        if size % entsize:
            raise elf.corrupt(f"relocation table {name} size {size} is not a multiple of {entsize}")
        elf.check_range(offset, size, f"relocation table {name}")
        tables.append(RelocationTable(elf, _section_name_at(elf, offset) or name, offset,
                                      size // entsize, is_rela))
    return tables


def static_relocation_tables(elf: ElfFile) -> list[RelocationTable]:
    """Relocation sections whose symbols are in .symtab (kept by --emit-relocs)."""
    symtab = elf.sections_of_type(C.SHT_SYMTAB)
    if not symtab:
        return []
    return [RelocationTable(elf, s.name, s.offset,
                            s.size // (elf.word_size * (3 if s.type == C.SHT_RELA else 2)),
                            s.type == C.SHT_RELA)
            for s in elf.sections
            if s.type in (C.SHT_RELA, C.SHT_REL) and s.link == symtab[0].index]


def _section_name_at(elf: ElfFile, offset: int) -> str | None:
    return next((s.name for s in elf.sections
                 if s.offset == offset and s.type in (C.SHT_RELA, C.SHT_REL)), None)


def relr_addresses(elf: ElfFile) -> list[int]:
    """Addresses relocated by the packed relative table (DT_RELR), decoded."""
    addr, size = elf.dynamic_value(C.DT_RELR), elf.dynamic_value(C.DT_RELRSZ)
    if addr is None or not size:
        sections = elf.sections_of_type(C.SHT_RELR)
        if not sections:
            return []
        offset, size = sections[0].offset, sections[0].size
    else:
        offset = elf.vaddr_to_offset(addr, "DT_RELR")
    w = elf.word_size
    entries = column(elf.bytes_at(offset, size - size % w, "DT_RELR table"), w, 0, w,
                     elf.header.little_endian)
    return decode_relr(entries, w)


def decode_relr(entries: array[int] | list[int], word_size: int) -> list[int]:
    """Expand RELR: an even entry is an address, an odd one a bitmap of the next words."""
    addresses: list[int] = []
    bits = word_size * 8 - 1
    where = 0
    for entry in entries:
        if entry & 1 == 0:
            addresses.append(entry)
            where = entry + word_size
            continue
        bitmap, k = entry >> 1, 0
        while bitmap:
            if bitmap & 1:
                addresses.append(where + k * word_size)
            bitmap >>= 1
            k += 1
        where += bits * word_size
    return addresses
