"""GNU symbol versions: .gnu.version (versym), .gnu.version_d (verdef), .gnu.version_r (verneed).

The loader needs them twice: to refuse an object whose required version no
loaded object defines ("version `X' not found"), and to bind a versioned
reference only to a definition of that version.  Located through the
dynamic table, which survives stripped section headers.

The writer needs where the verneed and verdef tables end (``version_table_end``):
both are chains of entries, each with a chain of auxiliary entries, linked by
byte offsets (``vn_next``/``vna_next``, ``vd_next``/``vda_next``) rather than
laid out as arrays, so their extent is found by walking them.  The walk stops
at the count the dynamic table gives, at a zero link, and at the end of the
file: a corrupt table ends early, it never raises.
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

MAX_ENTRIES = 1 << 16  # more entries than any linker writes: a loop in a corrupt chain


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

    versym: array[int]
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
    count = elf.dynamic_value(C.DT_VERDEFNUM) or MAX_ENTRIES
    strtab, strsz = _strings(elf)
    offset = elf.vaddr_to_offset(address, "DT_VERDEF")
    defined: list[str] = []
    base: list[int] = []
    for _ in range(min(count, MAX_ENTRIES)):
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
    count = elf.dynamic_value(C.DT_VERNEEDNUM) or MAX_ENTRIES
    strtab, strsz = _strings(elf)
    offset = elf.vaddr_to_offset(address, "DT_VERNEED")
    needs: list[VersionNeed] = []
    for _ in range(min(count, MAX_ENTRIES)):
        _version, aux_count, file_offset, aux, following = elf.unpack(
            "HHIII", offset, "verneed entry")
        file = elf.cstring(strtab, strsz, file_offset, "version file name")
        position = offset + aux
        for _ in range(min(aux_count, MAX_ENTRIES)):
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


# -- where the tables end (for the writer's region checks) --------------------



@dataclass(frozen=True)
class ChainLayout:
    """One version table's entry and auxiliary entry: struct formats, sizes, and the
    positions of the aux count, the aux offset and the next offsets in them."""

    entry: str
    entry_size: int
    aux_count_at: int
    aux_offset_at: int
    next_at: int
    aux: str
    aux_size: int
    aux_next_at: int


# Elfxx_Verneed (vn_version, vn_cnt, vn_file, vn_aux, vn_next) with Elfxx_Vernaux
# (vna_hash, vna_flags, vna_other, vna_name, vna_next): the same for 32 and 64 bits.
VERNEED = ChainLayout("HHIII", 16, 1, 3, 4, "IHHII", 16, 4)
# Elfxx_Verdef (vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next) with
# Elfxx_Verdaux (vda_name, vda_next).
VERDEF = ChainLayout("HHHHIII", 20, 3, 5, 6, "II", 8, 1)


def version_table_end(elf: ElfFile, start: int, count: int | None,
                      layout: ChainLayout) -> int:
    """The file offset just past the last byte of the table at ``start`` (``start`` when
    nothing of it can be read); ``count``: its number of entries (DT_VERNEEDNUM...)."""
    end, here = start, start
    for _ in range(min(count or 0, MAX_ENTRIES)):
        fields = elf.unpack_if_inside(layout.entry, here)
        if fields is None:
            break
        end = max(end, here + layout.entry_size)
        end = max(end, _aux_end(elf, here + fields[layout.aux_offset_at],
                                fields[layout.aux_count_at], layout))
        if not fields[layout.next_at]:
            break
        here += fields[layout.next_at]
    return end


def _aux_end(elf: ElfFile, there: int, count: int, layout: ChainLayout) -> int:
    end = 0
    for _ in range(min(count, MAX_ENTRIES)):
        fields = elf.unpack_if_inside(layout.aux, there)
        if fields is None:
            break
        end = max(end, there + layout.aux_size)
        if not fields[layout.aux_next_at]:
            break
        there += fields[layout.aux_next_at]
    return end
