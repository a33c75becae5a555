"""Function-pointer arrays (init/fini/preinit arrays, legacy .ctors/.dtors) resolved to addresses.

In a position-independent object the array's bytes are not the targets:
each slot is filled at load time by a relocation, RELATIVE (the addend, or
for REL and RELR the slot's own bytes, plus the load base) or absolute
against a symbol.  In a fixed-address executable the bytes are the targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress

from elfpatch.base.text_enum import TextEnum
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocations import dynamic_relocation_tables, relr_addresses
from elfpatch.elf.symbols import read_dynsym


class InitializerKind(TextEnum):
    """Where the loader finds a function it runs at load or unload: one of the arrays,
    or the single DT_INIT/DT_FINI function; the value is the JSON's ``kind``."""

    PREINIT_ARRAY = "preinit_array"
    INIT = "init"
    INIT_ARRAY = "init_array"
    CTORS = "ctors"
    FINI_ARRAY = "fini_array"
    FINI = "fini"
    DTORS = "dtors"


# The legacy arrays that only old crtbegin.o code walks.
LEGACY_ARRAYS = (InitializerKind.CTORS, InitializerKind.DTORS)


class SlotResolution(TextEnum):
    """How a slot's target was found."""

    RELATIVE = "relative"  # a RELATIVE relocation
    ABSOLUTE = "absolute"  # an absolute relocation against a defined symbol
    RELR = "relr"  # listed in the packed relative relocations
    IN_PLACE = "in-place"  # no relocation: the bytes are the target (fixed address)
    UNRESOLVED = "unresolved"  # a relocation against an undefined symbol, or of a kind not known


@dataclass(frozen=True)
class ArraySlot:
    index: int
    slot_address: int
    target: int | None  # None when the slot cannot be resolved
    symbol: str | None  # set when an absolute relocation names the target symbol
    how: SlotResolution


@dataclass(frozen=True)
class ArrayLocation:
    kind: InitializerKind
    address: int
    size: int


_DYNAMIC_ARRAYS = (
    (InitializerKind.PREINIT_ARRAY, C.DT_PREINIT_ARRAY, C.DT_PREINIT_ARRAYSZ,
     C.SHT_PREINIT_ARRAY),
    (InitializerKind.INIT_ARRAY, C.DT_INIT_ARRAY, C.DT_INIT_ARRAYSZ, C.SHT_INIT_ARRAY),
    (InitializerKind.FINI_ARRAY, C.DT_FINI_ARRAY, C.DT_FINI_ARRAYSZ, C.SHT_FINI_ARRAY),
)


def array_locations(elf: ElfFile) -> list[ArrayLocation]:
    """Where each array is, from the dynamic table (what the loader uses) or the sections."""
    found = []
    for kind, addr_tag, size_tag, section_type in _DYNAMIC_ARRAYS:
        addr, size = elf.dynamic_value(addr_tag), elf.dynamic_value(size_tag)
        if addr is not None and size:
            found.append(ArrayLocation(kind, addr, size))
            continue
        sections = elf.sections_of_type(section_type)
        if sections and sections[0].size and not elf.dynamic:
            found.append(ArrayLocation(kind, sections[0].addr, sections[0].size))
    for name, kind in ((".ctors", InitializerKind.CTORS), (".dtors", InitializerKind.DTORS)):
        section = elf.section_by_name(name)
        if section is not None and section.size > 2 * elf.word_size:
            found.append(ArrayLocation(kind, section.addr, section.size))
    return found


def resolved_arrays(elf: ElfFile) -> list[tuple[ArrayLocation, list[ArraySlot]]]:
    """Each array of ``elf`` (``array_locations``) with its slots resolved."""
    locations = array_locations(elf)
    resolver = SlotResolver(elf, locations)
    return [(location, resolver.resolve(location)) for location in locations]


class SlotResolver:
    """Resolves array slots through the object's dynamic relocations, built once per file."""

    def __init__(self, elf: ElfFile, locations: list[ArrayLocation]) -> None:
        self.elf = elf
        # -1 matches no relocation: a machine not listed resolves nothing by relocation.
        kinds = C.RELOCATIONS.get(elf.header.machine)
        self.relative = kinds.relative if kinds is not None else -1
        self.absolute = kinds.absolute if kinds is not None else -1
        self.by_slot = self._relocations_in(locations)
        spans = [(loc.address, loc.address + loc.size) for loc in locations]
        self.relr = {a for a in relr_addresses(elf) if any(lo <= a < hi for lo, hi in spans)}
        self._dynsym = read_dynsym(elf)

    def _relocations_in(
        self, locations: list[ArrayLocation],
    ) -> dict[int, tuple[int, int, int, bool]]:
        """slot address -> (type, symbol index, addend, is_rela) for relocations in the arrays."""
        spans = [(loc.address, loc.address + loc.size) for loc in locations]
        if not spans:
            return {}
        low, high = min(lo for lo, _ in spans), max(hi for _, hi in spans)
        span, found = range(low, high), {}
        for table in dynamic_relocation_tables(self.elf):
            offsets = table.offsets
            # range.__contains__ tests an int in C: no Python step per relocation.
            for k in compress(range(table.count), map(span.__contains__, offsets)):
                found[offsets[k]] = (*table.entry(k), table.is_rela)
        return found

    def resolve(self, location: ArrayLocation) -> list[ArraySlot]:
        word = self.elf.word_size
        fmt = "I" if word == 4 else "Q"
        slots = []
        for index in range(location.size // word):
            address = location.address + index * word
            offset = self.elf.vaddr_to_offset(address, f"{location.kind} slot {index}")
            (stored,) = self.elf.unpack(fmt, offset, f"{location.kind} slot {index}")
            slots.append(self._slot(index, address, stored))
        return slots

    def _slot(self, index: int, address: int, stored: int) -> ArraySlot:
        relocation = self.by_slot.get(address)
        if relocation is not None:
            rtype, symbol_index, addend, is_rela = relocation
            if rtype == self.relative:
                # RELA carries the target in the addend; REL keeps it in the slot.
                return ArraySlot(index, address, addend if is_rela else stored, None,
                                 SlotResolution.RELATIVE)
            if rtype == self.absolute and self._dynsym is not None \
                    and symbol_index < self._dynsym.count:
                symbol = self._dynsym.row(symbol_index)
                if symbol.defined:
                    target = symbol.value + (addend if is_rela else stored)
                    return ArraySlot(index, address, target, symbol.name,
                                     SlotResolution.ABSOLUTE)
                return ArraySlot(index, address, None, symbol.name,
                                 SlotResolution.UNRESOLVED)
            return ArraySlot(index, address, None, None, SlotResolution.UNRESOLVED)
        if address in self.relr:
            return ArraySlot(index, address, stored, None, SlotResolution.RELR)
        return ArraySlot(index, address, stored, None, SlotResolution.IN_PLACE)
