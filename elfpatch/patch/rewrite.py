"""Turn one library's plan into byte edits.

GLOBAL and WEAK+HIDDEN change only the st_info and st_other bytes of the
symbols concerned.  LOCAL also moves the symbols in front of the globals
(see ``reorder.py``), in .dynsym and in .symtab alike.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import read_gnu_hash, read_sysv_hash
from elfpatch.elf.relocations import RelocationTable, dynamic_relocation_tables
from elfpatch.elf.symbols import DYNSYM, SYMTAB, SymbolTable, read_dynsym, read_symtab
from elfpatch.errors import UnsupportedElfError
from elfpatch.patch import reorder
from elfpatch.patch.plan import TARGET_GLOBAL, TARGET_LOCAL, TARGET_WEAK_HIDDEN, LibraryPlan
from elfpatch.patch.reorder import Edit, Reordering

_EM_MIPS = 8


def new_info_other(info: int, other: int, target: str) -> tuple[int, int]:
    """st_info and st_other after rewriting a symbol to ``target``."""
    symbol_type = info & 0xF
    if target == TARGET_LOCAL:
        return (C.STB_LOCAL << 4) | symbol_type, other
    if target == TARGET_WEAK_HIDDEN:
        return (C.STB_WEAK << 4) | symbol_type, (other & ~0x3) | C.STV_HIDDEN
    if target == TARGET_GLOBAL:
        return (C.STB_GLOBAL << 4) | symbol_type, other & ~0x3
    raise ValueError(f"unknown target binding {target!r}")


def plan_edits(elf: ElfFile, plan: LibraryPlan) -> list[Edit]:
    targets: dict[str, dict[int, str]] = defaultdict(dict)
    for change in plan.changes:
        targets[change.table][change.index] = change.target
    edits: list[Edit] = []
    tables = {DYNSYM: read_dynsym(elf), SYMTAB: read_symtab(elf)}
    for kind, by_index in targets.items():
        table = tables[kind]
        if table is None:
            raise elf.corrupt(f"the plan names {kind}, which the file does not have")
        edits.extend(_table_edits(elf, table, by_index))
    return edits


def _patched_entries(table: SymbolTable, by_index: dict[int, str]) -> bytearray:
    """A copy of the table with each planned symbol's st_info and st_other rewritten."""
    data = bytearray(table.raw)
    info_at, other_at = table.field_offset("info"), table.field_offset("other")
    for index, target in by_index.items():
        base = index * table.entsize
        data[base + info_at], data[base + other_at] = new_info_other(
            data[base + info_at], data[base + other_at], target)
    return data


def _table_edits(elf: ElfFile, table: SymbolTable, by_index: dict[int, str]) -> list[Edit]:
    patched = _patched_entries(table, by_index)
    moved = tuple(sorted(i for i, target in by_index.items() if target == TARGET_LOCAL))
    if not moved:
        return _changed_entries(table, patched, by_index)
    if elf.header.machine == _EM_MIPS and table.kind == DYNSYM:
        raise UnsupportedElfError(elf.name, "cannot move MIPS dynamic symbols: the GOT is tied "
                                  "to .dynsym's order", hint="use --to global or --to weak-hidden")
    reordering = Reordering(table.count, reorder.first_global_index(table), moved)
    if moved[0] < reordering.first_global:
        raise elf.corrupt(f"{table.kind} symbol {moved[0]} is UNIQUE but inside the local range")
    edits = [Edit(table.offset, reorder.reordered_table(table, bytes(patched), reordering),
                  f"{table.kind} entries")]
    edits += reorder.sh_info_edit(elf, table, reordering.new_first_global)
    if table.kind == DYNSYM:
        edits += _dynamic_index_edits(elf, table, reordering)
    else:
        edits += _static_index_edits(elf, table, reordering)
    return edits


def _changed_entries(table: SymbolTable, patched: bytearray,
                     by_index: dict[int, str]) -> list[Edit]:
    """One small edit per symbol: only st_info/st_other differ."""
    size = table.entsize
    return [Edit(table.entry_offset(i), bytes(patched[i * size : (i + 1) * size]),
                 f"{table.kind} symbol {i}") for i in sorted(by_index)]


def _dynamic_index_edits(elf: ElfFile, table: SymbolTable, reordering: Reordering) -> list[Edit]:
    edits = reorder.relocation_edits(elf, dynamic_relocation_tables(elf), reordering)
    versym = _versym_offset(elf)
    if versym is not None:
        edits.append(reorder.versym_edit(elf, versym, reordering))
    gnu = read_gnu_hash(elf)
    if gnu is not None:
        edits += reorder.gnu_hash_edits(elf, gnu, reordering, table.name_bytes)
    sysv = read_sysv_hash(elf)
    if sysv is not None:
        edits += reorder.sysv_hash_edits(elf, sysv, reordering)
    return edits


def _versym_offset(elf: ElfFile) -> int | None:
    addr = elf.dynamic_value(C.DT_VERSYM)
    if addr is not None:
        return elf.vaddr_to_offset(addr, "DT_VERSYM")
    sections = elf.sections_of_type(C.SHT_GNU_VERSYM)
    return sections[0].offset if sections else None


def _static_index_edits(elf: ElfFile, table: SymbolTable, reordering: Reordering) -> list[Edit]:
    """.symtab's index users: relocation sections linked to it, SHT_SYMTAB_SHNDX, groups."""
    assert table.section is not None
    symtab_index = table.section.index
    relocation_tables = [
        RelocationTable(elf, s.name, s.offset, s.size // _relocation_entsize(elf, s.type),
                        s.type == C.SHT_RELA)
        for s in elf.sections
        if s.type in (C.SHT_RELA, C.SHT_REL) and s.link == symtab_index
    ]
    edits = reorder.relocation_edits(elf, relocation_tables, reordering)
    for section in elf.sections:
        if section.type == C.SHT_SYMTAB_SHNDX and section.link == symtab_index:
            edits.append(reorder.symtab_shndx_edit(elf, section.offset, reordering))
        if section.type == 17 and section.link == symtab_index:  # SHT_GROUP: sh_info is a symbol
            field = 44 if elf.header.elf_class == 64 else 28
            value = reordering.new_index(section.info)
            order: Literal["little", "big"] = "little" if elf.header.little_endian else "big"
            edits.append(Edit(section.header_offset + field, value.to_bytes(4, order),
                              f"{section.name} signature symbol"))
    return edits


def _relocation_entsize(elf: ElfFile, section_type: int) -> int:
    return elf.word_size * (3 if section_type == C.SHT_RELA else 2)
