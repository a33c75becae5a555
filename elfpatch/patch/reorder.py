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
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column, pack_column
from elfpatch.elf.file import ElfFile, Section
from elfpatch.elf.hashes import (
    GnuHashTable,
    SysvHashTable,
    gnu_chain_end_flags,
    gnu_hash,
    read_gnu_chains,
)
from elfpatch.elf.relocations import RelocationTable
from elfpatch.elf.symbols import SymbolTable
from elfpatch.patch import regions
from elfpatch.patch.edit import Edit


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

    def mapping(self) -> array[int]:
        """new_index for every old index, as one array built from runs, not per symbol."""
        return self._mapping

    @cached_property
    def _mapping(self) -> array[int]:
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
    found = table.first_nonlocal(1)
    return found if found is not None else table.count


def reordered_table(table: SymbolTable, patched: bytes | bytearray,
                    reordering: Reordering) -> bytes:
    """The table's entries (already carrying their new st_info) in the new order."""
    return reordered_entries(patched, table.entsize, reordering)


def reordered_entries(data: bytes | bytearray | memoryview, size: int,
                      reordering: Reordering) -> bytes:
    """Fixed-size entries, one per symbol, moved as the symbols move."""
    first, moved = reordering.first_global, reordering.moved
    view = memoryview(data)  # slices of a view copy nothing; join copies once
    pieces = [view[: first * size]]
    pieces.extend(view[i * size : (i + 1) * size] for i in moved)
    previous = first
    for i in moved:
        pieces.append(view[previous * size : i * size])
        previous = i + 1
    pieces.append(view[previous * size : reordering.count * size])
    return b"".join(pieces)


def sh_info_field(elf: ElfFile, section: Section) -> int:
    """File offset of ``section``'s sh_info in its section header."""
    return section.header_offset + C.SH_INFO_OFFSET[elf.header.elf_class]


def sh_info_edit(elf: ElfFile, section: Section, value: int, what: str) -> Edit:
    """A new sh_info for ``section``, written into its section header."""
    data = value.to_bytes(4, "little" if elf.header.little_endian else "big")
    return Edit(sh_info_field(elf, section), data, what, regions.SECTION_HEADERS)


def relocation_edits(elf: ElfFile, tables: list[RelocationTable], reordering: Reordering,
                     kind: str = regions.DYNAMIC_RELOCATIONS) -> list[Edit]:
    """Renumber the symbol index of every relocation whose symbol moved.

    ``kind``: the tables' kind of region, dynamic or .symtab's relocations.
    """
    if not reordering.moved:
        return []
    mapping = reordering.mapping()
    edits = []
    for table in tables:
        symbols = table.symbol_indices
        renumbered = _renumbered_symbols(elf, table, mapping, reordering)
        if renumbered != symbols:
            edits.append(Edit(table.offset, _with_symbols(elf, table, renumbered),
                              f"{table.name} symbol indices", kind))
    return edits


def _renumbered_symbols(elf: ElfFile, table: RelocationTable, mapping: array[int],
                        reordering: Reordering, block: int = 4096) -> array[int]:
    """The table's symbol indices mapped to their new values.

    Relative relocations (symbol 0) make up most of a large library's table
    and sit together, so most blocks hold no moved symbol and are copied in C.
    """
    symbols, lowest = table.symbol_indices, reordering.first_global
    renumbered = array("I")
    for start in range(0, len(symbols), block):
        part = symbols[start : start + block]
        highest = max(part)
        if highest >= reordering.count:
            entry = start + part.index(highest)
            raise elf.corrupt(f"{table.name} entry {entry} refers to symbol {highest}, past "
                              f"the end of .dynsym ({reordering.count} entries)")
        renumbered.extend(part if highest < lowest else [mapping[s] for s in part])
    return renumbered


def _with_symbols(elf: ElfFile, table: RelocationTable, symbols: array[int]) -> bytearray:
    """The table's bytes with each r_info carrying the given symbol index."""
    little = elf.header.little_endian
    if elf.word_size == 8:  # the index is a 32-bit half of r_info: write just that half
        field, packed = table.info_half_offset(upper=True), pack_column(symbols, little)
    else:
        field = 4
        infos = array("I", [(symbol << 8) | (info & 0xFF)
                            for symbol, info in zip(symbols, table.infos, strict=True)])
        packed = pack_column(infos, little)
    data = bytearray(table.raw)
    for byte in range(4):
        data[field + byte :: table.entsize] = packed[byte::4]
    return data


def versym_edit(elf: ElfFile, offset: int, reordering: Reordering) -> Edit:
    """Permute .gnu.version; a symbol made local gets VER_NDX_LOCAL."""
    entries = bytearray(elf.bytes_at(offset, 2 * reordering.count, ".gnu.version"))
    for index in reordering.moved:
        entries[2 * index : 2 * index + 2] = bytes(2)  # VER_NDX_LOCAL is 0 in either order
    return Edit(offset, reordered_entries(entries, 2, reordering), ".gnu.version",
                regions.VERSYM)


def gnu_hash_edits(elf: ElfFile, table: GnuHashTable, reordering: Reordering,
                   name_of: Callable[[int], bytes]) -> list[Edit]:
    """Drop the moved symbols from the hashed tail: symoffset, buckets, chains, Bloom filter.

    Only what their removal changes is recomputed: the chains lose their
    entries (a neighbour inherits an end bit), a bucket that started with
    one starts with the next, and the Bloom filter words they set are
    rebuilt from the symbols left (a filter keeping their bits would still
    be correct, a superset, but eu-elflint demands the exact one).
    """
    symoffset = table.symoffset
    removed = [i - symoffset for i in reordering.moved if i >= symoffset]
    if not removed:  # only unhashed symbols moved: the hashed ones keep their indices
        return []
    little = elf.header.little_endian
    count = reordering.count
    chains = read_gnu_chains(elf, table, count)
    runs = _GnuRuns.read(elf, table, chains)
    gone = set(removed)
    new_symoffset = symoffset + len(removed)
    new_chains = _chains_without(chains, removed, gone, runs)
    new_chains.extend([0] * len(removed))  # the table keeps its size; its tail is unused now
    mapping = reordering.mapping()
    new_buckets = array("I", [mapping[start] if start else 0 for start in table.buckets])
    for position in removed:
        if runs.start_of(position) == position:  # a bucket started with it
            successor = runs.next_kept(position, gone)
            new_buckets[runs.bucket_at(position)] = \
                0 if successor is None else mapping[symoffset + successor]
    bloom = _bloom_without(elf, table, chains, runs, removed, gone, name_of)
    return [
        Edit(table.offset + 4, new_symoffset.to_bytes(4, "little" if little else "big"),
             ".gnu.hash symoffset", regions.GNU_HASH),
        Edit(table.offset + 16, _packed_words(table, bloom, little), ".gnu.hash Bloom filter",
             regions.GNU_HASH),
        Edit(table.buckets_offset, pack_column(new_buckets, little), ".gnu.hash buckets",
             regions.GNU_HASH),
        Edit(table.chains_offset, pack_column(new_chains, little), ".gnu.hash chains",
             regions.GNU_HASH),
    ]


@dataclass(frozen=True)
class _GnuRuns:
    """The hashed symbols cut into their buckets' runs (positions counted from symoffset).

    A bucket's symbols run from the position it holds to the first chain
    entry with the end bit set; runs follow one another without gaps.
    """

    starts: list[int]  # sorted
    buckets: list[int]  # the bucket of each run
    length: int  # number of hashed symbols

    @classmethod
    def read(cls, elf: ElfFile, table: GnuHashTable, chains: array[int]) -> _GnuRuns:
        symoffset, length = table.symoffset, len(chains)
        buckets = [bucket for bucket, start in enumerate(table.buckets) if start]
        buckets.sort(key=table.buckets.__getitem__)  # linear: linkers lay buckets out in order
        starts = [table.buckets[bucket] - symoffset for bucket in buckets]
        if length and (not starts or starts[0] != 0 or starts[-1] >= length):
            raise elf.corrupt(f".gnu.hash buckets do not cover the hashed symbols "
                              f"{symoffset}..{symoffset + length - 1}")
        if not _ends_exactly_before(chains, [*starts[1:], length]):
            raise elf.corrupt(".gnu.hash chains do not end where the next bucket starts")
        return cls(starts, buckets, length)

    def _run(self, position: int) -> int:
        return bisect_right(self.starts, position) - 1

    def start_of(self, position: int) -> int:
        return self.starts[self._run(position)]

    def end_of(self, position: int) -> int:
        run = self._run(position)
        return self.starts[run + 1] - 1 if run + 1 < len(self.starts) else self.length - 1

    def bucket_at(self, position: int) -> int:
        return self.buckets[self._run(position)]

    def previous_kept(self, position: int, gone: set[int]) -> int | None:
        """The nearest symbol before ``position`` in its bucket that stays hashed."""
        start, candidate = self.start_of(position), position - 1
        while candidate >= start and candidate in gone:
            candidate -= 1
        return candidate if candidate >= start else None

    def next_kept(self, position: int, gone: set[int]) -> int | None:
        end, candidate = self.end_of(position), position + 1
        while candidate <= end and candidate in gone:
            candidate += 1
        return candidate if candidate <= end else None


def _ends_exactly_before(chains: array[int], stops: list[int]) -> bool:
    """Whether the chain entries with the end bit set are exactly those before ``stops``.

    Counting the end bits and checking each expected one is done without a
    Python step per symbol.
    """
    ends = gnu_chain_end_flags(chains)
    return ends.count(1) == len(stops) and all(ends[stop - 1] for stop in stops)


def _chains_without(chains: array[int], removed: list[int], gone: set[int],
                    runs: _GnuRuns) -> array[int]:
    """The chain entries of the symbols that stay, with their buckets' end bits in place."""
    kept = array("I")
    previous = 0
    for position in removed:
        kept.extend(chains[previous:position])
        previous = position + 1
    kept.extend(chains[previous:])
    for position in removed:
        if chains[position] & 1:  # it ended its bucket: the last one left ends it now
            heir = runs.previous_kept(position, gone)
            if heir is not None:
                kept[heir - bisect_left(removed, heir)] |= 1
    return kept


def _bloom_without(elf: ElfFile, table: GnuHashTable, chains: array[int], runs: _GnuRuns,
                   removed: list[int], gone: set[int],
                   name_of: Callable[[int], bytes]) -> list[int]:
    """The Bloom filter with the words the removed symbols set rebuilt from those left.

    A symbol's word is its hash divided by the word's bit count, which the
    chain entry gives whatever its lowest bit; the bits need the whole hash.
    """
    stored = column(elf.bytes_at(table.offset + 16, table.bloom_size * table.word_size,
                                 ".gnu.hash Bloom filter"),
                    table.word_size, 0, table.word_size, elf.header.little_endian)
    bits, size = 8 * table.word_size, table.bloom_size
    if size == 0:
        return []
    touched = {(chains[position] // bits) % size for position in removed}
    neighbours = [position for position, value in enumerate(chains)
                  if (value // bits) % size in touched and position not in gone]
    hashes = [_full_gnu_hash(table, chains, runs, position, name_of) for position in neighbours]
    rebuilt = table.bloom_words(hashes)
    return [rebuilt[word] if word in touched else value for word, value in enumerate(stored)]


def _full_gnu_hash(table: GnuHashTable, chains: array[int], runs: _GnuRuns, position: int,
                   name_of: Callable[[int], bytes]) -> int:
    """The symbol's hash: the chain keeps all but bit 0, which the bucket decides.

    h and h + 1 fall in different buckets whenever there are two or more,
    so the name needs hashing only for a single-bucket table.
    """
    if table.nbuckets < 2:
        return gnu_hash(name_of(table.symoffset + position))
    even = chains[position] & ~1
    return even if even % table.nbuckets == runs.bucket_at(position) else even | 1


def _packed_words(table: GnuHashTable, words: list[int], little: bool) -> bytes:
    return pack_column(array("I" if table.word_size == 4 else "Q", words), little)


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
        Edit(table.buckets_offset, pack_column(buckets, little), ".hash buckets",
             regions.SYSV_HASH),
        Edit(table.chains_offset, pack_column(chains, little), ".hash chains",
             regions.SYSV_HASH),
    ]


def symtab_shndx_edit(elf: ElfFile, offset: int, reordering: Reordering) -> Edit:
    """Permute the extended section index table that parallels .symtab."""
    entries = elf.bytes_at(offset, 4 * reordering.count, ".symtab_shndx")
    return Edit(offset, reordered_entries(entries, 4, reordering), ".symtab_shndx",
                regions.SYMTAB_SHNDX)
