"""Static initializers and finalizers of one object, in the order the loader runs them.

Per object glibc runs DT_INIT, then DT_INIT_ARRAY in order (an executable's
DT_PREINIT_ARRAY comes before everything); legacy .ctors run from inside
DT_INIT, last entry first.  At exit and dlclose: DT_FINI_ARRAY last entry
first, then DT_FINI (whose legacy .dtors run first entry first).

Each entry is named from .symtab, else .dynsym, and placed in a
translation unit: from DWARF when the object has it, else from the
``STT_FILE`` symbol that precedes the entry's local symbol in .symtab (an
unstripped release build names each TU's source file there), else from the
name gcc and clang give TU initializers, which for gcc is the first global
symbol the TU defines rather than always its file name.

With link-time optimisation gcc merges every TU's dynamic initialization
into one function (``_sub_I_65535_0.0``) that calls each TU's initializer
in an order of its choosing; such an entry is split into ``parts`` once its
machine code has been read (``init_order``).
"""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import compress

from elfpatch.base.text_enum import TextEnum
from elfpatch.cxx.demangle import demangle, demangle_label
from elfpatch.elf import constants as C
from elfpatch.elf.arrays import (
    LEGACY_ARRAYS,
    ArrayLocation,
    ArraySlot,
    InitializerKind,
    resolved_arrays,
)
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import (
    SymbolTable,
    exported_functions_by_address,
    read_dynsym,
    read_symtab,
)

# gcc: _GLOBAL__sub_I.00200_<x>; clang: _GLOBAL__I_000200
_GCC_PRIORITY = re.compile(r"^_GLOBAL__sub_[ID]\.(\d{5})_")
_CLANG_PRIORITY = re.compile(r"^_GLOBAL__[ID]_(\d{6})")
_TU_FUNCTION = re.compile(r"^_GLOBAL__sub_[ID](?:\.\d{5})?_(.+)$")
_SOURCE_SUFFIX = re.compile(r"\.(c|cc|cpp|cxx|c\+\+|C|cp|CPP|mm|m|cu)$")
# gcc -flto: _sub_I_65535_0.0 (constructors), _sub_D_65535_0.0 (destructors).
_MERGED = re.compile(r"^_sub_[ID]_\d{5}_\d+(\.\d+)?$")
# A merged initializer's priority: ``_sub_I_00101_0.0``; 65535 is the default.
_MERGED_PRIORITY = re.compile(r"^_sub_[ID]_(\d{5})_")
DEFAULT_PRIORITY = 65535
# DWARF's name for the compile units of link-time optimised code.
_ARTIFICIAL_UNIT = "<artificial>"


class UnitSource(TextEnum):
    """Where an initializer's translation unit was named from; the JSON's
    ``translation_unit_source``."""

    DWARF = "dwarf"  # the compile unit that holds its address
    FILE_SYMBOL = "file symbol"  # the STT_FILE symbol before its local symbol in .symtab
    SYMBOL_NAME = "symbol name"  # the name gcc or clang gives a TU's initializer
    CONSTRUCTED = "constructed object"  # a merged initializer's part, by what it builds


# The C runtime's own entries: not user code, but listed so the order is complete.
# libgcc's init_have_lse_atomics (aarch64) sets the flag its outlined atomics test
# to choose an instruction sequence; both are right, so reading it early is too.
RUNTIME_ENTRIES = frozenset({"frame_dummy", "__do_global_dtors_aux", "_init", "_fini",
                             "register_tm_clones", "deregister_tm_clones",
                             "init_have_lse_atomics"})


@dataclass(frozen=True)
class InitializerPart:
    """One per-TU initializer inside a merged one (gcc -flto), in the order they run."""

    position: int  # 1, 2, … in call order
    address: int | None  # the function called; None for code inlined into the merged one
    symbol: str | None
    demangled: str | None
    translation_unit: str | None
    translation_unit_source: UnitSource | None  # never FILE_SYMBOL


@dataclass(frozen=True)
class InitializerEntry:
    kind: InitializerKind
    index: int  # position within its array (0 for DT_INIT/DT_FINI)
    address: int | None  # None when the slot could not be resolved
    symbol: str | None
    demangled: str | None
    translation_unit: str | None
    translation_unit_source: UnitSource | None  # never CONSTRUCTED
    priority: int | None
    registers_destructor: bool = False
    parts: tuple[InitializerPart, ...] = ()  # a merged initializer's, once analysed
    # Without a symbol of its own (a stripped file): the nearest exported function
    # at or below its address, as "name+0xoffset", to find it in a disassembly.
    nearest: str | None = None

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
        """The initializers whose machine code is read: resolved, not null, and not the
        C runtime's."""
        return [e for e in self.initializers if e.address and not e.is_runtime]


def is_merged_initializer(symbol: str | None) -> bool:
    """gcc's link-time optimised initializer, which calls every TU's in turn."""
    return symbol is not None and bool(_MERGED.match(symbol))


def init_priority(symbol: str | None) -> int | None:
    """The init_priority an initializer's name gives (None: the default, or no name)."""
    if symbol is None:
        return None
    match = _GCC_PRIORITY.match(symbol) or _CLANG_PRIORITY.match(symbol)
    if match:
        return int(match.group(1))
    merged = _MERGED_PRIORITY.match(symbol)
    if merged and int(merged.group(1)) != DEFAULT_PRIORITY:
        return int(merged.group(1))
    return None


def run_priority(symbol: str | None) -> int | None:
    """The priority a compiler-named initializer runs at: its init_priority, or the
    default for a TU's (or a merged) initializer named without one.  None for any
    other name, or none: a constructor attribute's priority is not in its name."""
    if symbol is None:
        return None
    explicit = init_priority(symbol)
    if explicit is not None:
        return explicit
    if _TU_FUNCTION.match(symbol) or _MERGED.match(symbol):
        return DEFAULT_PRIORITY
    return None


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
    """Names addresses from .symtab, else .dynsym, scanning each table once; and the
    source file of the translation unit whose local symbol an address has."""

    def __init__(self, elf: ElfFile) -> None:
        self.symtab = read_symtab(elf)
        self.tables = [t for t in (self.symtab, read_dynsym(elf)) if t is not None]
        self.thumb = elf.header.machine == C.EM_ARM
        self.files: dict[int, str] = {}  # address -> STT_FILE name, found along with names

    def names(self, addresses: Iterable[int]) -> dict[int, str]:
        # Address 0 is a null slot, never code; only a symbol of code or data names one
        # (the STT_FILE symbols of crt1.o and friends have the value 0 too).
        wanted = {a & ~1 if self.thumb else a for a in addresses} - {0}
        found: dict[int, str] = {}
        for table in self.tables:
            values, shndxs = table.values, table.shndxs
            candidates: dict[int, list[int]] = {}
            # The few symbols at wanted addresses, picked out in C (531k in libtorch's .symtab).
            types = table.symbol_types
            for index in compress(range(len(values)), map(wanted.__contains__, values)):
                value = values[index]
                if value not in found and shndxs[index] and types[index] not in _NOT_CODE:
                    candidates.setdefault(value, []).append(index)
            for value, indices in candidates.items():
                found[value] = table.name(_best_symbol(table, indices))
                if table is self.symtab:
                    self._note_file(value, indices)
        return found

    def _note_file(self, address: int, indices: list[int]) -> None:
        """The STT_FILE symbol before a local symbol names its translation unit."""
        assert self.symtab is not None
        table = self.symtab
        # The function's own symbol: a mapping symbol ($x) of another file may share
        # its address.
        local = next((i for i in indices if table.binding(i) == C.STB_LOCAL
                      and table.symbol_type(i) in _FUNCTION_TYPES), None)
        if local is None:
            return
        k = bisect_right(self._file_symbols, local) - 1
        if k >= 0:
            name = self.symtab.name(self._file_symbols[k])
            if name:  # the linker's own locals follow a FILE symbol without a name
                self.files[address] = name

    @cached_property
    def _file_symbols(self) -> list[int]:
        assert self.symtab is not None
        return self.symtab.indices_with(types=(C.STT_FILE,))


_FUNCTION_TYPES = (C.STT_FUNC, C.STT_GNU_IFUNC)
# Symbols that name no address an array slot can hold.
_NOT_CODE = frozenset((C.STT_FILE, C.STT_SECTION, C.STT_TLS))
# The -1 that old crtbegin.o put at the head of .ctors/.dtors, in either word size.
_ALL_ONES = ((1 << 64) - 1, (1 << 32) - 1)


def _best_symbol(table: SymbolTable, indices: list[int]) -> int:
    """Prefer the compiler's TU initializer name, then functions, then globals."""
    def rank(index: int) -> tuple[bool, bool, bool]:
        name_is_tu = table.name(index).startswith("_GLOBAL__")
        is_function = table.symbol_type(index) in _FUNCTION_TYPES
        return (not name_is_tu, not is_function, table.binding(index) == C.STB_LOCAL)
    return min(indices, key=rank)


class UnitFinder:
    """Translation unit of an address, from DWARF compile units (when present)."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self._debug = elf.section_by_name(".debug_info") is not None
        self._known: dict[int, str | None] = {}

    def prime(self, addresses: Iterable[int]) -> None:
        """Look up many addresses at once (one pass over the debug information)."""
        wanted = [a for a in addresses if a not in self._known]
        if not wanted:
            return
        found = _units_of(self.elf, wanted) if self._debug else {}
        for address in wanted:
            self._known[address] = found.get(address)

    def unit(self, address: int) -> str | None:
        self.prime([address])
        name = self._known[address]
        # Link-time optimised code: one artificial unit for all the TUs.
        return name if name != _ARTIFICIAL_UNIT else None


def _units_of(elf: ElfFile, addresses: list[int]) -> dict[int, str]:
    from elfpatch.analysis.dwarf import units_of

    return units_of(elf, addresses)


def _translation_unit(address: int | None, symbol: str | None, units: UnitFinder,
                      files: dict[int, str]) -> tuple[str | None, UnitSource | None]:
    """(translation unit, where its name came from): DWARF, STT_FILE, gcc's naming."""
    found = [(units.unit(address) if address is not None else None, UnitSource.DWARF),
             (files.get(address) if address is not None else None, UnitSource.FILE_SYMBOL),
             (unit_from_symbol(symbol), UnitSource.SYMBOL_NAME)]
    return next(((name, source) for name, source in found if name), (None, None))


def _entry(kind: InitializerKind, index: int, address: int | None, symbol: str | None,
           units: UnitFinder, files: dict[int, str]) -> InitializerEntry:
    unit, source = _translation_unit(address, symbol, units, files)
    return InitializerEntry(
        kind=kind, index=index, address=address, symbol=symbol,
        demangled=demangle(symbol) if symbol else None,
        translation_unit=unit, translation_unit_source=source,
        priority=init_priority(symbol))


def name_part(units: UnitFinder, position: int, address: int | None, symbol: str | None,
              constructs: Iterable[str]) -> InitializerPart:
    """A part of a merged initializer, placed in a translation unit where the binary
    allows: DWARF, gcc's name for a TU initializer, else the first global it builds."""
    unit, source = _translation_unit(address, symbol, units, {})
    # A function-local static (and any guard variable) is not what names a TU.
    first = next((s for s in constructs if not s.startswith(("_ZZ", "_ZGV"))), None)
    if unit is None and first is not None:
        unit, source = f"the TU constructing {demangle_label(first)}", UnitSource.CONSTRUCTED
    return InitializerPart(position, address, symbol, demangle(symbol) if symbol else None,
                           unit, source)


def _slots_by_kind(elf: ElfFile) -> dict[InitializerKind, list[ArraySlot]]:
    slots: dict[InitializerKind, list[ArraySlot]] = {}
    for location, resolved in resolved_arrays(elf):
        if location.kind in LEGACY_ARRAYS and not _has_runner(resolved):
            continue
        slots[location.kind] = [s for s in resolved if not _is_sentinel(location, s)]
    return slots


def _has_runner(slots: list[ArraySlot]) -> bool:
    """Whether crt code walks these .ctors/.dtors: the old crtbegin.o that did
    (``__do_global_ctors_aux``, ``__do_global_dtors_aux``) put a -1 in front of
    the list (``__CTOR_LIST__``).  The crtbegin.o of toolchains that use
    .init_array puts none and walks nothing: ld folds input .ctors into
    .init_array, and a .ctors kept apart (a linker script) never runs."""
    return bool(slots) and slots[0].target in _ALL_ONES


def _with_nearest(elf: ElfFile, entries: list[InitializerEntry]) -> list[InitializerEntry]:
    """Entries without a symbol, placed after the nearest exported function (stripped files)."""
    unnamed = [e for e in entries if e.symbol is None and e.address is not None]
    if not unnamed:
        return entries
    functions = exported_functions_by_address(elf)
    starts = [address for address, _name in functions]
    placed = {}
    for entry in unnamed:
        assert entry.address is not None
        at = bisect_right(starts, entry.address) - 1
        if at >= 0:
            address, name = functions[at]
            offset = entry.address - address
            placed[id(entry)] = f"{name}+{offset:#x}" if offset else name
    return [dataclasses.replace(e, nearest=placed[id(e)]) if id(e) in placed else e
            for e in entries]


def _is_sentinel(location: ArrayLocation, slot: ArraySlot) -> bool:
    """.ctors/.dtors start with -1 and end with 0."""
    if location.kind not in LEGACY_ARRAYS or slot.target is None:
        return False
    return slot.target == 0 or slot.target in _ALL_ONES



def list_initializers(elf: ElfFile, path: str, member: str | None = None) -> ObjectInits:
    if elf.header.type == C.ET_REL:
        # A relocatable object (.o) is never loaded nor run: its .init_array slots
        # hold zeros until the link fills them in, and what they name runs in the
        # order of the program or library it is linked into (PySide6's wheels ship
        # some).  It lists none of its own.
        return ObjectInits(path, member, elf.header.machine_name, elf.header.type_name, (), ())
    slots = _slots_by_kind(elf)
    init, fini = elf.dynamic_value(C.DT_INIT), elf.dynamic_value(C.DT_FINI)
    addresses = [s.target for group in slots.values() for s in group if s.target is not None]
    addresses += [a for a in (init, fini) if a]
    namer = SymbolNamer(elf)
    names = namer.names(addresses)
    units = UnitFinder(elf)
    units.prime(addresses)

    def from_slots(kind: InitializerKind, reverse: bool = False) -> list[InitializerEntry]:
        group = slots.get(kind, [])
        ordered = reversed(group) if reverse else group
        return [_entry(kind, s.index, s.target, s.symbol or _name(s.target), units,
                       namer.files) for s in ordered]

    def _name(address: int | None) -> str | None:
        key = _key(elf, address)
        return None if key is None else names.get(key)

    def single(kind: InitializerKind, address: int | None) -> list[InitializerEntry]:
        return [_entry(kind, 0, address, names.get(address), units, namer.files)] \
            if address else []

    kind = InitializerKind
    initializers = [*(from_slots(kind.PREINIT_ARRAY) if elf.header.type == C.ET_EXEC
                      or _is_executable(elf) else []),
                    *single(kind.INIT, init), *from_slots(kind.CTORS, reverse=True),
                    *from_slots(kind.INIT_ARRAY)]
    finalizers = [*from_slots(kind.FINI_ARRAY, reverse=True), *from_slots(kind.DTORS),
                  *single(kind.FINI, fini)]
    initializers, finalizers = _with_nearest(elf, initializers), _with_nearest(elf, finalizers)
    return ObjectInits(path, member, elf.header.machine_name, elf.header.type_name,
                       tuple(initializers), tuple(finalizers))


def _key(elf: ElfFile, address: int | None) -> int | None:
    if address is None:
        return None
    return address & ~1 if elf.header.machine == C.EM_ARM else address


def _is_executable(elf: ElfFile) -> bool:
    """A PIE is ET_DYN too; it is an executable when it asks for an interpreter."""
    return any(seg.type == C.PT_INTERP for seg in elf.segments)
