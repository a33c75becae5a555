"""Dynamic tables read wherever something says one is, as the loader would read it.

``ElfFile.dynamic`` is the table the headers point at, read strictly.  A
damaged or hand-edited file may have others: the loader reads the table at
PT_DYNAMIC's address up to DT_NULL whatever p_filesz says, and the .dynamic
section may say something else again.  ``entries_at`` reads one such
reading without trusting it: it stops at DT_NULL, at the end of the file or
after 65,536 entries, and never raises.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile

MAX_ENTRIES = 1 << 16

DynamicValues = dict[int, int]  # the first value of each tag of one dynamic table


def entries_at(elf: ElfFile, offset: int, size: int) -> list[tuple[int, int]]:
    """(tag, value) from ``offset`` up to DT_NULL, ``size`` bytes or the end of the file."""
    fmt = elf.byte_order + ("iI" if elf.word_size == 4 else "qQ")
    step = 2 * elf.word_size
    stop = min(offset + size, elf.size, offset + step * MAX_ENTRIES)
    found = []
    for at in range(max(offset, 0), stop - step + 1, step):
        tag, value = struct.unpack_from(fmt, elf.view, at)
        if tag == C.DT_NULL:
            break
        found.append((tag, value))
    return found


def first_values(entries: Iterable[tuple[int, int]]) -> DynamicValues:
    """The first value of each tag, as the loader takes it."""
    values: DynamicValues = {}
    for tag, value in entries:
        values.setdefault(tag, value)
    return values
