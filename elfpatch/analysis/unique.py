"""STB_GNU_UNIQUE symbols of one ELF file and what they do at load time.

glibc's loader enters every defined UNIQUE symbol of .dynsym into one table
per namespace: the first definition wins for every object, RTLD_LOCAL or
not, and an object loaded by dlopen whose definition is entered is marked
NODELETE, so dlclose never unloads it.  .symtab entries are reported too (a
fix keeps both tables consistent), but only .dynsym matters at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elfpatch.base.text_enum import TextEnum
from elfpatch.cxx.demangle import demangle
from elfpatch.cxx.names import enclosing_scope
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import DYNSYM, SymbolTable, symbol_tables

if TYPE_CHECKING:  # the loader model is imported only by those who ask for a verdict
    from elfpatch.loader.dlopen import LoadVerdict


class UniqueKind(TextEnum):
    """What a C++ engineer calls the entity behind a UNIQUE symbol (the JSON's ``kind``)."""

    FUNCTION_LOCAL_STATIC = "function_local_static"
    GUARD_VARIABLE = "guard_variable"
    TEMPLATE_STATIC_MEMBER = "template_static_member"
    INLINE_VARIABLE = "inline_variable"
    OTHER = "other"



KIND_DESCRIPTIONS = {
    UniqueKind.FUNCTION_LOCAL_STATIC: "static local of an inline/template function",
    UniqueKind.GUARD_VARIABLE: "guard variable of a static",
    UniqueKind.TEMPLATE_STATIC_MEMBER: "static data member of a class template",
    UniqueKind.INLINE_VARIABLE: "inline variable or static member of a class",
    UniqueKind.OTHER: "other",
}

# A C identifier that is not an Itanium (_Z) or D (_D<digit>) mangled name.
_PLAIN_IDENTIFIER = re.compile(r"(?!_Z|_D[0-9])[A-Za-z_][A-Za-z0-9_]*")

# The demangler prints these class template instances without their arguments.
_TEMPLATE_ABBREVIATIONS = ("std::string", "std::wstring", "std::istream", "std::ostream",
                           "std::iostream", "std::allocator", "std::basic_string")


@dataclass(frozen=True)
class UniqueSymbol:
    table: str  # ".dynsym" or ".symtab"
    index: int
    name: str
    demangled: str
    type: str  # OBJECT, TLS, FUNC…
    size: int
    section: str | None  # None when undefined or when section headers are missing
    defined: bool
    visibility: str
    kind: UniqueKind


@dataclass(frozen=True)
class FileScan:
    """Everything ``scan`` reports about one ELF file."""

    path: str
    member: str | None  # the archive member, when the file came from a wheel
    machine: str
    elf_class: int
    elf_type: str
    soname: str | None
    nodelete: bool  # DF_1_NODELETE already set at link time
    unique: tuple[UniqueSymbol, ...]
    # What glibc does with it in its default host (None: not analysed, e.g. another machine)
    load: LoadVerdict | None = None

    @property
    def dynamic_unique_definitions(self) -> tuple[UniqueSymbol, ...]:
        """The UNIQUE symbols the loader sees: defined ones in .dynsym."""
        return tuple(s for s in self.unique if s.table == DYNSYM and s.defined)

    @property
    def pinned_by_unique(self) -> bool:
        """It defines UNIQUE symbols the loader sees: the first to be looked up pins it."""
        return bool(self.dynamic_unique_definitions)

    @property
    def unloads_on_dlclose(self) -> bool | None:
        """What glibc does on dlclose in the default host; None when it cannot load.

        Without a loader verdict (a file of another machine), the object's own
        answer: any UNIQUE definition or DF_1_NODELETE keeps it.
        """
        if self.load is not None:
            return self.load.unloads
        return not (self.pinned_by_unique or self.nodelete)


def classify(name: str, demangled: str) -> UniqueKind:
    """The kind of C++ entity a mangled symbol names."""
    if name.startswith("_ZGV"):
        return UniqueKind.GUARD_VARIABLE
    if name.startswith("_ZZ"):
        return UniqueKind.FUNCTION_LOCAL_STATIC
    if _PLAIN_IDENTIFIER.fullmatch(name):
        # Variables of the global namespace are not mangled: a UNIQUE one is an
        # inline variable (`inline int x;`).
        return UniqueKind.INLINE_VARIABLE
    if not name.startswith("_Z") or demangled == name:
        return UniqueKind.OTHER
    scope = enclosing_scope(demangled)
    if scope is None:
        return UniqueKind.OTHER
    is_template = "<" in scope or scope.startswith(_TEMPLATE_ABBREVIATIONS)
    return UniqueKind.TEMPLATE_STATIC_MEMBER if is_template else UniqueKind.INLINE_VARIABLE


def unique_symbols(elf: ElfFile, table: SymbolTable) -> list[UniqueSymbol]:
    found = []
    for index in table.unique_indices():
        symbol = table.row(index)
        text = demangle(symbol.name)
        found.append(UniqueSymbol(
            table=table.kind,
            index=index,
            name=symbol.name,
            demangled=text,
            type=C.TYPE_NAMES.get(symbol.type, f"STT_{symbol.type}"),
            size=symbol.size,
            section=_section_name(elf, symbol.shndx),
            defined=symbol.defined,
            visibility=C.VISIBILITY_NAMES[symbol.visibility],
            kind=classify(symbol.name, text),
        ))
    return found


def _section_name(elf: ElfFile, shndx: int) -> str | None:
    if shndx == C.SHN_UNDEF:
        return None
    if shndx == C.SHN_ABS:
        return "ABS"
    if shndx == C.SHN_COMMON:
        return "COMMON"
    if shndx < len(elf.sections):
        return elf.sections[shndx].name
    return None


def scan_elf(elf: ElfFile, path: str, member: str | None = None) -> FileScan:
    unique: list[UniqueSymbol] = []
    for table in symbol_tables(elf):
        unique.extend(unique_symbols(elf, table))
    return FileScan(
        path=path,
        member=member,
        machine=elf.header.machine_name,
        elf_class=elf.header.elf_class,
        elf_type=elf.header.type_name,
        soname=elf.soname if elf.dynamic else None,
        nodelete=elf.nodelete,
        unique=tuple(unique),
    )
