"""Every header and table of a file read once, to tell a corrupt input from a bug.

The reader's contract is that a file it cannot trust raises a
``CorruptElfError`` naming what is wrong.  When an analysis still fails with
an unexpected exception, this reads every structure an analysis relies on:
a problem found here is the input's (reported as such, with its reason); a
file that reads cleanly throughout points at a bug of elfpatch's own.  It
runs only after such a failure, so it may read every entry.
"""

from __future__ import annotations

from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import dynamic_symbol_count, read_gnu_hash, read_sysv_hash
from elfpatch.elf.relocations import (
    RelocationTable,
    dynamic_relocation_tables,
    relr_addresses,
    static_relocation_tables,
)
from elfpatch.elf.symbols import symbol_tables
from elfpatch.elf.versions import read_versions


def read_all_structure(elf: ElfFile) -> None:
    """Read the headers, the dynamic table and every symbol, relocation, hash and
    version table with each of their entries; a ``CorruptElfError`` (or one of
    the exceptions a parser may raise) when any of them cannot be trusted."""
    _ = (elf.sections, elf.segments, elf.dynamic, elf.needed, elf.soname, elf.rpath,
         elf.runpath, elf.nodelete)
    symbols = {table.kind: table for table in symbol_tables(elf)}
    for table in symbols.values():
        _ = (table.infos, table.others, table.shndxs, table.values)
        for index in range(table.count):
            table.name(index)
    dynsym = symbols.get(".dynsym")
    if dynsym is not None:
        read_versions(elf, dynsym.count)
    for relocations in dynamic_relocation_tables(elf):
        _ = (relocations.offsets, relocations.types)
        _symbols_within(elf, relocations, dynsym.count if dynsym is not None else 0)
    for relocations in static_relocation_tables(elf):
        _ = (relocations.offsets, relocations.symbol_indices, relocations.types)
    relr_addresses(elf)
    read_gnu_hash(elf)
    read_sysv_hash(elf)
    dynamic_symbol_count(elf)


def _symbols_within(elf: ElfFile, relocations: RelocationTable, count: int) -> None:
    """A dynamic relocation names a symbol of .dynsym, or none (index 0)."""
    indices = relocations.symbol_indices
    beyond = max(indices, default=0)
    if beyond and beyond >= count:
        raise elf.corrupt(f"{relocations.name} names symbol {beyond}, past the "
                          f"{count} entries of .dynsym")
