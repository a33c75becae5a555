"""Moving newly LOCAL symbols in front of the globals, and renumbering references.

ELF requires a symbol table's locals to precede its globals, with sh_info
giving the index of the first global: readelf warns otherwise and GNU ld
prints a diagnostic every time anything links against the library.  So a
symbol made LOCAL moves to the end of the locals, every later global moves
up, and every table holding a symbol index follows: relocations, the
version table, the GNU and System V hash tables.  The tables keep their
size and place; only bytes inside them change.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column, pack_column
from elfpatch.elf.file import ElfFile, Section
from elfpatch.elf.hashes import GnuHashTable, SysvHashTable, gnu_hash
from elfpatch.elf.relocations import RelocationTable
from elfpatch.elf.symbols import SymbolTable


@dataclass(frozen=True)
class Edit:
    """Bytes to write at a file offset, and what they are (for reports and tests)."""

    offset: int
    data: bytes
    what: str


@dataclass(frozen=True)
class Reordering:
    """Old index -> new index when ``moved`` (sorted, all >= first_global) become local."""

    count: int
    first_global: int
    moved: tuple[int, ...]

    @property
    def new_first_global(self) -> int:
        return self.first_global + len(self.moved)

    def new_index(self, old: int) -> int:
        if old < self.first_global or not self.moved:
            return old
        position = _position(self.moved, old)
        if position is not None:
            return self.first_global + position
        return old + len(self.moved) - bisect_right(self.moved, old)

    def mapping(self) -> array:
        """new_index for every old index, as one array built from runs, not per symbol."""
        table = array("I", range(self.first_global))
        table.extend(range(self.count - self.first_global))  # placeholder, overwritten below
        moved, first = self.moved, self.first_global
        start = first
        for k, index in enumerate((*moved, self.count)):
            shift = len(moved) - k  # later moved symbols that now precede this run
            table[start:index] = array("I", range(start + shift, index + shift))
            if index < self.count:
                table[index] = first + k
            start = index + 1
        return table

    def order(self) -> list[int]:
        """Old indices in their new order."""
        moved = set(self.moved)
        rest = [i for i in range(self.first_global, self.count) if i not in moved]
        return list(range(self.first_global)) + list(self.moved) + rest


def _position(sorted_values: Sequence[int], value: int) -> int | None:
    i = bisect_right(sorted_values, value) - 1
    return i if i >= 0 and sorted_values[i] == value else None


def first_global_index(table: SymbolTable) -> int:
    """sh_info when the headers give it, else the length of the leading run of locals."""
    if table.first_global is not None:
        return table.first_global
    index = 1
    while index < table.count and table.infos[index] >> 4 == C.STB_LOCAL:
        index += 1
    return min(index, table.count)


def reordered_table(table: SymbolTable, patched: bytes, reordering: Reordering) -> bytes:
    """The table's entries (already carrying their new st_info) in the new order."""
    size = table.entsize
    first, moved = reordering.first_global, reordering.moved
    pieces = [patched[: first * size]]
    pieces.extend(patched[i * size : (i + 1) * size] for i in moved)
    previous = first
    for i in moved:
        pieces.append(patched[previous * size : i * size])
        previous = i + 1
    pieces.append(patched[previous * size : table.count * size])
    return b"".join(pieces)


def sh_info_edit(elf: ElfFile, section: Section, value: int, what: str) -> Edit:
    """A new sh_info for ``section``, written into its section header."""
    field = 44 if elf.header.elf_class == 64 else 28
    data = value.to_bytes(4, "little" if elf.header.little_endian else "big")
    return Edit(section.header_offset + field, data, what)


def relocation_edits(elf: ElfFile, tables: list[RelocationTable],
                     reordering: Reordering) -> list[Edit]:
    """Renumber the symbol index of every relocation whose symbol moved."""
    if not reordering.moved:
        return []
    mapping = reordering.mapping()
    lowest = reordering.first_global
    edits = []
    for table in tables:
        shift = table.symbol_shift
        low_mask = (1 << shift) - 1
        infos = table.infos
        new_infos = array(infos.typecode, infos)
        changed = False
        for i, info in enumerate(infos):
            symbol = info >> shift
            if symbol >= lowest:
                if symbol >= reordering.count:
                    raise elf.corrupt(f"{table.name} entry {i} refers to symbol {symbol}, past "
                                      f"the end of .dynsym ({reordering.count} entries)")
                new_infos[i] = (mapping[symbol] << shift) | (info & low_mask)
                changed = True
        if changed:
            edits.append(_interleave_info(elf, table, new_infos))
    return edits


def _interleave_info(elf: ElfFile, table: RelocationTable, new_infos: array) -> Edit:
    word = elf.word_size
    data = bytearray(table.raw)
    packed = pack_column(new_infos, elf.header.little_endian)
    step = table.entsize
    for slot in range(word):
        data[word + slot :: step] = packed[slot::word]
    return Edit(table.offset, bytes(data), f"{table.name} symbol indices")


def versym_edit(elf: ElfFile, offset: int, reordering: Reordering) -> Edit:
    """Permute .gnu.version; a symbol made local gets VER_NDX_LOCAL."""
    little = elf.header.little_endian
    raw = elf.bytes_at(offset, 2 * reordering.count, ".gnu.version")
    old = column(raw, 2, 0, 2, little)
    moved = set(reordering.moved)
    new = array("H", (0 if i in moved else old[i] for i in reordering.order()))
    return Edit(offset, pack_column(new, little), ".gnu.version")


def gnu_hash_edits(elf: ElfFile, table: GnuHashTable, reordering: Reordering,
                   name_of: Callable[[int], bytes]) -> list[Edit]:
    """Drop the moved symbols from the hashed tail: symoffset, buckets, end bits, Bloom filter.

    A Bloom filter keeping their bits would still be correct (a superset),
    but eu-elflint demands the exact one, so it is rebuilt.
    """
    little = elf.header.little_endian
    count, symoffset = reordering.count, table.symoffset
    chains = column(elf.bytes_at(table.chains_offset, 4 * (count - symoffset), ".gnu.hash chains"),
                    4, 0, 4, little)
    bucket_of = _gnu_bucket_of_each_symbol(elf, table, chains, count)
    moved = set(reordering.moved)
    kept = [i for i in range(symoffset, count) if i not in moved]
    new_symoffset = count - len(kept)
    new_chains = array("I", [0] * (count - symoffset))
    new_buckets = array("I", [0] * table.nbuckets)
    for position, old in enumerate(kept):
        bucket = bucket_of[old - symoffset]
        is_last = position + 1 == len(kept) or bucket_of[kept[position + 1] - symoffset] != bucket
        new_chains[position] = (chains[old - symoffset] & ~1) | int(is_last)
        if new_buckets[bucket] == 0:
            new_buckets[bucket] = new_symoffset + position
    hashes = [_full_gnu_hash(chains[old - symoffset], bucket_of[old - symoffset],
                             table.nbuckets, partial(name_of, old)) for old in kept]
    header = table.offset + 4
    return [
        Edit(table.offset + 16, _packed_words(table, table.bloom_words(hashes), little),
             ".gnu.hash Bloom filter"),
        Edit(header, new_symoffset.to_bytes(4, "little" if little else "big"),
             ".gnu.hash symoffset"),
        Edit(table.buckets_offset, pack_column(new_buckets, little), ".gnu.hash buckets"),
        Edit(table.chains_offset, pack_column(new_chains, little), ".gnu.hash chains"),
    ]


def _full_gnu_hash(chain_value: int, bucket: int, nbuckets: int,
                   name: Callable[[], bytes]) -> int:
    """The symbol's hash: the chain keeps all but bit 0, which the bucket decides.

    h and h + 1 fall in different buckets whenever there are two or more,
    so the name needs hashing only for a single-bucket table.
    """
    if nbuckets < 2:
        return gnu_hash(name())
    even = chain_value & ~1
    return even if even % nbuckets == bucket else even | 1


def _packed_words(table: GnuHashTable, words: list[int], little: bool) -> bytes:
    return pack_column(array("I" if table.word_size == 4 else "Q", words), little)


def _gnu_bucket_of_each_symbol(elf: ElfFile, table: GnuHashTable, chains: array,
                               count: int) -> list[int]:
    """Bucket of each hashed symbol, from the bucket starts and the chains' end bits."""
    starts = {start: bucket for bucket, start in enumerate(table.buckets) if start}
    bucket_of = [0] * (count - table.symoffset)
    current: int | None = None
    for i in range(table.symoffset, count):
        if i in starts:
            current = starts[i]
        if current is None:
            raise elf.corrupt(f".gnu.hash: symbol {i} belongs to no bucket")
        bucket_of[i - table.symoffset] = current
        if chains[i - table.symoffset] & 1:
            current = None
    return bucket_of


def sysv_hash_edits(elf: ElfFile, table: SysvHashTable, reordering: Reordering) -> list[Edit]:
    """Renumber buckets and chains, linking around the symbols made local."""
    if table.nchain != reordering.count:
        raise elf.corrupt(f".hash has {table.nchain} chain entries for "
                          f"{reordering.count} symbols")
    moved = set(reordering.moved)
    mapping = reordering.mapping()

    def next_kept(index: int) -> int:
        seen = 0
        while index in moved:
            index = table.chains[index]
            seen += 1
            if seen > table.nchain:
                raise elf.corrupt(".hash chain loops")
        return mapping[index] if index < table.nchain else 0

    buckets = array(table.buckets.typecode, (next_kept(b) for b in table.buckets))
    chains = array(table.chains.typecode, [0] * table.nchain)
    for old in range(table.nchain):
        if old not in moved:
            chains[mapping[old]] = next_kept(table.chains[old])
    little = elf.header.little_endian
    return [
        Edit(table.buckets_offset, pack_column(buckets, little), ".hash buckets"),
        Edit(table.chains_offset, pack_column(chains, little), ".hash chains"),
    ]


def symtab_shndx_edit(elf: ElfFile, offset: int, reordering: Reordering) -> Edit:
    """Permute the extended section index table that parallels .symtab."""
    little = elf.header.little_endian
    old = column(elf.bytes_at(offset, 4 * reordering.count, ".symtab_shndx"), 4, 0, 4, little)
    new = array("I", (old[i] for i in reordering.order()))
    return Edit(offset, pack_column(new, little), ".symtab_shndx")
