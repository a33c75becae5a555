"""Compile-unit address ranges from DWARF: each unit's header and first entry only.

Only DWARF names a translation unit's source file reliably.  What that takes
is the top entry of each compile unit (``DW_TAG_compile_unit``: its name, its
``DW_AT_low_pc``/``DW_AT_high_pc`` or ``DW_AT_ranges``), never the tree of
types and variables under it, which is almost all of a ``-g`` build's debug
information: each unit's header gives the next unit's offset, so the rest is
skipped without being read.  DWARF 2 to 5, 32- and 64-bit; the string,
address and range-list sections the top entries point into are read where
they point.  Compressed debug sections are read through pyelftools.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from elfpatch.elf.file import ElfFile, Section

SHF_COMPRESSED = 0x800

# Attributes (DW_AT_*) and unit types (DW_UT_*) read.
_NAME, _LOW_PC, _HIGH_PC, _RANGES = 0x03, 0x11, 0x12, 0x55
_STR_OFFSETS_BASE, _ADDR_BASE, _RNGLISTS_BASE = 0x72, 0x73, 0x74
_UNIT_TYPES = (1, 3)  # DW_UT_compile, DW_UT_partial

# Forms (DW_FORM_*) by what their value is.
_ADDR, _STRING, _STRP, _LINE_STRP, _IMPLICIT_CONST, _INDIRECT = 0x01, 0x08, 0x0E, 0x1F, 0x21, 0x16
_STRX = {0x1A: 0, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}  # size, 0 for ULEB128
_ADDRX = {0x1B: 0, 0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4}
_FIXED = {0x0B: 1, 0x11: 1, 0x0C: 1, 0x05: 2, 0x12: 2, 0x06: 4, 0x13: 4, 0x1C: 4,
          0x07: 8, 0x14: 8, 0x20: 8, 0x24: 8, 0x1E: 16, 0x19: 0}
_OFFSET_SIZED = (0x0E, 0x17, 0x1D, 0x1F)  # strp, sec_offset, strp_sup, line_strp
_ULEB = (0x0F, 0x15, 0x22, 0x23)  # udata, ref_udata, loclistx, rnglistx
_RNGLISTX = 0x23
_BLOCKS = {0x0A: 1, 0x03: 2, 0x04: 4}  # block1, block2, block4: length size
_ULEB_BLOCKS = (0x09, 0x18)  # block, exprloc


class _Unreadable(Exception):
    """The debug information is not what DWARF says it should be."""


def compile_unit_ranges(elf: ElfFile) -> list[tuple[int, int, str]]:
    """(low, high, source name) of each compile unit's code ranges."""
    sections = {s.name: s for s in elf.sections if s.name.startswith(".debug_")}
    info = sections.get(".debug_info")
    if info is None or any(s.flags & SHF_COMPRESSED for s in sections.values()):
        return _through_pyelftools(elf)
    reader = _Reader(elf, sections)
    try:
        return list(reader.ranges())
    except (_Unreadable, IndexError, KeyError, ValueError, UnicodeError):
        return []  # unreadable debug info only costs the DWARF names


def units_of(elf: ElfFile, addresses: Iterable[int]) -> dict[int, str]:
    """The compile unit's name of each of ``addresses`` that one covers (the first unit
    in the file's order that does, as ``compile_unit_ranges`` lists them).

    With ``.debug_aranges`` (gcc writes it), only the units that cover one of
    ``addresses`` are decoded; without, every unit's ranges are."""
    wanted = sorted(set(addresses))
    sections = {s.name: s for s in elf.sections if s.name.startswith(".debug_")}
    aranges = sections.get(".debug_aranges")
    found: dict[int, str] = {}
    if aranges is None or ".debug_info" not in sections \
            or any(s.flags & SHF_COMPRESSED for s in sections.values()):
        _first_cover(compile_unit_ranges(elf), wanted, found)
        return found
    reader = _Reader(elf, sections)
    try:
        units = _covering_units(reader, elf.bytes_at(aranges.offset, aranges.size,
                                                     ".debug_aranges"), wanted)
        for offset, covered in units.items():
            name = reader.name_at(offset)
            if name is not None:
                found.update(dict.fromkeys(covered, name))
    except (_Unreadable, IndexError, KeyError, ValueError, UnicodeError):
        return {}
    return found


def _first_cover(ranges: list[tuple[int, int, str]], wanted: list[int],
                 found: dict[int, str]) -> None:
    for low, high, name in ranges:
        k = bisect_left(wanted, low)
        while k < len(wanted) and wanted[k] < high:
            found.setdefault(wanted[k], name)
            k += 1


def _covering_units(reader: _Reader, data: memoryview, wanted: list[int],
                    ) -> dict[int, list[int]]:
    """.debug_info offset of the first unit covering each wanted address -> those addresses."""
    owner: dict[int, int] = {}
    at = 0
    while at + 16 <= len(data) and len(owner) < len(wanted):
        length = reader.word(data, at, 4)
        offset_size, header = (8, at + 12) if length == 0xFFFFFFFF else (4, at + 4)
        if offset_size == 8:
            length = reader.word(data, at + 4, 8)
        end = header + length
        info = reader.word(data, header + 2, offset_size)
        size = data[header + 2 + offset_size]
        if size not in (4, 8) or end > len(data):
            raise _Unreadable
        tuples = header + 4 + offset_size
        tuples += -tuples % (2 * size)  # aligned to a pair of addresses
        pairs = data[tuples : end - (end - tuples) % (2 * size)].cast("Q" if size == 8 else "I")
        if not reader.little:
            raise _Unreadable  # not read on big-endian files: the caller does without
        lows, spans = pairs[0::2], pairs[1::2]
        order = sorted(range(len(spans)), key=lows.__getitem__)  # one unit's: disjoint
        starts = [lows[k] for k in order]
        for address in wanted:
            k = bisect_right(starts, address) - 1
            if k >= 0 and address < starts[k] + spans[order[k]]:
                owner.setdefault(address, info)
        at = end
    units: dict[int, list[int]] = {}
    for address, info in owner.items():
        units.setdefault(info, []).append(address)
    return units


class _Reader:
    def __init__(self, elf: ElfFile, sections: dict[str, Section]) -> None:
        self.little = elf.header.little_endian
        # Views, not copies: a -g program's .debug_str runs to 100 MB and more, of
        # which a unit's name is a few bytes.
        self.data = {name: elf.bytes_at(s.offset, s.size, name)
                     for name, s in sections.items()
                     if name in (".debug_abbrev", ".debug_str", ".debug_line_str",
                                 ".debug_str_offsets", ".debug_addr", ".debug_ranges",
                                 ".debug_rnglists") and s.occupies_file}
        info = sections[".debug_info"]
        self.info = elf.view[info.offset : info.offset + info.size]
        elf.check_range(info.offset, info.size, ".debug_info")
        self.abbrevs: dict[int, dict[int, list[tuple[int, int, int]]]] = {}

    # -- numbers --------------------------------------------------------------------
    def word(self, data: bytes | memoryview, at: int, size: int) -> int:
        if at + size > len(data):
            raise _Unreadable
        return int.from_bytes(data[at : at + size], "little" if self.little else "big")

    @staticmethod
    def uleb(data: bytes | memoryview, at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, at

    @classmethod
    def sleb(cls, data: bytes | memoryview, at: int) -> tuple[int, int]:
        start = at
        value, at = cls.uleb(data, at)
        bits = 7 * (at - start)
        return (value - (1 << bits) if value & (1 << (bits - 1)) else value), at

    # -- units --------------------------------------------------------------------------
    def ranges(self) -> Iterator[tuple[int, int, str]]:
        at = 0
        while at + 11 <= len(self.info):
            length = self.word(self.info, at, 4)
            offset_size, header = (8, at + 12) if length == 0xFFFFFFFF else (4, at + 4)
            if offset_size == 8:
                length = self.word(self.info, at + 4, 8)
            end = header + length
            if length == 0 or end > len(self.info):
                return
            yield from self.unit(header, offset_size)
            at = end

    def name_at(self, offset: int) -> str | None:
        """The name of the unit whose header is at ``offset`` in .debug_info."""
        length = self.word(self.info, offset, 4)
        top = self.top_entry(offset + 12, 8) if length == 0xFFFFFFFF \
            else self.top_entry(offset + 4, 4)
        if top is None:
            return None
        unit, values = top
        return unit.name(values.get(_NAME), values)

    def unit(self, at: int, offset_size: int) -> Iterator[tuple[int, int, str]]:
        top = self.top_entry(at, offset_size)
        if top is None:
            return
        unit, values = top
        name = unit.name(values.get(_NAME), values)
        if name:
            yield from ((low, high, name) for low, high in unit.code_ranges(values))

    def top_entry(self, at: int, offset_size: int,
                  ) -> tuple[_Unit, _Attributes] | None:
        """The unit's decoder and its top entry's attributes (None: not a compile unit)."""
        version = self.word(self.info, at, 2)
        if version >= 5:
            unit_type, address_size = self.info[at + 2], self.info[at + 3]
            abbrev_offset = self.word(self.info, at + 4, offset_size)
            at += 4 + offset_size
            if unit_type not in _UNIT_TYPES:
                return None
        elif version >= 2:
            abbrev_offset = self.word(self.info, at + 2, offset_size)
            address_size = self.info[at + 2 + offset_size]
            at += 3 + offset_size
        else:
            raise _Unreadable
        unit = _Unit(self, version, offset_size, address_size)
        code, at = self.uleb(self.info, at)
        attributes = self.abbreviation(abbrev_offset, code)
        values: _Attributes = {}
        for attribute, form, constant in attributes:
            value, at = unit.value(at, form, constant)
            if attribute in _WANTED:
                values[attribute] = (form, value)
        return unit, values

    def abbreviation(self, offset: int, code: int) -> list[tuple[int, int, int]]:
        """(attribute, form, implicit constant) of abbreviation ``code`` at ``offset``."""
        table = self.abbrevs.setdefault(offset, {})
        if code not in table:
            table[code] = self.read_abbreviation(offset, code)
        return table[code]

    def read_abbreviation(self, offset: int, code: int) -> list[tuple[int, int, int]]:
        data = self.data[".debug_abbrev"]
        at = offset
        while True:
            found, at = self.uleb(data, at)
            if found == 0:
                raise _Unreadable
            _tag, at = self.uleb(data, at)
            at += 1  # DW_CHILDREN_*
            attributes = []
            while True:
                name, at = self.uleb(data, at)
                form, at = self.uleb(data, at)
                constant = 0
                if form == _IMPLICIT_CONST:
                    constant, at = self.sleb(data, at)
                if name == 0 and form == 0:
                    break
                attributes.append((name, form, constant))
            if found == code:
                return attributes


_WANTED = frozenset({_NAME, _LOW_PC, _HIGH_PC, _RANGES, _STR_OFFSETS_BASE, _ADDR_BASE,
                     _RNGLISTS_BASE})
# A top entry's wanted attributes: DW_AT_* -> (DW_FORM_*, value); a value is bytes
# only for an inline string (DW_FORM_string).
_Attributes = dict[int, tuple[int, int | bytes]]


def _numeric(values: _Attributes, attribute: int) -> tuple[int, int] | None:
    """(form, value) of an attribute that holds a number: an address, an offset, a size.
    A string there is DWARF no producer writes (the caller does without the unit names)."""
    found = values.get(attribute)
    if found is None:
        return None
    form, value = found
    if isinstance(value, bytes):
        raise _Unreadable
    return form, value


def _number(values: _Attributes, attribute: int, default: int) -> int:
    found = _numeric(values, attribute)
    return default if found is None else found[1]


class _Unit:
    """One compile unit's top entry, decoded."""

    def __init__(self, reader: _Reader, version: int, offset_size: int,
                 address_size: int) -> None:
        self.reader, self.version = reader, version
        self.offset_size, self.address_size = offset_size, address_size

    def value(self, at: int, form: int, constant: int) -> tuple[int | bytes, int]:
        """(value, where the next one starts) of an attribute of ``form`` at ``at``."""
        reader, info = self.reader, self.reader.info
        if form == _INDIRECT:
            form, at = reader.uleb(info, at)
        if form == _ADDR:
            return reader.word(info, at, self.address_size), at + self.address_size
        if form == _STRING:
            end = bytes(info[at : at + 4096]).index(b"\0")
            return bytes(info[at : at + end]), at + end + 1
        if form in _OFFSET_SIZED or (form == 0x10 and self.version >= 3):  # ref_addr
            return reader.word(info, at, self.offset_size), at + self.offset_size
        if form == 0x10:
            return reader.word(info, at, self.address_size), at + self.address_size
        if form == _IMPLICIT_CONST:
            return constant, at
        for sizes in (_STRX, _ADDRX):
            if form in sizes:
                size = sizes[form]
                return reader.uleb(info, at) if size == 0 \
                    else (reader.word(info, at, size), at + size)
        if form in _FIXED:
            size = _FIXED[form]
            return reader.word(info, at, size) if size else 1, at + size
        if form in _ULEB:
            return reader.uleb(info, at)
        if form == 0x0D:
            return reader.sleb(info, at)
        if form in _BLOCKS:
            length = reader.word(info, at, _BLOCKS[form])
            return 0, at + _BLOCKS[form] + length
        if form in _ULEB_BLOCKS:
            length, at = reader.uleb(info, at)
            return 0, at + length
        raise _Unreadable

    def name(self, found: tuple[int, int | bytes] | None, values: _Attributes) -> str | None:
        if found is None:
            return None
        form, value = found
        if isinstance(value, bytes):
            text = value
        elif form == _STRP:
            text = self.cstring(".debug_str", value)
        elif form == _LINE_STRP:
            text = self.cstring(".debug_line_str", value)
        elif form in _STRX:
            base = _number(values, _STR_OFFSETS_BASE, 8 if self.offset_size == 4 else 16)
            offsets = self.reader.data[".debug_str_offsets"]
            at = base + value * self.offset_size
            text = self.cstring(".debug_str", self.reader.word(offsets, at, self.offset_size))
        else:
            return None
        return text.decode("utf-8", "replace")

    def cstring(self, section: str, offset: int) -> bytes:
        data = self.reader.data[section]
        chunk = 256
        while True:
            piece = bytes(data[offset : offset + chunk])
            end = piece.find(b"\0")
            if end >= 0:
                return piece[:end]
            if offset + chunk >= len(data):  # no terminator before the section ends
                raise _Unreadable
            chunk *= 4

    def address(self, form: int, value: int, values: _Attributes) -> int:
        if form not in _ADDRX:
            return value
        base = _number(values, _ADDR_BASE, 8)
        return self.reader.word(self.reader.data[".debug_addr"],
                                base + value * self.address_size, self.address_size)

    def code_ranges(self, values: _Attributes) -> list[tuple[int, int]]:
        low = _numeric(values, _LOW_PC)
        base = self.address(low[0], low[1], values) if low is not None else 0
        high = _numeric(values, _HIGH_PC)
        if low is not None and high is not None:
            form, value = high
            end = self.address(form, value, values) if form == _ADDR or form in _ADDRX \
                else base + value
            return [(base, end)]
        ranges = _numeric(values, _RANGES)
        if ranges is None:
            return []
        form, offset = ranges
        if self.version >= 5:
            return list(self.range_list(form, offset, base, values))
        return list(self.old_ranges(offset, base))

    def old_ranges(self, offset: int, base: int) -> Iterator[tuple[int, int]]:
        """DWARF 2-4 ``.debug_ranges``: address pairs, a base selection, a (0, 0) end."""
        data, size, reader = self.reader.data[".debug_ranges"], self.address_size, self.reader
        largest = (1 << (8 * size)) - 1
        at = offset
        while True:
            begin, end = reader.word(data, at, size), reader.word(data, at + size, size)
            at += 2 * size
            if begin == 0 and end == 0:
                return
            if begin == largest:
                base = end
            elif begin != end:
                yield base + begin, base + end

    def range_list(self, form: int, offset: int, base: int,
                   values: _Attributes) -> Iterator[tuple[int, int]]:
        """DWARF 5 ``.debug_rnglists`` entries (DW_RLE_*)."""
        data, reader, size = self.reader.data[".debug_rnglists"], self.reader, self.address_size
        if form == _RNGLISTX:
            lists = _number(values, _RNGLISTS_BASE, 12 if self.offset_size == 4 else 20)
            offset = lists + reader.word(data, lists + offset * self.offset_size,
                                         self.offset_size)
        at = offset
        while True:
            kind = data[at]
            at += 1
            if kind == 0:  # end_of_list
                return
            if kind == 1:  # base_addressx
                index, at = reader.uleb(data, at)
                base = self.address(0x1B, index, values)
            elif kind in (2, 3):  # startx_endx, startx_length
                first, at = reader.uleb(data, at)
                second, at = reader.uleb(data, at)
                start = self.address(0x1B, first, values)
                yield start, self.address(0x1B, second, values) if kind == 2 else start + second
            elif kind == 4:  # offset_pair
                first, at = reader.uleb(data, at)
                second, at = reader.uleb(data, at)
                yield base + first, base + second
            elif kind == 5:  # base_address
                base, at = reader.word(data, at, size), at + size
            elif kind == 6:  # start_end
                yield reader.word(data, at, size), reader.word(data, at + size, size)
                at += 2 * size
            elif kind == 7:  # start_length
                start = reader.word(data, at, size)
                length, at = reader.uleb(data, at + size)
                yield start, start + length
            else:
                raise _Unreadable


# -- compressed debug sections ---------------------------------------------------------
def _through_pyelftools(elf: ElfFile) -> list[tuple[int, int, str]]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        dwarf = ELFFile(elf.stream()).get_dwarf_info()  # type: ignore[arg-type]
        return list(_ranges(dwarf))
    except (ELFError, ValueError, KeyError, IndexError, AttributeError, TypeError):
        return []  # unreadable debug info only costs the DWARF names


def _ranges(dwarf: object) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    range_lists = dwarf.range_lists()  # type: ignore[attr-defined]
    for unit in dwarf.iter_CUs():  # type: ignore[attr-defined]
        top = unit.get_top_DIE()
        name_attr = top.attributes.get("DW_AT_name")
        if name_attr is None:
            continue
        name = name_attr.value.decode("utf-8", "replace")
        found.extend((low, high, name) for low, high in _die_ranges(top, range_lists))
    return found


def _die_ranges(die: object, range_lists: object) -> list[tuple[int, int]]:
    attributes = die.attributes  # type: ignore[attr-defined]
    low = attributes.get("DW_AT_low_pc")
    high = attributes.get("DW_AT_high_pc")
    if low is not None and high is not None:
        end = high.value if high.form == "DW_FORM_addr" else low.value + high.value
        return [(low.value, end)]
    ranges = attributes.get("DW_AT_ranges")
    if ranges is None or range_lists is None:
        return []
    base = low.value if low is not None else 0
    result = []
    for entry in range_lists.get_range_list_at_offset(ranges.value, cu=die.cu):  # type: ignore
        if hasattr(entry, "begin_offset"):
            is_absolute = getattr(entry, "is_absolute", False)
            offset = 0 if is_absolute else base
            result.append((entry.begin_offset + offset, entry.end_offset + offset))
    return result
