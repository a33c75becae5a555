"""Static initializers and finalizers of one object, in the order the loader runs them.

Per object glibc runs DT_INIT, then DT_INIT_ARRAY in order (an executable's
DT_PREINIT_ARRAY comes before everything); legacy .ctors run from inside
DT_INIT, last entry first.  At exit and dlclose: DT_FINI_ARRAY last entry
first, then DT_FINI (whose legacy .dtors run first entry first).

Each entry is named from .symtab, else .dynsym, and placed in a
translation unit: from DWARF when the object has it, else from the name gcc
and clang give TU initializers, which for gcc is the first global symbol
the TU defines rather than always its file name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress

from elfpatch.demangle import demangle
from elfpatch.elf import constants as C
from elfpatch.elf.arrays import ArrayLocation, ArraySlot, SlotResolver, array_locations
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import SymbolTable, read_dynsym, read_symtab

KIND_PREINIT = "preinit_array"
KIND_INIT = "init"
KIND_INIT_ARRAY = "init_array"
KIND_CTORS = "ctors"
KIND_FINI_ARRAY = "fini_array"
KIND_FINI = "fini"
KIND_DTORS = "dtors"

# gcc: _GLOBAL__sub_I.00200_<x>; clang: _GLOBAL__I_000200
_GCC_PRIORITY = re.compile(r"^_GLOBAL__sub_[ID]\.(\d{5})_")
_CLANG_PRIORITY = re.compile(r"^_GLOBAL__[ID]_(\d{6})")
_TU_FUNCTION = re.compile(r"^_GLOBAL__sub_[ID](?:\.\d{5})?_(.+)$")
_SOURCE_SUFFIX = re.compile(r"\.(c|cc|cpp|cxx|c\+\+|C|cp|CPP|mm|m|cu)$")

# The C runtime's own entries: not user code, but listed so the order is complete.
RUNTIME_ENTRIES = frozenset({"frame_dummy", "__do_global_dtors_aux", "_init", "_fini",
                             "register_tm_clones", "deregister_tm_clones"})


@dataclass(frozen=True)
class InitializerEntry:
    kind: str
    index: int  # position within its array (0 for DT_INIT/DT_FINI)
    address: int | None  # None when the slot could not be resolved
    symbol: str | None
    demangled: str | None
    translation_unit: str | None
    translation_unit_source: str | None  # "dwarf" or "symbol name"
    priority: int | None
    registers_destructor: bool = False

    @property
    def is_runtime(self) -> bool:
        return self.symbol in RUNTIME_ENTRIES


@dataclass(frozen=True)
class ObjectInits:
    path: str
    member: str | None
    machine: str
    elf_type: str
    initializers: tuple[InitializerEntry, ...]
    finalizers: tuple[InitializerEntry, ...]

    @property
    def followed(self) -> list[InitializerEntry]:
        """The initializers whose machine code is read: resolved, and not the C runtime's."""
        return [e for e in self.initializers if e.address is not None and not e.is_runtime]


def init_priority(symbol: str | None) -> int | None:
    if symbol is None:
        return None
    match = _GCC_PRIORITY.match(symbol) or _CLANG_PRIORITY.match(symbol)
    return int(match.group(1)) if match else None


def unit_from_symbol(symbol: str | None) -> str | None:
    """The TU a compiler-named initializer belongs to, as far as its name tells."""
    if symbol is None:
        return None
    match = _TU_FUNCTION.match(symbol)
    if not match:
        return None
    tail = match.group(1)
    if _SOURCE_SUFFIX.search(tail):
        return tail
    # gcc names the function after the first global symbol the TU defines.
    return f"the TU defining {demangle(tail)}"


class SymbolNamer:
    """Names addresses from .symtab, else .dynsym, scanning each table once."""

    def __init__(self, elf: ElfFile) -> None:
        self.tables = [t for t in (read_symtab(elf), read_dynsym(elf)) if t is not None]
        self.thumb = elf.header.machine == 40

    def names(self, addresses: Iterable[int]) -> dict[int, str]:
        wanted = {a & ~1 if self.thumb else a for a in addresses}
        found: dict[int, str] = {}
        for table in self.tables:
            values, shndxs = table.values, table.shndxs
            candidates: dict[int, list[int]] = {}
            # The few symbols at wanted addresses, picked out in C (531k in libtorch's .symtab).
            for index in compress(range(len(values)), map(wanted.__contains__, values)):
                value = values[index]
                if value not in found and shndxs[index]:
                    candidates.setdefault(value, []).append(index)
            for value, indices in candidates.items():
                found[value] = table.name(_best_symbol(table, indices))
        return found


def _best_symbol(table: SymbolTable, indices: list[int]) -> int:
    """Prefer the compiler's TU initializer name, then functions, then globals."""
    def rank(index: int) -> tuple[bool, bool, bool]:
        name_is_tu = table.name(index).startswith("_GLOBAL__")
        is_function = table.infos[index] & 0xF in (C.STT_FUNC, C.STT_GNU_IFUNC)
        return (not name_is_tu, not is_function, table.infos[index] >> 4 == C.STB_LOCAL)
    return min(indices, key=rank)


class UnitFinder:
    """Translation unit of an address, from DWARF compile units (when present)."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self._ranges: list[tuple[int, int, str]] | None = None

    def unit(self, address: int) -> str | None:
        if self._ranges is None:
            self._ranges = _compile_unit_ranges(self.elf)
        for low, high, name in self._ranges:
            if low <= address < high:
                return name
        return None


def _compile_unit_ranges(elf: ElfFile) -> list[tuple[int, int, str]]:
    if elf.section_by_name(".debug_info") is None:
        return []
    from elfpatch.analysis.dwarf import compile_unit_ranges

    return compile_unit_ranges(elf)


def _entry(kind: str, index: int, address: int | None, symbol: str | None,
           units: UnitFinder) -> InitializerEntry:
    dwarf_unit = units.unit(address) if address is not None else None
    unit = dwarf_unit or unit_from_symbol(symbol)
    return InitializerEntry(
        kind=kind, index=index, address=address, symbol=symbol,
        demangled=demangle(symbol) if symbol else None,
        translation_unit=unit,
        translation_unit_source="dwarf" if dwarf_unit else ("symbol name" if unit else None),
        priority=init_priority(symbol))


def _slots_by_kind(elf: ElfFile) -> dict[str, list[ArraySlot]]:
    locations = array_locations(elf)
    resolver = SlotResolver(elf, locations)
    slots: dict[str, list[ArraySlot]] = {}
    for location in locations:
        slots[location.kind] = [s for s in resolver.resolve(location)
                                if not _is_sentinel(location, s)]
    return slots


def _is_sentinel(location: ArrayLocation, slot: ArraySlot) -> bool:
    """.ctors/.dtors start with -1 and end with 0."""
    if location.kind not in (KIND_CTORS, KIND_DTORS) or slot.target is None:
        return False
    return slot.target in (0, (1 << 64) - 1, (1 << 32) - 1)


def list_initializers(elf: ElfFile, path: str, member: str | None = None) -> ObjectInits:
    slots = _slots_by_kind(elf)
    init, fini = elf.dynamic_value(C.DT_INIT), elf.dynamic_value(C.DT_FINI)
    addresses = [s.target for group in slots.values() for s in group if s.target is not None]
    addresses += [a for a in (init, fini) if a]
    names = SymbolNamer(elf).names(addresses)
    units = UnitFinder(elf)

    def from_slots(kind: str, reverse: bool = False) -> list[InitializerEntry]:
        group = slots.get(kind, [])
        ordered = reversed(group) if reverse else group
        return [_entry(kind, s.index, s.target, s.symbol or _name(s.target), units)
                for s in ordered]

    def _name(address: int | None) -> str | None:
        key = _key(elf, address)
        return None if key is None else names.get(key)

    def single(kind: str, address: int | None) -> list[InitializerEntry]:
        return [_entry(kind, 0, address, names.get(address), units)] if address else []

    initializers = [*(from_slots(KIND_PREINIT) if elf.header.type == C.ET_EXEC
                      or _is_executable(elf) else []),
                    *single(KIND_INIT, init), *from_slots(KIND_CTORS, reverse=True),
                    *from_slots(KIND_INIT_ARRAY)]
    finalizers = [*from_slots(KIND_FINI_ARRAY, reverse=True), *from_slots(KIND_DTORS),
                  *single(KIND_FINI, fini)]
    return ObjectInits(path, member, elf.header.machine_name, elf.header.type_name,
                       tuple(initializers), tuple(finalizers))


def _key(elf: ElfFile, address: int | None) -> int | None:
    if address is None:
        return None
    return address & ~1 if elf.header.machine == 40 else address


def _is_executable(elf: ElfFile) -> bool:
    """A PIE is ET_DYN too; it is an executable when it asks for an interpreter."""
    return any(seg.type == C.PT_INTERP for seg in elf.segments)
