"""Where functions start and end, from the unwind tables, in a file without symbols.

``strip`` removes .symtab but never the unwind tables: ``.eh_frame_hdr``
(``PT_GNU_EH_FRAME``) holds a sorted table of every FDE's first address, and
each FDE its address range, for every function and every split-off part
(``.cold``) the compiler emitted.  Only the table form GNU ld and lld write
is read (table entries ``DW_EH_PE_datarel | DW_EH_PE_sdata4``, FDE addresses
``pcrel | sdata4``); anything else gives no bounds, and the caller does
without them, as before.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from functools import cached_property

from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError

PT_GNU_EH_FRAME = 0x6474E550
_DATAREL_SDATA4 = 0x3B
_UDATA4 = 0x03
_OMIT = 0xFF
_HEADER = 4  # version, eh_frame_ptr encoding, fde_count encoding, table encoding


class FunctionBounds:
    """Start -> size of each function the unwind tables describe."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf

    @cached_property
    def _table(self) -> tuple[array[int], array[int]] | None:
        """(starts, FDE addresses), sorted by start; None without a usable table."""
        header = next((s for s in self.elf.segments if s.type == PT_GNU_EH_FRAME), None)
        if header is None or header.filesz < _HEADER + 8:
            return None
        try:
            version, pointer_encoding, count_encoding, table_encoding = self.elf.unpack(
                "4B", header.offset, ".eh_frame_hdr")
            if version != 1 or count_encoding != _UDATA4 or table_encoding != _DATAREL_SDATA4 \
                    or pointer_encoding == _OMIT:
                return None
            (count,) = self.elf.unpack("I", header.offset + _HEADER + 4, ".eh_frame_hdr")
            raw = self.elf.bytes_at(header.offset + _HEADER + 8, 8 * count, ".eh_frame_hdr")
        except ElfpatchError:
            return None
        pairs = array("i", bytes(raw))
        if not self.elf.header.little_endian:
            pairs.byteswap()
        base = header.vaddr
        if pairs and not 0 <= base + min(pairs) <= base + max(pairs) < 1 << 64:
            return None  # entries before address 0 or past the top: no table to trust
        return (array("Q", (base + value for value in pairs[0::2])),
                array("Q", (base + value for value in pairs[1::2])))

    @property
    def available(self) -> bool:
        return bool(self._table)

    @property
    def starts(self) -> array[int]:
        """Where each function (or split-off part) the table describes starts, sorted."""
        table = self._table
        return table[0] if table is not None else array("Q")

    def size_at(self, start: int) -> int | None:
        """The size of the function (or split-off part) starting at ``start``, or None."""
        table = self._table
        if table is None:
            return None
        starts, fdes = table
        k = bisect_left(starts, start)
        if k == len(starts) or starts[k] != start:
            return None
        return self._fde_range(fdes[k], start)

    def _fde_range(self, fde: int, start: int) -> int | None:
        """pc_range of the FDE at ``fde``, once its pc_begin is seen to be ``start``."""
        try:
            offset = self.elf.vaddr_to_offset(fde, "FDE")
            length, _cie, begin, size = self.elf.unpack("IIiI", offset, "FDE")
        except ElfpatchError:
            return None
        if length in (0, 0xFFFFFFFF) or fde + 8 + begin != start:
            return None  # a 64-bit FDE, or another pointer encoding: not read
        return size
