"""Symbol tables (.dynsym, .symtab) as columns.

A ``SymbolTable`` knows where its entries and strings are; fields are read
as whole columns (``infos``, ``values``…) or one row at a time for the few
symbols a report shows.  Binding, type and visibility are decoded here and
nowhere else: as whole columns (``bindings``, ``symbol_types``,
``visibilities``: one ``bytes.translate`` each), per entry (``binding(i)``…),
or as the indices of the entries that have them (``indices_with``), never
one Python object per symbol.  Finding the STB_GNU_UNIQUE entries of a
531k-entry .symtab is one strided slice and one regular-expression scan.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import compress

from elfpatch.elf import constants as C
from elfpatch.elf.columns import byte_column, byte_mask, column
from elfpatch.elf.file import ElfFile, Section
from elfpatch.elf.hashes import dynamic_symbol_count

DYNSYM = ".dynsym"
SYMTAB = ".symtab"

# (offset, width) of each field in Elf32_Sym / Elf64_Sym, and the entry sizes
_LAYOUT: dict[int, dict[str, tuple[int, int]]] = {
    32: {"name": (0, 4), "value": (4, 4), "size": (8, 4), "info": (12, 1), "other": (13, 1),
         "shndx": (14, 2)},
    64: {"name": (0, 4), "info": (4, 1), "other": (5, 1), "shndx": (6, 2), "value": (8, 8),
         "size": (16, 8)},
}
_ENTSIZE = {32: 16, 64: 24}
# One whole entry, for reading a single row: (format, order of its fields)
_ENTRY = {32: ("IIIBBH", ("name", "value", "size", "info", "other", "shndx")),
          64: ("IBBHQQ", ("name", "info", "other", "shndx", "value", "size"))}

# Any st_info byte whose binding is STB_GNU_UNIQUE, whatever its type.
_UNIQUE_INFO = re.compile(b"[%s-%s]" % (re.escape(bytes([C.st_info(C.STB_GNU_UNIQUE, 0)])),
                                        re.escape(bytes([C.st_info(C.STB_GNU_UNIQUE, 0xF)]))))
# In a decoded binding column: any binding but LOCAL.
_NOT_LOCAL = re.compile(b"[^%s]" % re.escape(bytes([C.STB_LOCAL])))
# What glibc's symbol lookup (do_lookup_x) lets other objects bind to: bindings
# GLOBAL, WEAK and UNIQUE (any other is skipped), visibility DEFAULT or PROTECTED
# (HIDDEN and INTERNAL symbols are local to their object).
_EXPORTED_BINDINGS = (C.STB_GLOBAL, C.STB_WEAK, C.STB_GNU_UNIQUE)
_EXPORTED_OTHER = byte_mask({b for b in range(256)
                             if C.st_visibility(b) in (C.STV_DEFAULT, C.STV_PROTECTED)})


@lru_cache(maxsize=32)
def _info_mask(bindings: frozenset[int] | None, types: frozenset[int] | None) -> bytes:
    """A translate table marking the st_info bytes with one of ``bindings`` and ``types``."""
    return byte_mask({b for b in range(256)
                      if (bindings is None or C.st_bind(b) in bindings)
                      and (types is None or C.st_type(b) in types)})


@dataclass(frozen=True)
class Symbol:
    index: int
    name: str
    value: int
    size: int
    binding: int
    type: int
    visibility: int
    shndx: int

    @property
    def defined(self) -> bool:
        return self.shndx != C.SHN_UNDEF


@dataclass
class SymbolTable:
    """One symbol table of an ELF file, located but not parsed."""

    elf: ElfFile
    kind: str  # ".dynsym" or ".symtab"
    offset: int
    count: int
    entsize: int
    strtab_offset: int
    strtab_size: int
    first_global: int | None  # sh_info: index of the first non-local symbol; None without headers
    section: Section | None

    def __post_init__(self) -> None:
        layout = _LAYOUT[self.elf.header.elf_class]
        expected = _ENTSIZE[self.elf.header.elf_class]
        if self.entsize != expected:
            raise self.elf.corrupt(f"{self.kind} entry size is {self.entsize}, "
                                   f"expected {expected}")
        self.elf.check_range(self.offset, self.count * self.entsize, self.kind)
        self.elf.check_range(self.strtab_offset, self.strtab_size, f"{self.kind} string table")
        self._layout = layout

    @property
    def raw(self) -> memoryview:
        return self.elf.view[self.offset : self.offset + self.count * self.entsize]

    def field_offset(self, field: str) -> int:
        return self._layout[field][0]

    def _column(self, field: str) -> array[int]:
        offset, width = self._layout[field]
        return column(self.raw, self.entsize, offset, width, self.elf.header.little_endian)

    @cached_property
    def infos(self) -> bytes:
        return byte_column(self.raw, self.entsize, self._layout["info"][0])

    @cached_property
    def others(self) -> bytes:
        return byte_column(self.raw, self.entsize, self._layout["other"][0])

    # -- decoded st_info and st_other ----------------------------------------
    @cached_property
    def bindings(self) -> bytes:
        """The binding (STB_*) of every entry, one byte each."""
        return self.infos.translate(C.BINDING_OF_INFO)

    @cached_property
    def symbol_types(self) -> bytes:
        """The type (STT_*) of every entry, one byte each."""
        return self.infos.translate(C.TYPE_OF_INFO)

    @cached_property
    def visibilities(self) -> bytes:
        """The visibility (STV_*) of every entry, one byte each."""
        return self.others.translate(C.VISIBILITY_OF_OTHER)

    def binding(self, index: int) -> int:
        return C.st_bind(self.infos[index])

    def symbol_type(self, index: int) -> int:
        return C.st_type(self.infos[index])

    def visibility(self, index: int) -> int:
        return C.st_visibility(self.others[index])

    def defined(self, index: int) -> bool:
        return self.shndxs[index] != C.SHN_UNDEF

    def indices_with(self, bindings: Collection[int] | None = None,
                     types: Collection[int] | None = None) -> list[int]:
        """Indices of the entries with one of ``bindings`` and one of ``types``
        (None: any), in table order; picked in C."""
        mask = _info_mask(None if bindings is None else frozenset(bindings),
                          None if types is None else frozenset(types))
        return list(compress(range(self.count), self.infos.translate(mask)))

    def first_nonlocal(self, start: int = 1) -> int | None:
        """Index of the first entry from ``start`` whose binding is not LOCAL, or None."""
        match = _NOT_LOCAL.search(self.bindings, start)
        return match.start() if match else None

    def first_local(self, start: int) -> int | None:
        """Index of the first entry from ``start`` whose binding is LOCAL, or None."""
        found = self.bindings.find(C.STB_LOCAL, start)
        return found if found >= 0 else None

    def exported_indices(self) -> list[int]:
        """Indices of the definitions other objects can bind to, in table order.

        Defined (st_shndx not UNDEF), bound GLOBAL, WEAK or UNIQUE, and
        visible (DEFAULT or PROTECTED): what glibc's lookup finds.  The
        entry 0 (the null symbol) never counts.
        """
        picked = self.indices_with(bindings=_EXPORTED_BINDINGS)
        visible = self.others.translate(_EXPORTED_OTHER)
        picked = list(compress(picked, map(visible.__getitem__, picked)))
        # st_shndx is non-zero (SHN_UNDEF is 0) for a definition.
        return [i for i in compress(picked, map(self.shndxs.__getitem__, picked)) if i]

    @cached_property
    def name_offsets(self) -> array[int]:
        return self._column("name")

    @cached_property
    def shndxs(self) -> array[int]:
        return self._column("shndx")

    @cached_property
    def values(self) -> array[int]:
        return self._column("value")

    def unique_indices(self) -> list[int]:
        """Indices of every STB_GNU_UNIQUE entry, in table order."""
        return [m.start() for m in _UNIQUE_INFO.finditer(self.infos)]

    def name(self, index: int) -> str:
        return self.elf.cstring(self.strtab_offset, self.strtab_size, self.name_offsets[index],
                                f"{self.kind} symbol {index} name")

    def name_bytes(self, index: int) -> bytes:
        return self.name(index).encode("utf-8", "surrogateescape")

    def entry_offset(self, index: int) -> int:
        return self.offset + index * self.entsize

    def row(self, index: int) -> Symbol:
        """One entry, read on its own: no column is built for the few a report shows."""
        if not 0 <= index < self.count:
            raise IndexError(f"{self.kind} has no symbol {index}")
        fmt, names = _ENTRY[self.elf.header.elf_class]
        fields = dict(zip(names, self.elf.unpack(fmt, self.entry_offset(index), self.kind),
                          strict=True))
        name = self.elf.cstring(self.strtab_offset, self.strtab_size, fields["name"],
                                f"{self.kind} symbol {index} name")
        info = fields["info"]
        return Symbol(index, name, fields["value"], fields["size"], C.st_bind(info),
                      C.st_type(info), C.st_visibility(fields["other"]), fields["shndx"])


# What a compiler names in STT_FILE for a translation unit of its own (gcc -flto's
# partitions carry an empty name; an object file or a crt file names no source).
_SOURCE_FILE = re.compile(r".+\.(c|cc|cpp|cxx|c\+\+|C|cu|m|mm)")


def local_source_files(table: SymbolTable) -> dict[int, str]:
    """Address -> the source file of each local object and function of ``table``.

    A linker keeps each input file's local symbols together, after the STT_FILE
    entry that names its source: what follows a file's entry, up to the next one,
    is that file's.  Only files named as sources count, and an address two files
    define is left out.
    """
    files = table.indices_with(bindings=(C.STB_LOCAL,), types=(C.STT_FILE,))
    if not files:
        return {}
    locals_ = table.indices_with(bindings=(C.STB_LOCAL,), types=(C.STT_OBJECT, C.STT_FUNC))
    names = [table.name(index) for index in files]
    values = table.values
    found: dict[int, str] = {}
    clashes: set[int] = set()
    current, name = -1, None
    for index in locals_:
        while current + 1 < len(files) and files[current + 1] < index:
            current += 1
            name = names[current] if _SOURCE_FILE.fullmatch(names[current]) else None
        if name is None:
            continue
        address = values[index]
        if found.setdefault(address, name) != name:
            clashes.add(address)
    for address in clashes:
        del found[address]
    return found


def read_symtab(elf: ElfFile) -> SymbolTable | None:
    """The static symbol table (.symtab), or None when stripped."""
    sections = elf.sections_of_type(C.SHT_SYMTAB)
    return _table_from_section(elf, sections[0], SYMTAB) if sections else None


def read_dynsym(elf: ElfFile) -> SymbolTable | None:
    """The dynamic symbol table, from its section or, without one, from PT_DYNAMIC."""
    sections = elf.sections_of_type(C.SHT_DYNSYM)
    if sections:
        return _table_from_section(elf, sections[0], DYNSYM)
    return _dynsym_from_dynamic(elf)


def exported_functions(elf: ElfFile,
                       types: Collection[int] = (C.STT_FUNC,)) -> dict[str, int]:
    """The exported symbols of ``types`` defined at an address, by name: where another
    object's call through its PLT to that name lands (a ``STT_GNU_IFUNC``'s address
    is its resolver's, which runs when the slot is bound)."""
    return {name: address for address, name in _exported_rows(elf, types)}


def exported_functions_by_address(elf: ElfFile, types: Collection[int] = (C.STT_FUNC,),
                                  ) -> list[tuple[int, str]]:
    """(address, name) of the exported symbols of ``types`` defined at an address, by
    address: what a bare address of code falls after (every version of a name kept)."""
    return sorted(_exported_rows(elf, types))


def _exported_rows(elf: ElfFile, types: Collection[int]) -> list[tuple[int, str]]:
    table = read_dynsym(elf)
    if table is None:
        return []
    kinds, values = table.symbol_types, table.values
    return [(values[i], table.name(i)) for i in table.exported_indices()
            if kinds[i] in types and values[i]]


def _table_from_section(elf: ElfFile, section: Section, kind: str) -> SymbolTable:
    if section.entsize == 0 or section.size % section.entsize:
        raise elf.corrupt(f"{kind} size {section.size} is not a multiple of its entry size "
                          f"{section.entsize}")
    if section.link >= len(elf.sections):
        raise elf.corrupt(f"{kind} links to string table {section.link}, which does not exist")
    strtab = elf.sections[section.link]
    if strtab.type != C.SHT_STRTAB:
        raise elf.corrupt(f"{kind} links to section {section.link}, which is not a string table")
    return SymbolTable(elf, kind, section.offset, section.size // section.entsize,
                       section.entsize, strtab.offset, strtab.size, section.info, section)


def _dynsym_from_dynamic(elf: ElfFile) -> SymbolTable | None:
    symtab_addr = elf.dynamic_value(C.DT_SYMTAB)
    if symtab_addr is None:
        return None
    strtab_addr, strsz = elf.dynamic_value(C.DT_STRTAB), elf.dynamic_value(C.DT_STRSZ)
    if strtab_addr is None or strsz is None:
        raise elf.corrupt("dynamic table has DT_SYMTAB but no DT_STRTAB/DT_STRSZ")
    entsize = elf.dynamic_value(C.DT_SYMENT) or _ENTSIZE[elf.header.elf_class]
    count = dynamic_symbol_count(elf)
    if count is None:
        raise elf.corrupt("no section headers and no DT_HASH/DT_GNU_HASH to size .dynsym")
    return SymbolTable(elf, DYNSYM, elf.vaddr_to_offset(symtab_addr, "DT_SYMTAB"), count,
                       entsize, elf.vaddr_to_offset(strtab_addr, "DT_STRTAB"), strsz, None, None)


def symbol_tables(elf: ElfFile) -> list[SymbolTable]:
    """.dynsym then .symtab, whichever exist."""
    return [t for t in (read_dynsym(elf), read_symtab(elf)) if t is not None]


def versym_offset(elf: ElfFile) -> int | None:
    """File offset of .gnu.version (one 16-bit entry per .dynsym symbol), if any."""
    addr = elf.dynamic_value(C.DT_VERSYM)
    if addr is not None:
        return elf.vaddr_to_offset(addr, "DT_VERSYM")
    sections = elf.sections_of_type(C.SHT_GNU_VERSYM)
    return sections[0].offset if sections else None
