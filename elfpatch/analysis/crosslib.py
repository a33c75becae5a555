"""Who defines and who references each UNIQUE symbol within a set of libraries.

Fixing one library alone is safe only if no other library needs its UNIQUE
symbols: a library that references one as undefined fails to load once the
definition is made LOCAL or hidden, and a symbol defined by several
libraries of the set is one object shared on purpose (a singleton, a type
tag whose address is its identity); localising it hands each library a copy
of its own.  This module finds both situations before anything is written.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import SymbolTable, read_dynsym


@dataclass
class LibrarySymbols:
    """The dynamic symbols of one library that matter to the cross-library check."""

    label: str
    unique_defined: set[str] = field(default_factory=set)
    other_defined: set[str] = field(default_factory=set)  # GLOBAL/WEAK definitions
    undefined: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class SharedUse:
    """How the rest of the set uses one UNIQUE symbol of one library."""

    referenced_by: tuple[str, ...]  # libraries that need it (undefined there)
    also_defined_by: tuple[str, ...]  # other libraries that define it too

    @property
    def is_shared(self) -> bool:
        return bool(self.referenced_by or self.also_defined_by)


def dynamic_symbols(elf: ElfFile, label: str) -> LibrarySymbols:
    info = LibrarySymbols(label)
    table = read_dynsym(elf)
    if table is None:
        return info
    for index, name in _named_entries(table):
        binding = table.infos[index] >> 4
        if table.shndxs[index] == C.SHN_UNDEF:
            if binding != C.STB_LOCAL:
                info.undefined.add(name)
        elif binding == C.STB_GNU_UNIQUE:
            info.unique_defined.add(name)
        elif binding in (C.STB_GLOBAL, C.STB_WEAK) and _exported(table, index):
            info.other_defined.add(name)
    return info


def _exported(table: SymbolTable, index: int) -> bool:
    return table.others[index] & 0x3 in (C.STV_DEFAULT, C.STV_PROTECTED)


def _named_entries(table: SymbolTable) -> list[tuple[int, str]]:
    offsets = table.name_offsets
    return [(i, table.name(i)) for i in range(1, table.count) if offsets[i]]


def shared_uses(libraries: list[LibrarySymbols]) -> dict[tuple[str, str], SharedUse]:
    """For each (library, UNIQUE symbol) used elsewhere in the set, how it is used."""
    definers: dict[str, list[str]] = defaultdict(list)
    referencers: dict[str, list[str]] = defaultdict(list)
    for lib in libraries:
        for name in lib.unique_defined | lib.other_defined:
            definers[name].append(lib.label)
        for name in lib.undefined:
            referencers[name].append(lib.label)
    uses = {}
    for lib in libraries:
        for name in lib.unique_defined:
            others = tuple(d for d in definers[name] if d != lib.label)
            users = tuple(r for r in referencers[name] if r != lib.label)
            if others or users:
                uses[(lib.label, name)] = SharedUse(users, others)
    return uses
