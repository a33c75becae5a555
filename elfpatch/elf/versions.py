"""GNU symbol versions: .gnu.version (versym), .gnu.version_d (verdef), .gnu.version_r (verneed).

The loader needs them twice: to refuse an object whose required version no
loaded object defines ("version `X' not found"), and to bind a versioned
reference only to a definition of that version.  Located through the
dynamic table, which survives stripped section headers.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import versym_offset

VERSYM_HIDDEN = 0x8000  # the definition is not the default version (name@V, not name@@V)
VERSYM_INDEX = 0x7FFF
VER_FLG_BASE = 0x1  # the verdef entry naming the file itself: not a version of a symbol
VER_FLG_WEAK = 0x2  # a weak requirement: missing only earns a warning

_DT_VERDEFNUM = 0x6FFFFFFD
_DT_VERNEEDNUM = 0x6FFFFFFF
_MAX_CHAIN = 1 << 16  # more entries than any linker writes: a loop in a corrupt chain


@dataclass(frozen=True)
class VersionNeed:
    """One version an object requires from one of its DT_NEEDED files."""

    file: str  # vn_file: the DT_NEEDED name (a SONAME)
    name: str  # the version, e.g. GLIBCXX_3.4.30
    weak: bool


@dataclass(frozen=True)
class SymbolVersions:
    """The version tables of one object.

    ``versym`` has one entry per .dynsym symbol (empty without versioning);
    ``names`` maps a version index to its name (defined or needed);
    ``base`` are the indices of definitions that count as unversioned
    (0, 1 and the VER_FLG_BASE entry).
    """

    versym: array
    names: dict[int, str] = field(default_factory=dict)
    defined: frozenset[str] = frozenset()  # every verdef name, the base one included
    needs: tuple[VersionNeed, ...] = ()
    base: frozenset[int] = frozenset({0, 1})
    needed_from: dict[int, str] = field(default_factory=dict)  # needed index -> vn_file

    @property
    def has_definitions(self) -> bool:
        return bool(self.defined)

    def needed_file(self, index: int) -> str | None:
        """The file (a SONAME) whose version .dynsym entry ``index`` asks for, if any."""
        if index >= len(self.versym):
            return None
        return self.needed_from.get(self.versym[index] & VERSYM_INDEX)

    def version_of(self, index: int) -> tuple[str | None, bool]:
        """(version name or None for unversioned, hidden) of .dynsym entry ``index``."""
        if index >= len(self.versym):
            return None, False
        raw = self.versym[index]
        number = raw & VERSYM_INDEX
        if number in self.base:
            return None, False
        return self.names.get(number), bool(raw & VERSYM_HIDDEN)


def read_versions(elf: ElfFile, symbol_count: int) -> SymbolVersions:
    """The versions of ``elf``; an unversioned object has empty tables."""
    if not elf.dynamic:
        return SymbolVersions(array("H"))
    offset = versym_offset(elf)
    versym = array("H")
    if offset is not None and symbol_count:
        raw = elf.bytes_at(offset, 2 * symbol_count, ".gnu.version")
        versym = column(raw, 2, 0, 2, elf.header.little_endian)
    names: dict[int, str] = {}
    files: dict[int, str] = {}
    defined, base = _read_verdef(elf, names)
    needs = _read_verneed(elf, names, files)
    return SymbolVersions(versym, names, frozenset(defined), tuple(needs),
                          frozenset({0, 1, *base}), files)


def _strings(elf: ElfFile) -> tuple[int, int]:
    strtab, size = elf.dynamic_value(C.DT_STRTAB), elf.dynamic_value(C.DT_STRSZ)
    if strtab is None or size is None:
        raise elf.corrupt("version tables without DT_STRTAB/DT_STRSZ")
    return elf.vaddr_to_offset(strtab, "DT_STRTAB"), size


def _read_verdef(elf: ElfFile, names: dict[int, str]) -> tuple[list[str], list[int]]:
    address = elf.dynamic_value(C.DT_VERDEF)
    if address is None:
        return [], []
    count = elf.dynamic_value(_DT_VERDEFNUM) or _MAX_CHAIN
    strtab, strsz = _strings(elf)
    offset = elf.vaddr_to_offset(address, "DT_VERDEF")
    defined: list[str] = []
    base: list[int] = []
    for _ in range(min(count, _MAX_CHAIN)):
        _version, flags, index, aux_count, _hash, aux, following = elf.unpack(
            "HHHHIII", offset, "verdef entry")
        if aux_count:
            name_offset = elf.unpack("I", offset + aux, "verdaux entry")[0]
            name = elf.cstring(strtab, strsz, name_offset, "version definition name")
            defined.append(name)
            names[index & VERSYM_INDEX] = name
            if flags & VER_FLG_BASE:
                base.append(index & VERSYM_INDEX)
        if not following:
            break
        offset += following
    return defined, base


def _read_verneed(elf: ElfFile, names: dict[int, str], files: dict[int, str]
                  ) -> list[VersionNeed]:
    address = elf.dynamic_value(C.DT_VERNEED)
    if address is None:
        return []
    count = elf.dynamic_value(_DT_VERNEEDNUM) or _MAX_CHAIN
    strtab, strsz = _strings(elf)
    offset = elf.vaddr_to_offset(address, "DT_VERNEED")
    needs: list[VersionNeed] = []
    for _ in range(min(count, _MAX_CHAIN)):
        _version, aux_count, file_offset, aux, following = elf.unpack(
            "HHIII", offset, "verneed entry")
        file = elf.cstring(strtab, strsz, file_offset, "version file name")
        position = offset + aux
        for _ in range(min(aux_count, _MAX_CHAIN)):
            _hash, flags, other, name_offset, next_aux = elf.unpack(
                "IHHII", position, "vernaux entry")
            name = elf.cstring(strtab, strsz, name_offset, "version requirement name")
            names[other & VERSYM_INDEX] = name
            files[other & VERSYM_INDEX] = file
            needs.append(VersionNeed(file, name, bool(flags & VER_FLG_WEAK)))
            if not next_aux:
                break
            position += next_aux
        if not following:
            break
        offset += following
    return needs
