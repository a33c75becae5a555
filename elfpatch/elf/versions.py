"""Where the symbol version tables (DT_VERNEED, DT_VERDEF) end.

Both are chains of entries, each with a chain of auxiliary entries, linked
by byte offsets (``vn_next``/``vna_next``, ``vd_next``/``vda_next``) rather
than laid out as arrays, so their extent is found by walking them.  The walk
stops at the count the dynamic table gives, at a zero link, and at the end
of the file: a corrupt table ends early, it never raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from elfpatch.elf.file import ElfFile

MAX_ENTRIES = 1 << 16


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
