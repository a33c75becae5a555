"""Compile-unit address ranges from DWARF, through pyelftools.

Only DWARF names a translation unit's source file reliably; this is
consulted when the object carries .debug_info.
"""

from __future__ import annotations

from elfpatch.elf.file import ElfFile


def compile_unit_ranges(elf: ElfFile) -> list[tuple[int, int, str]]:
    """(low, high, source name) of each compile unit's code ranges."""
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
