"""Where each table of an ELF file lies, and the proof that every edit stays in its own.

``fix`` finds the tables it rewrites as the loader does, mostly through the
dynamic table, and a corrupt or hand-edited file can point it anywhere: a
DT_VERSYM moved onto the ELF header, a DT_RELA inside the program headers, a
version table overlapping the version needs.  Writing there would give a
file that no longer loads and that every later check reads as consistent.

So before anything is written, the edits are checked against a map of the
file's regions drawn from the other source of truth: with section headers,
the sections by type; without, the tables the dynamic segment points at,
sized as the readers size them.  Either way the ELF header, the program and
section header tables, the segments that hold tables and (with section
headers, as places no other kind of edit may touch) the tables the dynamic
segment points at are regions too.
Every edit names the kind of table it belongs to and must lie inside the
regions of that kind and overlap no other region; otherwise the file is
refused with one line naming the conflict.  The check costs a sort of the
regions and a binary search per edit, not a step per symbol.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from elfpatch.elf import constants as C
from elfpatch.elf.dynamic import DynamicValues, entries_at, first_values
from elfpatch.elf.file import ElfFile, Section
from elfpatch.elf.hashes import gnu_hash_table_end, sysv_hash_table_end
from elfpatch.elf.symbols import DYNSYM, SYMTAB, SymbolTable, read_dynsym
from elfpatch.elf.versions import VERDEF, VERNEED, ChainLayout, version_table_end
from elfpatch.errors import CorruptElfError
from elfpatch.patch.edit import Edit

# The kinds of table an edit may belong to; the symbol tables are known by their
# names, DYNSYM and SYMTAB.
VERSYM = ".gnu.version"
GNU_HASH = ".gnu.hash"
SYSV_HASH = ".hash"
DYNAMIC_RELOCATIONS = "dynamic relocations"
STATIC_RELOCATIONS = ".symtab relocations"
SYMTAB_SHNDX = ".symtab_shndx"
SECTION_HEADERS = "section header table"
OTHER = "other"  # a region no edit may touch

# Segments that hold a table of their own (PT_LOAD and PT_GNU_RELRO span many).
_TABLE_SEGMENTS = {C.PT_DYNAMIC: "dynamic segment", C.PT_INTERP: "interpreter path",
                   C.PT_NOTE: "note segment", C.PT_PHDR: "PT_PHDR segment",
                   C.PT_TLS: "TLS initialization image",
                   C.PT_GNU_EH_FRAME: "unwind table index"}
_SECTION_KINDS = {C.SHT_DYNSYM: DYNSYM, C.SHT_SYMTAB: SYMTAB, C.SHT_GNU_VERSYM: VERSYM,
                  C.SHT_GNU_HASH: GNU_HASH, C.SHT_HASH: SYSV_HASH, C.SHT_SYMTAB_SHNDX: SYMTAB_SHNDX}


@dataclass(frozen=True)
class Region:
    """Bytes start..end of the file, the kind of table they belong to, and a name for messages.

    ``home``: an edit of this kind may lie here.  With section headers only
    the sections are homes; the tables the dynamic table points at are
    regions an edit of another kind must not touch, but being inside one
    proves nothing (that is how a moved DT_VERSYM is caught).
    """

    start: int
    end: int
    kind: str
    name: str
    home: bool = True

    def describe(self) -> str:
        return f"{self.name} ({self.start:#x}..{self.end:#x})"


@dataclass(frozen=True)
class Spans:
    """Disjoint, sorted byte ranges: a union of regions, searched by bisection."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    @classmethod
    def of(cls, ranges: Iterable[tuple[int, int]]) -> Spans:
        merged: list[list[int]] = []
        for start, end in sorted(r for r in ranges if r[1] > r[0]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return cls(tuple(s for s, _ in merged), tuple(e for _, e in merged))

    def contains(self, start: int, end: int) -> bool:
        i = bisect_right(self.starts, start) - 1
        return i >= 0 and end <= self.ends[i]

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect_right(self.starts, start) - 1
        if i >= 0 and self.ends[i] > start:
            return True
        return i + 1 < len(self.starts) and self.starts[i + 1] < end

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends, strict=True))

    def gaps(self, size: int) -> list[tuple[int, int]]:
        """The ranges of 0..size that no span covers."""
        found, previous = [], 0
        for start, end in zip(self.starts, self.ends, strict=True):
            if start > previous:
                found.append((previous, min(start, size)))
            previous = max(previous, end)
        if previous < size:
            found.append((previous, size))
        return [(s, e) for s, e in found if e > s]


class RegionMap:
    """The known regions of one file, by kind."""

    def __init__(self, elf: ElfFile, regions: Sequence[Region]) -> None:
        self.elf = elf
        self.regions = sorted(regions, key=lambda r: (r.start, r.end))
        self._owned: dict[str, Spans] = {}
        self._foreign: dict[str, Spans] = {}

    @classmethod
    def of(cls, elf: ElfFile) -> RegionMap:
        regions = [*_header_regions(elf), *_segment_regions(elf)]
        if elf.sections:
            regions += _section_regions(elf) + _dynamic_regions(elf, home=False)
        else:
            regions += _dynamic_regions(elf, home=True)
        size = elf.size
        return cls(elf, [r if r.end <= size else replace(r, end=size)
                         for r in regions if r.start < size and r.end > r.start])

    def owned(self, kind: str) -> Spans:
        """The bytes of every region of ``kind``."""
        if kind not in self._owned:
            self._owned[kind] = Spans.of((r.start, r.end) for r in self.regions
                                         if r.kind == kind and r.home)
        return self._owned[kind]

    def foreign(self, kind: str) -> Spans:
        """The bytes of every region of another kind: what an edit of ``kind`` must not touch."""
        if kind not in self._foreign:
            self._foreign[kind] = Spans.of((r.start, r.end) for r in self.regions
                                           if r.kind != kind)
        return self._foreign[kind]

    def check(self, edits: Iterable[Edit]) -> None:
        """Refuse the file (``CorruptElfError``) unless every edit stays inside its own table."""
        for edit in edits:
            start, end = edit.offset, edit.offset + len(edit.data)
            if self.foreign(edit.table).overlaps(start, end):
                raise self._conflict(edit, "overlaps " + self._overlapped(edit.table, start, end))
            if not self.owned(edit.table).contains(start, end):
                raise self._conflict(edit, "lies outside " + self._owners(edit.table))

    def named_at(self, offset: int) -> str | None:
        """The name of a region holding byte ``offset``, for messages."""
        return next((r.name for r in self.regions if r.start <= offset < r.end), None)

    def _overlapped(self, kind: str, start: int, end: int) -> str:
        hit = next(r for r in self.regions if r.kind != kind and r.start < end and r.end > start)
        return hit.describe()

    def _owners(self, kind: str) -> str:
        mine = [r.describe() for r in self.regions if r.kind == kind and r.home]
        where = "the section headers" if self.elf.sections else "the dynamic table"
        return " and ".join(mine) if mine else f"any {kind} table {where} know of"

    def _conflict(self, edit: Edit, problem: str) -> CorruptElfError:
        start, end = edit.offset, edit.offset + len(edit.data)
        return CorruptElfError(
            self.elf.name, f"{edit.what} would be written at {start:#x}..{end:#x}, which "
            f"{problem}; nothing written",
            hint="the dynamic table, the section headers and the program headers disagree "
                 "about where the tables are: rebuild or re-link the file")


def check_edits(elf: ElfFile, edits: Sequence[Edit]) -> None:
    """Every edit lies inside the table it belongs to and touches nothing else (or raise)."""
    if edits:
        RegionMap.of(elf).check(edits)


# -- the regions, from the headers --------------------------------------------------

def _header_regions(elf: ElfFile) -> list[Region]:
    h = elf.header
    found = [Region(0, C.EHDR_SIZE[h.elf_class], OTHER, "the ELF header")]
    if h.phoff and elf.segments:
        size = C.PHDR_SIZE[h.elf_class]
        found.append(Region(h.phoff, h.phoff + len(elf.segments) * size, OTHER,
                            "the program header table"))
    if h.shoff and elf.sections:
        found.append(Region(h.shoff, h.shoff + len(elf.sections) * h.shentsize,
                            SECTION_HEADERS, "the section header table"))
    return found


def _segment_regions(elf: ElfFile) -> list[Region]:
    return [Region(s.offset, s.offset + s.filesz, OTHER, f"the {_TABLE_SEGMENTS[s.type]}")
            for s in elf.segments if s.type in _TABLE_SEGMENTS and s.filesz]


def _section_regions(elf: ElfFile) -> list[Region]:
    dynsym = elf.sections_of_type(C.SHT_DYNSYM)
    symtab = elf.sections_of_type(C.SHT_SYMTAB)
    owners = {DYNSYM: dynsym[0].index if dynsym else None,
              SYMTAB: symtab[0].index if symtab else None}
    return [Region(s.offset, s.offset + s.size, _section_kind(s, owners),
                   f"section {s.name or s.index}")
            for s in elf.sections if s.occupies_file and s.type != C.SHT_NULL and s.size]


def _section_kind(section: Section, owners: dict[str, int | None]) -> str:
    """The kind of table a section is, as ``fix`` finds it (the first of each symbol table)."""
    kind = _SECTION_KINDS.get(section.type)
    if kind in (DYNSYM, SYMTAB):
        return kind if section.index == owners[kind] else OTHER
    if kind == SYMTAB_SHNDX:
        return kind if section.link == owners[SYMTAB] else OTHER
    if kind is not None:
        return kind
    if section.type not in (C.SHT_REL, C.SHT_RELA):
        return OTHER
    if section.link == owners[DYNSYM]:
        return DYNAMIC_RELOCATIONS
    if section.link == owners[SYMTAB]:
        return STATIC_RELOCATIONS
    return DYNAMIC_RELOCATIONS if section.flags & C.SHF_ALLOC else OTHER


# -- the regions, from the dynamic table ------------------------------------------------------

def _dynamic_regions(elf: ElfFile, home: bool) -> list[Region]:
    """The tables every reading of the dynamic table points at.

    ``elf.dynamic`` is how the writer finds the tables; the loader reads the
    table at PT_DYNAMIC's address up to DT_NULL whatever p_filesz says, and
    the .dynamic section may say something else again.  Each different
    reading adds its tables, the writer's as homes when ``home``.
    """
    dynsym = read_dynsym(elf)
    found = []
    for k, values in enumerate(_readings(elf)):
        found += [r if home and k == 0 else replace(r, home=False)
                  for r in _pointed_regions(elf, values, dynsym)]
    return found


def _readings(elf: ElfFile) -> list[DynamicValues]:
    """The writer's reading of the dynamic table first, then any other that differs."""
    readings = [first_values(elf.dynamic)]
    locations = [(s.offset, s.size) for s in elf.sections_of_type(C.SHT_DYNAMIC)]
    for segment in elf.segments:
        if segment.type == C.PT_DYNAMIC:
            start = _to_offset(elf, segment.vaddr)
            locations.append((segment.offset if start is None else start, elf.size))
    for offset, size in locations:
        values = first_values(entries_at(elf, offset, size))
        if values and values not in readings:
            readings.append(values)
    return readings


def _to_offset(elf: ElfFile, address: int) -> int | None:
    """The file offset of a virtual address; None outside every loaded segment."""
    try:
        return elf.vaddr_to_offset(address, "dynamic entry")
    except CorruptElfError:  # not in the file: nothing there can be overwritten
        return None


# (address tag, size tag, kind, name) of the tables whose size the dynamic table gives
_SIZED = ((C.DT_STRTAB, C.DT_STRSZ, OTHER, "the DT_STRTAB strings"),
          (C.DT_RELA, C.DT_RELASZ, DYNAMIC_RELOCATIONS, "the DT_RELA table"),
          (C.DT_REL, C.DT_RELSZ, DYNAMIC_RELOCATIONS, "the DT_REL table"),
          (C.DT_JMPREL, C.DT_PLTRELSZ, DYNAMIC_RELOCATIONS, "the DT_JMPREL table"),
          (C.DT_RELR, C.DT_RELRSZ, OTHER, "the DT_RELR table"),
          (C.DT_INIT_ARRAY, C.DT_INIT_ARRAYSZ, OTHER, "the DT_INIT_ARRAY"),
          (C.DT_FINI_ARRAY, C.DT_FINI_ARRAYSZ, OTHER, "the DT_FINI_ARRAY"),
          (C.DT_PREINIT_ARRAY, C.DT_PREINIT_ARRAYSZ, OTHER, "the DT_PREINIT_ARRAY"))


def _pointed_regions(elf: ElfFile, values: DynamicValues,
                     dynsym: SymbolTable | None) -> list[Region]:
    """The tables one reading of the dynamic table points at, each as long as it is."""
    found = []
    for address, size, kind, name in _SIZED:
        found += _region(elf, values.get(address), values.get(size) or 0, kind, name)
    if dynsym is not None:
        count = dynsym.count
        found += _region(elf, values.get(C.DT_SYMTAB), count * dynsym.entsize, DYNSYM,
                         "the DT_SYMTAB table")
        found += _region(elf, values.get(C.DT_VERSYM), 2 * count, VERSYM, "the DT_VERSYM table")
        found += _gnu_hash_region(elf, _offset(elf, values, C.DT_GNU_HASH,
                                               "the DT_GNU_HASH table"), count)
        found += _sysv_hash_region(elf, _offset(elf, values, C.DT_HASH, "the DT_HASH table"))
    found += _version_region(elf, values, C.DT_VERNEED, C.DT_VERNEEDNUM, VERNEED,
                             "the DT_VERNEED table")
    found += _version_region(elf, values, C.DT_VERDEF, C.DT_VERDEFNUM, VERDEF,
                             "the DT_VERDEF table")
    return found


def _offset(elf: ElfFile, values: DynamicValues, tag: int, name: str) -> int | None:
    address = values.get(tag)
    return None if address is None else _mapped(elf, address, name)


def _region(elf: ElfFile, address: int | None, size: int, kind: str, name: str) -> list[Region]:
    if address is None or not size:
        return []
    offset = _mapped(elf, address, name)
    return [Region(offset, offset + size, kind, name)]


def _mapped(elf: ElfFile, address: int, name: str) -> int:
    """The file offset of a table's address, or a refusal: a table outside every loaded
    segment is one whose bytes nobody can tell, so no edit can be shown to miss it."""
    offset = _to_offset(elf, address)
    if offset is None:
        raise CorruptElfError(elf.name, f"{name} is at address {address:#x}, outside every "
                              "loaded segment; nothing written",
                              hint="the dynamic table points where the file has no bytes")
    return offset


def _gnu_hash_region(elf: ElfFile, offset: int | None, count: int) -> list[Region]:
    end = None if offset is None else gnu_hash_table_end(elf, offset, count)
    if offset is None or end is None:
        return []
    return [Region(offset, end, GNU_HASH, "the DT_GNU_HASH table")]


def _sysv_hash_region(elf: ElfFile, offset: int | None) -> list[Region]:
    end = None if offset is None else sysv_hash_table_end(elf, offset)
    if offset is None or end is None:
        return []
    return [Region(offset, end, SYSV_HASH, "the DT_HASH table")]


def _version_region(elf: ElfFile, values: DynamicValues, tag: int, count_tag: int,
                    layout: ChainLayout, name: str) -> list[Region]:
    start = _offset(elf, values, tag, name)
    if start is None:
        return []
    end = version_table_end(elf, start, values.get(count_tag), layout)
    return [Region(start, end, OTHER, name)] if end > start else []
