"""Turn one library's plan into byte edits.

GLOBAL and WEAK+HIDDEN change only the st_info and st_other bytes of the
symbols concerned.  LOCAL also moves the symbols in front of the globals
(see ``reorder.py``), in .dynsym and in .symtab alike.
"""

from __future__ import annotations

from collections import defaultdict

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import read_gnu_hash, read_sysv_hash
from elfpatch.elf.relocations import dynamic_relocation_tables, static_relocation_tables
from elfpatch.elf.symbols import (
    DYNSYM,
    SYMTAB,
    SymbolTable,
    read_dynsym,
    read_symtab,
    versym_offset,
)
from elfpatch.errors import UnsupportedElfError
from elfpatch.patch import regions, reorder
from elfpatch.patch.edit import Edit
from elfpatch.patch.regions import check_edits
from elfpatch.patch.reorder import Reordering
from elfpatch.plan.bindings import (
    LOCAL_TARGETS,
    BindingTarget,
    LibraryPlan,
)


def new_info_other(info: int, other: int, target: str) -> tuple[int, int]:
    """st_info and st_other after rewriting a symbol to ``target``."""
    symbol_type = C.st_type(info)
    if target == BindingTarget.LOCAL:
        return C.st_info(C.STB_LOCAL, symbol_type), other
    if target == BindingTarget.LOCAL_HIDDEN:
        return C.st_info(C.STB_LOCAL, symbol_type), C.with_visibility(other, C.STV_HIDDEN)
    if target == BindingTarget.WEAK_HIDDEN:
        return C.st_info(C.STB_WEAK, symbol_type), C.with_visibility(other, C.STV_HIDDEN)
    if target == BindingTarget.GLOBAL:
        return C.st_info(C.STB_GLOBAL, symbol_type), C.with_visibility(other, C.STV_DEFAULT)
    raise ValueError(f"unknown target binding {target!r}")


def plan_edits(elf: ElfFile, plan: LibraryPlan) -> list[Edit]:
    """Every byte edit the plan needs, each proven to stay inside its own table."""
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
    check_edits(elf, edits)  # before anything is written: each edit inside its own table
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
    moved = tuple(sorted(i for i, target in by_index.items() if target in LOCAL_TARGETS))
    if not moved:
        return _changed_entries(table, patched, by_index)
    if elf.header.machine == C.EM_MIPS and table.kind == DYNSYM:
        raise UnsupportedElfError(elf.name, "cannot move MIPS dynamic symbols: the GOT is tied "
                                  "to .dynsym's order", hint="use --to global or --to weak-hidden")
    reordering = Reordering(table.count, reorder.first_global_index(table), moved)
    if moved[0] < reordering.first_global:
        raise elf.corrupt(f"{table.kind} symbol {moved[0]} is UNIQUE but inside the local range")
    edits = [Edit(table.offset, reorder.reordered_table(table, patched, reordering),
                  f"{table.kind} entries", table.kind)]
    if table.section is not None:  # without section headers nothing records the first global
        edits.append(reorder.sh_info_edit(elf, table.section, reordering.new_first_global,
                                          f"{table.kind} sh_info"))
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
                 f"{table.kind} symbol {i}", table.kind) for i in sorted(by_index)]


def _dynamic_index_edits(elf: ElfFile, table: SymbolTable, reordering: Reordering) -> list[Edit]:
    edits = reorder.relocation_edits(elf, dynamic_relocation_tables(elf), reordering)
    versym = versym_offset(elf)
    if versym is not None:
        edits.append(reorder.versym_edit(elf, versym, reordering))
    gnu = read_gnu_hash(elf)
    if gnu is not None:
        edits += reorder.gnu_hash_edits(elf, gnu, reordering, table.name_bytes)
    sysv = read_sysv_hash(elf)
    if sysv is not None:
        edits += reorder.sysv_hash_edits(elf, sysv, reordering)
    return edits


def _static_index_edits(elf: ElfFile, table: SymbolTable, reordering: Reordering) -> list[Edit]:
    """.symtab's index users: relocation sections linked to it, SHT_SYMTAB_SHNDX, groups."""
    assert table.section is not None
    symtab_index = table.section.index
    edits = reorder.relocation_edits(elf, static_relocation_tables(elf), reordering,
                                     regions.STATIC_RELOCATIONS)
    for section in elf.sections:
        if section.type == C.SHT_SYMTAB_SHNDX and section.link == symtab_index:
            edits.append(reorder.symtab_shndx_edit(elf, section.offset, reordering))
        if section.type == C.SHT_GROUP and section.link == symtab_index:
            # A group's sh_info is the index of its signature symbol.
            edits.append(reorder.sh_info_edit(elf, section, reordering.new_index(section.info),
                                              f"{section.name} signature symbol"))
    return edits
