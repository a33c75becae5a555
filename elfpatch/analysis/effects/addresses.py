"""Which symbol an address belongs to, and where PLT stubs and GOT slots lead.

Machine-code analysis sees addresses: a store to ``0x4010``, a call to a
PLT stub, a load from a GOT slot.  ``AddressIndex`` turns them into names:

- data addresses to the OBJECT/NOTYPE symbol whose ``[st_value,
  st_value + st_size)`` contains them (.symtab, else .dynsym), through
  sorted start/end columns and ``bisect`` (a TLS symbol's value is an
  offset, not an address: thread-locals are named through their GOT slots);
- function entry points to their symbol and st_size, through one dict;
- GOT slots to the symbol their GLOB_DAT/JUMP_SLOT/TLS relocation names,
  or to the address a RELATIVE relocation (or, in a fixed-address
  executable, the slot's own bytes) puts there;
- PLT stubs (.plt, .plt.sec, .plt.got) to their GOT slot, decoded from the
  stub's bytes by ``plt.py``.

Every index is built on first use from whole columns, so a 531k-entry
.symtab costs a few hundred milliseconds once, never one object per symbol.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import compress, repeat
from operator import add
from typing import ClassVar

from elfpatch.analysis.effects.plt import STUB_BYTES, stub_slot
from elfpatch.analysis.effects.summary import ANCHOR, BARE
from elfpatch.elf import constants as C
from elfpatch.elf.columns import byte_column, byte_mask, column
from elfpatch.elf.eh_frame import FunctionBounds
from elfpatch.elf.file import ElfFile
from elfpatch.elf.layout import unlikely_code
from elfpatch.elf.relocations import RelocationTable, dynamic_relocation_tables, relr_addresses
from elfpatch.elf.symbols import SymbolTable, read_dynsym, read_symtab
from elfpatch.errors import ElfpatchError

PF_X = 1  # p_flags: executable segment
PF_W = 2  # p_flags: writable segment
PT_GNU_RELRO = 0x6474E552  # made read-only once relocated, before initializers run
_LAST_ADDRESS = (1 << 64) - 1  # what an unsigned 64-bit column holds at most

_GOT_SECTIONS = (".got", ".got.plt")
# Symbol types (any binding) of data and of function symbols.
_DATA_TYPES = (C.STT_OBJECT, C.STT_NOTYPE)
_FUNCTION_TYPES = (C.STT_FUNC, C.STT_GNU_IFUNC)


@dataclass(frozen=True)
class GotEntry:
    """What one GOT slot holds once the loader has filled it."""

    symbol: str | None  # the symbol its relocation names, None for a plain address
    address: int | None  # the address it holds when it names no symbol
    defined: bool = True  # the symbol is defined in this object (it may still be preempted)
    symbol_type: int = C.STT_NOTYPE  # st_info type of the symbol
    weak_undefined: bool = False  # an undefined weak reference, often only tested for null
    definition: int | None = None  # address of this object's definition (None for IFUNC)

    @property
    def is_function(self) -> bool:
        return self.symbol_type in (C.STT_FUNC, C.STT_GNU_IFUNC)

    @property
    def is_tls(self) -> bool:
        return self.symbol_type == C.STT_TLS


def symbol_sizes(table: SymbolTable) -> array[int]:
    """The st_size column of a symbol table."""
    elf = table.elf
    return column(table.raw, table.entsize, table.field_offset("size"), elf.word_size,
                  elf.header.little_endian)


class _DataSymbols:
    """Data symbols with a size, sorted by start address for ``bisect``."""

    def __init__(self, table: SymbolTable) -> None:
        self.table = table
        values, shndxs, sizes = table.values, table.shndxs, symbol_sizes(table)
        picked = table.indices_with(types=_DATA_TYPES)
        # Zero-sized symbols (linker markers, aarch64 mapping symbols) contain nothing.
        picked = list(compress(picked, map(sizes.__getitem__, picked)))
        picked = list(compress(picked, map(shndxs.__getitem__, picked)))
        picked = [i for i in picked if shndxs[i] < C.SHN_LORESERVE or shndxs[i] == C.SHN_XINDEX]
        # Stable: among symbols starting at one address the last in the table
        # (globals follow locals) is the one bisect finds.
        picked.sort(key=values.__getitem__)
        self.starts = array("Q", map(values.__getitem__, picked))
        try:
            self.ends = array("Q", map(add, self.starts, map(sizes.__getitem__, picked)))
        except OverflowError:  # a corrupt st_value or st_size: the extent stops at the top,
            # past which no address is anything this object's code can read
            self.ends = array("Q", map(min, map(add, self.starts, map(sizes.__getitem__, picked)),
                                       repeat(_LAST_ADDRESS)))
        self.indices = picked
        self._names: dict[int, str] = {}

    def containing(self, address: int) -> str | None:
        k = self._position(address)
        if k is None:
            return None
        return self._name(self.indices[k])

    def start_containing(self, address: int) -> int | None:
        """The start of the symbol whose extent contains ``address``."""
        k = self._position(address)
        return self.starts[k] if k is not None else None

    def extent_containing(self, address: int) -> tuple[int, int] | None:
        """(start, end) of the symbol whose extent contains ``address``."""
        k = self._position(address)
        return (self.starts[k], self.ends[k]) if k is not None else None

    def named_at(self, start: int) -> str | None:
        """The name of the symbol that starts at ``start``, if one does."""
        k = self._position(start)
        if k is None or self.starts[k] != start:
            return None
        return self._name(self.indices[k])

    def extent_named(self, name: str) -> tuple[int, int] | None:
        """(start, end) of the symbol called ``name`` (a scan: asked for a few findings)."""
        for k, index in enumerate(self.indices):
            if self._name(index) == name:
                return self.starts[k], self.ends[k]
        return None

    def below(self, address: int) -> tuple[str, int] | None:
        """(name, start) of the nearest symbol starting at or below ``address``."""
        k = bisect_right(self.starts, address) - 1
        return (self._name(self.indices[k]) or "", self.starts[k]) if k >= 0 else None

    def _position(self, address: int) -> int | None:
        k = bisect_right(self.starts, address) - 1
        if k < 0 or address >= self.ends[k]:
            return None
        return k

    def _name(self, index: int) -> str | None:
        name = self._names.get(index)
        if name is None:
            name = self._names[index] = self.table.name(index)
        return name or None


class _FunctionSymbols:
    """Entry address -> symbol index of every defined function."""

    def __init__(self, table: SymbolTable) -> None:
        self.table = table
        picked = table.indices_with(types=_FUNCTION_TYPES)
        picked = list(compress(picked, map(table.shndxs.__getitem__, picked)))
        # Locals come first in a symbol table, so a global alias overwrites them.
        self.by_address = dict(zip(map(table.values.__getitem__, picked), picked, strict=True))
        self.sizes = symbol_sizes(table)
        self._names: dict[int, str] = {}

    def at(self, address: int) -> tuple[str | None, int] | None:
        index = self.by_address.get(address)
        if index is None:
            return None
        name = self._names.get(index)
        if name is None:
            name = self._names[index] = self.table.name(index)
        return name or None, self.sizes[index]


# The longest string literal taken for a registry key.
_KEY_LENGTH = 256
_PRINTABLE = bytes(range(32, 127))  # the bytes a registry key's text may hold


def printable_text(raw: bytes) -> str | None:
    """``raw`` as a registry key's text, None unless it is printable and not empty."""
    # Deleting every printable byte leaves nothing of printable text.
    return raw.decode() if raw and not raw.translate(None, _PRINTABLE) else None


class AddressIndex:
    """Names for the addresses one object's code uses; built once per file."""

    # Every global's key is the address accessed, whatever the symbols say
    # (``ByteAddresses``).
    keys_by_address: ClassVar[bool] = False

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self.machine = elf.header.machine
        self._relocations = C.RELOCATIONS.get(self.machine)
        self._stubs: dict[int, GotEntry | None] = {}
        self._constant_keys: dict[int, str | None] = {}
        self._entries: list[int] = []  # ``note_entries``, sorted

    def prepare(self) -> None:
        """Build the indexes now, so that a corrupt table raises here."""
        _ = self._data, self._functions, self._got_symbols, self._exported_data

    # -- symbol tables -----------------------------------------------------
    @cached_property
    def _dynsym(self) -> SymbolTable | None:
        return read_dynsym(self.elf)

    @cached_property
    def _main_table(self) -> SymbolTable | None:
        """.symtab when present (it has the local symbols), else .dynsym."""
        return read_symtab(self.elf) or self._dynsym

    @cached_property
    def has_local_symbols(self) -> bool:
        """.symtab is present, so every function (local ones, .cold parts) has a symbol."""
        return self._main_table is not None and self._main_table is not self._dynsym

    @cached_property
    def _data(self) -> _DataSymbols | None:
        table = self._main_table
        return _DataSymbols(table) if table is not None else None

    @cached_property
    def _functions(self) -> _FunctionSymbols | None:
        table = self._main_table
        return _FunctionSymbols(table) if table is not None else None

    def data_symbol(self, address: int) -> str | None:
        """The data symbol whose extent contains ``address``, or None."""
        data = self._data
        return data.containing(address) if data is not None else None

    def object_extent(self, address: int) -> tuple[int, int] | None:
        """(start, end) of the object holding ``address``, where a symbol says: any
        with .symtab, else one .dynsym exports (None outside every data symbol)."""
        table = self._data if self.has_local_symbols else self._exported_data
        return table.extent_containing(address) if table is not None else None

    def extent_of(self, key: str) -> tuple[int, int] | None:
        """(start, end) of the object ``key`` names (``data_key``'s: its start, ``0x…``,
        or the name .dynsym exports it by), where a symbol says."""
        if key.startswith("0x"):
            return self.object_extent(int(key, 16))
        exported = self._exported_data
        return exported.extent_named(key) if exported is not None else None

    def data_key(self, address: int, anchor: bool = False) -> str | None:
        """What identifies the object ``address`` lies in: its address, never a name
        that another object of the same name (a header's ``static`` per TU) shares.

        - an object .dynsym exports: its name (one per object; other objects of
          a closure bind to it by that name);
        - else, with .symtab: the start of the symbol containing it, ``0x…``;
        - else (a stripped file), in writable data: the address itself, marked
          ``@0x…`` (``^0x…`` where code takes it as a pointer, ``anchor``), to be
          placed in its object once every address the code takes is known
          (``summary.object_keys``).
        """
        # Asked for every access the code makes (nvjitlink: 146,000): kept lean.
        exported = self._exported_data
        if exported is not None:
            name = exported.containing(address)
            if name is not None:
                return name
        if self.has_local_symbols:
            assert self._data is not None
            start = self._data.start_containing(address)
            return f"{start:#x}" if start is not None else None
        if not self._writable(address):
            return None
        return f"{ANCHOR if anchor else BARE}{address:#x}"

    def data_label(self, key: str) -> str:
        """A name for an object known by its address: its .symtab symbol, else the
        nearest object .dynsym exports below it (``name+0x10``), else the address."""
        if not key.startswith("0x"):
            return key
        address = int(key, 16)
        named = self._data.named_at(address) if self._data is not None \
            and self.has_local_symbols else None
        if named:
            return named
        exported = self._exported_data
        below = exported.below(address) if exported is not None else None
        if below is not None and below[0] and self._writable(below[1]) \
                and self._writable(address):
            return f"{key} (after {below[0]}+{address - below[1]:#x})"
        return key

    def constant_key(self, address: int) -> str | None:
        """What a pointer to constant data is as a registry key: ``type:<symbol>`` for a
        type_info (by its name, with .symtab or exported), ``string:<text>`` for a
        string literal in read-only data (compared by text: each object has its
        own copy), else None (cached: code passes the same constants often)."""
        if address not in self._constant_keys:
            self._constant_keys[address] = self._constant_key(address)
        return self._constant_keys[address]

    def _constant_key(self, address: int) -> str | None:
        named = self._data.named_at(address) if self._data is not None else None
        if named and named.startswith("_ZTI"):
            return f"type:{named}"
        if self._writable(address) or self._in_got(address):
            return None
        text = self._constant_text(address)
        return f"string:{text}" if text else None

    def constant_number(self, address: int, width: int) -> int | None:
        """The number the ``width`` bytes at ``address`` hold, where they lie in a segment
        nothing writes, relocations included (a string literal's bytes, loaded to be
        stored elsewhere); None anywhere else."""
        for low, high, offset in self._unwritten:
            if low <= address and address + width <= high:
                try:
                    data = self.elf.bytes_at(offset + address - low, width, "constant")
                except ElfpatchError:
                    return None
                return int.from_bytes(data, "little")
        return None

    @cached_property
    def _unwritten(self) -> list[tuple[int, int, int]]:
        """(start, end, file offset) of the loaded bytes of segments nothing writes (none
        for a big-endian file: the stack bytes numbers make are little-endian)."""
        if not self.elf.header.little_endian:
            return []
        return [(seg.vaddr, seg.vaddr + seg.filesz, seg.offset) for seg in self.elf.segments
                if seg.type == C.PT_LOAD and not seg.flags & PF_W]

    def read_only_data(self, address: int) -> bool:
        """Whether ``address`` is in data no code writes once loaded (.rodata, or what
        RELRO seals: vtables), not in code."""
        for low, high, flags in self._loads:
            if low <= address < high:
                return not flags & PF_X and not self._writable(address)
        return False

    def zero_initialized(self, address: int) -> bool:
        """Whether ``address`` is in memory the loader fills with zeros (.bss: a loadable
        segment's part past its file bytes)."""
        return any(low <= address < high for low, high in self.zero_filled_ranges)

    @cached_property
    def zero_filled_ranges(self) -> list[tuple[int, int]]:
        """(start, end) of each loadable segment's part past its file bytes."""
        return [(s.vaddr + s.filesz, s.vaddr + s.memsz) for s in self.elf.segments
                if s.type == C.PT_LOAD and s.memsz > s.filesz]

    def exported_data_at(self, address: int) -> bool:
        """Whether an object .dynsym exports holds ``address``: other objects may name it."""
        exported = self._exported_data
        return exported is not None and exported.containing(address) is not None

    @cached_property
    def is_program(self) -> bool:
        """Whether the file asks for an interpreter: a program, PIE or not."""
        return any(seg.type == C.PT_INTERP for seg in self.elf.segments)

    def copy_relocated(self, address: int) -> bool:
        """Whether ``address`` lies in a program's copy of a library's object, which the
        loader fills from the library's (a COPY relocation)."""
        exported = self._exported_data
        start = exported.start_containing(address) if exported is not None else None
        return start is not None and start in self._copies

    @cached_property
    def _copies(self) -> set[int]:
        kind = self._relocations.copy if self._relocations is not None else None
        if kind is None:
            return set()
        return {offset for table, picked in self.relocations_of_types({kind})
                for offset, found in zip(map(table.offsets.__getitem__, picked),
                                         map(table.types.__getitem__, picked), strict=True)
                if found == kind}

    def data_pointers(self) -> Iterator[int]:
        """The addresses the relocated data points to, where the relocations say: a
        RELATIVE one's addend, an absolute one's symbol (defined here) plus its addend
        (RELA tables; a packed RELR table's words)."""
        kinds = self._relocations
        if kinds is None:
            return
        dynsym = self._dynsym
        for table, picked in self.relocations_of_types({kinds.relative, kinds.absolute}):
            if not table.is_rela:
                continue
            types, addends, symbols = table.types, table.addends, table.symbol_indices
            for k in picked:
                kind = types[k]
                if kind == kinds.relative:
                    yield addends[k]
                elif kind == kinds.absolute and dynsym is not None \
                        and 0 < symbols[k] < dynsym.count \
                        and dynsym.shndxs[symbols[k]] != C.SHN_UNDEF:
                    yield (dynsym.values[symbols[k]] + addends[k]) & _LAST_ADDRESS
        for slot in relr_addresses(self.elf):
            word = self.stored_word(slot)
            if word is not None:
                yield word

    @cached_property
    def _loads(self) -> list[tuple[int, int, int]]:
        return [(s.vaddr, s.vaddr + s.memsz, s.flags) for s in self.elf.segments
                if s.type == C.PT_LOAD]

    def _constant_text(self, address: int) -> str | None:
        """The printable, NUL-terminated text at ``address`` in a read-only segment."""
        for seg in self.elf.segments:
            if seg.type == C.PT_LOAD and not seg.flags & PF_W \
                    and seg.vaddr <= address < seg.vaddr + seg.filesz:
                size = min(_KEY_LENGTH + 1, seg.vaddr + seg.filesz - address)
                try:
                    data = bytes(self.elf.bytes_at(seg.offset + address - seg.vaddr, size,
                                                   "constant"))
                except ElfpatchError:
                    return None
                end = data.find(b"\0")
                return printable_text(data[:end] if end > 0 else b"")
        return None

    @cached_property
    def _exported_data(self) -> _DataSymbols | None:
        table = self._dynsym
        return _DataSymbols(table) if table is not None else None

    @cached_property
    def _writable_ranges(self) -> list[tuple[int, int]]:
        """Where initializers can write: writable segments, less what RELRO seals
        before any initializer runs."""
        segments = self.elf.segments
        relro = [(s.vaddr, s.vaddr + s.memsz) for s in segments if s.type == PT_GNU_RELRO]
        ranges = []
        for s in segments:
            if s.type != C.PT_LOAD or not s.flags & PF_W:
                continue
            low, high = s.vaddr, s.vaddr + s.memsz
            for sealed_low, sealed_high in relro:
                if sealed_low <= low < sealed_high:
                    low = max(low, sealed_high)
            if low < high:
                ranges.append((low, high))
        return ranges

    def _writable(self, address: int) -> bool:
        # A loop, not any() over a generator: asked for every access in a stripped file.
        for low, high in self._writable_ranges:  # noqa: SIM110 (one or two ranges)
            if low <= address < high:
                return True
        return False

    def function_at(self, address: int) -> tuple[str | None, int] | None:
        """(name, st_size) of the function starting at ``address``, or None; in a file
        without .symtab, (None, size) of an unnamed one the unwind tables bound."""
        functions = self._functions
        found = functions.at(address) if functions is not None else None
        if found is None and not self.has_local_symbols:
            size = self._bounds.size_at(address)
            return (None, size) if size else None
        return found

    @cached_property
    def _bounds(self) -> FunctionBounds:
        return FunctionBounds(self.elf)

    def note_entries(self, addresses: Iterable[int]) -> None:
        """Functions known to start at ``addresses`` (an object's initializers) although
        no symbol or unwind entry says so: a sweep of unknown length ends there."""
        self._entries = sorted({*self._entries, *addresses})

    @property
    def entries(self) -> tuple[int, ...]:
        """The starts ``note_entries`` was told of."""
        return tuple(self._entries)

    def next_function_start(self, address: int) -> int | None:
        """The nearest place above ``address`` where a function is known to start: a
        function symbol's, an unwind entry's, a noted entry's; None where none is."""
        found = [starts[k] for starts in (self._known_starts, self._entries)
                 if (k := bisect_right(starts, address)) < len(starts)]
        return min(found, default=None)

    @cached_property
    def _known_starts(self) -> list[int]:
        functions = self._functions
        return sorted({*(functions.by_address if functions is not None else ()),
                       *self._bounds.starts})

    def unlikely(self, address: int) -> bool:
        """Whether the function starting at ``address`` is code gcc laid out as never
        expected to run (``layout.unlikely_code``)."""
        return address in self._unlikely

    @cached_property
    def _unlikely(self) -> range:
        return unlikely_code(self.elf, self._bounds.starts)

    @property
    def knows_functions(self) -> bool:
        """Every function's bounds are known: .symtab, else the unwind tables."""
        return self.has_local_symbols or self._bounds.available

    def code_at(self, address: int, limit: int) -> memoryview | None:
        """Up to ``limit`` bytes from ``address`` in an executable segment, or None."""
        for seg in self.elf.segments:
            if seg.type == C.PT_LOAD and seg.flags & PF_X \
                    and seg.vaddr <= address < seg.vaddr + seg.filesz:
                size = min(limit, seg.vaddr + seg.filesz - address)
                try:
                    return self.elf.bytes_at(seg.offset + address - seg.vaddr, size, "code")
                except ElfpatchError:
                    return None
        return None

    # -- GOT ---------------------------------------------------------------
    @cached_property
    def _got_ranges(self) -> list[tuple[int, int]] | None:
        """Address ranges of the GOT sections; None without section headers."""
        if not self.elf.sections:
            return None
        return [(s.addr, s.addr + s.size) for s in self.elf.sections
                if s.name in _GOT_SECTIONS and s.size]

    def _in_got(self, address: int) -> bool:
        ranges = self._got_ranges
        if ranges is None:
            return False
        for low, high in ranges:  # noqa: SIM110 (two ranges; a loop, not any(): asked often)
            if low <= address < high:
                return True
        return False

    @cached_property
    def _got_symbols(self) -> dict[int, int]:
        """GOT slot -> .dynsym index, from GLOB_DAT, JUMP_SLOT and TLS relocations."""
        wanted = set(self._relocations.symbol_slots) if self._relocations else set()
        found: dict[int, int] = {}
        for table, picked in self.relocations_of_types(wanted):
            types = table.types
            exact = list(compress(picked, map(wanted.__contains__, map(types.__getitem__,
                                                                       picked))))
            found.update(zip(map(table.offsets.__getitem__, exact),
                             map(table.symbol_indices.__getitem__, exact), strict=True))
        return found

    @cached_property
    def _got_addresses(self) -> dict[int, int | None]:
        """GOT slot -> target of its RELATIVE relocation (None for IRELATIVE)."""
        kinds = self._relocations
        # -1 matches no relocation type: a machine not listed names no slot this way.
        relative = kinds.relative if kinds is not None else -1
        irelative = kinds.irelative if kinds is not None and kinds.irelative is not None else -1
        found: dict[int, int | None] = {}
        ranges = self._got_ranges or []
        span = range(min((lo for lo, _ in ranges), default=0),
                     max((hi for _, hi in ranges), default=0))
        for table, picked in self.relocations_of_types({relative, irelative}):
            offsets = table.offsets
            # Most RELATIVE relocations patch data, not the GOT: dropped in C.
            for k in compress(picked, map(span.__contains__, map(offsets.__getitem__, picked))):
                rtype, _symbol, addend = table.entry(k)
                if rtype == irelative:
                    found[offsets[k]] = None
                elif rtype == relative and table.is_rela and self._in_got(offsets[k]):
                    found[offsets[k]] = addend
        return found

    def relocations_of_types(self, wanted: set[int]) -> Iterator[tuple[RelocationTable,
                                                                         list[int]]]:
        """Each table with the entries whose type's low byte matches ``wanted``."""
        w, little = self.elf.word_size, self.elf.header.little_endian
        mask = byte_mask({t & 0xFF for t in wanted if t >= 0})
        for table in self._relocation_tables:
            low_bytes = byte_column(table.raw, table.entsize, w if little else 2 * w - 1)
            yield table, list(compress(range(table.count), low_bytes.translate(mask)))

    @cached_property
    def _relocation_tables(self) -> list[RelocationTable]:
        return dynamic_relocation_tables(self.elf)

    def got_entry(self, slot: int) -> GotEntry | None:
        """What the GOT slot at ``slot`` holds, or None when it is not a GOT slot."""
        index = self._got_symbols.get(slot)
        if index is not None:
            return self._symbol_entry(index)
        if not self._in_got(slot):
            return None
        if slot in self._got_addresses:
            target = self._got_addresses[slot]
            return GotEntry(None, target) if target is not None else None
        stored = self.stored_word(slot)  # filled at link time (fixed executable, RELR)
        return GotEntry(None, stored) if stored else None

    def _symbol_entry(self, index: int) -> GotEntry | None:
        table = self._dynsym
        if table is None or not 0 < index < table.count:
            return None
        name = table.name(index)
        if not name:  # a symbol without a name: no key to know the object by
            return None
        defined = table.shndxs[index] != C.SHN_UNDEF
        kind = table.symbol_type(index)
        weak = table.binding(index) == C.STB_WEAK
        # An IFUNC's st_value is its resolver, not the code that will run.
        known_code = defined and kind != C.STT_GNU_IFUNC
        return GotEntry(name, None, defined, kind, weak and not defined,
                        table.values[index] if known_code else None)

    def stored_word(self, address: int) -> int | None:
        try:
            offset = self.elf.vaddr_to_offset(address, "GOT slot")
            (value,) = self.elf.unpack(self.elf.word, offset, "GOT slot")
        except ElfpatchError:
            return None
        return value

    # -- PLT ---------------------------------------------------------------
    def plt_entry(self, stub: int) -> GotEntry | None:
        """The GOT entry a PLT stub at ``stub`` jumps through, or None if it is no stub."""
        if stub not in self._stubs:
            slot = self._stub_slot(stub)
            self._stubs[stub] = self.got_entry(slot) if slot is not None else None
        return self._stubs[stub]

    def _stub_slot(self, stub: int) -> int | None:
        try:
            offset = self.elf.vaddr_to_offset(stub, "PLT stub")
            code = bytes(self.elf.view[offset : min(offset + STUB_BYTES, self.elf.size)])
        except ElfpatchError:
            return None
        return stub_slot(self.machine, self.elf.header.little_endian, code, stub)


class ByteAddresses(AddressIndex):
    """An index whose keys are the addresses the code accesses, never an object's start
    or name: what one function reads of an object told apart from what another writes
    of it, member by member (``members.UnwrittenBytes``)."""

    keys_by_address = True

    def data_key(self, address: int, anchor: bool = False) -> str | None:
        if not self._writable(address):
            return None
        return f"{ANCHOR if anchor else BARE}{address:#x}"
