"""The dynamic symbol hash tables: GNU (DT_GNU_HASH) and System V (DT_HASH).

Besides lookups they tell how many entries .dynsym has when the section
headers are gone: DT_HASH's nchain directly, DT_GNU_HASH by walking the
chain of the highest bucket to its end bit (when some bucket is not empty).
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocations import dynamic_relocation_tables


@dataclass(frozen=True)
class GnuHashTable:
    offset: int  # file offset of the table
    nbuckets: int
    symoffset: int
    bloom_size: int
    bloom_shift: int
    word_size: int  # size of one Bloom filter word (4 or 8)
    buckets: array[int]
    chains_offset: int  # file offset of chain[0] (the entry for symbol symoffset)

    @property
    def buckets_offset(self) -> int:
        return self.offset + 16 + self.bloom_size * self.word_size

    def bloom_words(self, hashes: list[int]) -> list[int]:
        """The Bloom filter this table's geometry gives for symbols of these hashes."""
        bits, size, shift = self.word_size * 8, self.bloom_size, self.bloom_shift
        words = [0] * size
        if size == 0:
            return words
        indices = [(h // bits) % size for h in hashes]
        masks = [(1 << (h % bits)) | (1 << ((h >> shift) % bits)) for h in hashes]
        for index, mask in zip(indices, masks, strict=True):
            words[index] |= mask
        return words


@dataclass(frozen=True)
class SysvHashTable:
    offset: int
    entry_size: int  # 4, or 8 on 64-bit s390 and alpha
    nbucket: int
    nchain: int
    buckets: array[int]
    chains: array[int]

    @property
    def buckets_offset(self) -> int:
        return self.offset + 2 * self.entry_size

    @property
    def chains_offset(self) -> int:
        return self.buckets_offset + self.nbucket * self.entry_size


def gnu_hash(name: bytes) -> int:
    h = 5381
    for byte in name:
        h = (h * 33 + byte) & 0xFFFFFFFF
    return h


def sysv_hash(name: bytes) -> int:
    h = 0
    for byte in name:
        h = (h << 4) + byte
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _table_offset(elf: ElfFile, tag: int, section_type: int) -> int | None:
    addr = elf.dynamic_value(tag)
    if addr is not None:
        return elf.vaddr_to_offset(addr, "DT_GNU_HASH" if tag == C.DT_GNU_HASH else "DT_HASH")
    sections = elf.sections_of_type(section_type)
    return sections[0].offset if sections else None


def read_gnu_hash(elf: ElfFile) -> GnuHashTable | None:
    offset = _table_offset(elf, C.DT_GNU_HASH, C.SHT_GNU_HASH)
    if offset is None:
        return None
    nbuckets, symoffset, bloom_size, bloom_shift = elf.unpack("IIII", offset, ".gnu.hash header")
    word = elf.word_size
    buckets_offset = offset + 16 + bloom_size * word
    buckets_view = elf.bytes_at(buckets_offset, 4 * nbuckets, ".gnu.hash buckets")
    buckets = column(buckets_view, 4, 0, 4, elf.header.little_endian)
    return GnuHashTable(offset, nbuckets, symoffset, bloom_size, bloom_shift, word, buckets,
                        buckets_offset + 4 * nbuckets)


def sysv_entry_size(elf: ElfFile) -> int:
    is_64bit_hash = elf.header.machine in (C.EM_S390, C.EM_ALPHA) and elf.header.elf_class == 64
    return 8 if is_64bit_hash else 4


def read_sysv_hash(elf: ElfFile) -> SysvHashTable | None:
    offset = _table_offset(elf, C.DT_HASH, C.SHT_HASH)
    if offset is None:
        return None
    size = sysv_entry_size(elf)
    fmt = "II" if size == 4 else "QQ"
    nbucket, nchain = elf.unpack(fmt, offset, ".hash header")
    body = elf.bytes_at(offset + 2 * size, (nbucket + nchain) * size, ".hash table")
    values = column(body, size, 0, size, elf.header.little_endian)
    return SysvHashTable(offset, size, nbucket, nchain, values[:nbucket], values[nbucket:])


def read_gnu_chains(elf: ElfFile, table: GnuHashTable, count: int) -> array[int]:
    """The chain entries of symbols symoffset..count-1 (``count``: .dynsym's size)."""
    return column(elf.bytes_at(table.chains_offset, 4 * (count - table.symoffset),
                               ".gnu.hash chains"), 4, 0, 4, elf.header.little_endian)


def gnu_chain_end_flags(chains: array[int]) -> bytes:
    """1 for each chain entry with the end bit set, else 0: one byte per entry, made in C.

    The end bit is the lowest bit of each entry's least significant byte.
    """
    low_bytes = chains.tobytes()[0 if sys.byteorder == "little" else 3 :: 4]
    return low_bytes.translate(_ODD_BYTE)


_ODD_BYTE = bytes(value & 1 for value in range(256))


def gnu_hash_symbol_count(elf: ElfFile, table: GnuHashTable) -> int | None:
    """Number of .dynsym entries implied by a GNU hash table; None when it hashes no symbol.

    The last symbol is the end of the chain of the highest bucket.  With
    every bucket empty the table names no symbol and so tells nothing of
    .dynsym's size: GNU ld then writes a fixed table whose symoffset is 1
    whatever .dynsym holds (an executable's undefined imports), lld writes
    .dynsym's size.  readelf likewise gives up on such a table.
    """
    last = max(table.buckets, default=0)
    if last == 0:
        return None
    if last < table.symoffset:
        raise elf.corrupt(f".gnu.hash bucket names symbol {last}, below its symoffset "
                          f"{table.symoffset}")
    index = last
    chain_fmt = "I"
    while True:
        (value,) = elf.unpack(chain_fmt, table.chains_offset + 4 * (index - table.symoffset),
                              ".gnu.hash chain")
        if value & 1:
            return index + 1
        index += 1


def dynamic_symbol_count(elf: ElfFile) -> int | None:
    """.dynsym's entry count from the hash tables (no section headers needed).

    DT_HASH's nchain is the count.  A GNU hash table gives it through its
    last chain, unless it hashes nothing (see ``gnu_hash_symbol_count``):
    then .dynsym's section tells, and without section headers the count is
    the smallest that holds every symbol something names, the relocations'
    symbols and the unhashed ones below symoffset; all of them are
    undefined imports, which is all such a table can have.
    """
    sysv = read_sysv_hash(elf)
    if sysv is not None:
        return sysv.nchain
    gnu = read_gnu_hash(elf)
    if gnu is None:
        return None
    count = gnu_hash_symbol_count(elf, gnu)
    return count if count is not None else _count_without_hashed_symbols(elf, gnu)


def _count_without_hashed_symbols(elf: ElfFile, table: GnuHashTable) -> int:
    sections = elf.sections_of_type(C.SHT_DYNSYM)
    if sections and sections[0].entsize:
        return sections[0].size // sections[0].entsize
    named = [max(t.symbol_indices) + 1 for t in dynamic_relocation_tables(elf) if t.count]
    return max([table.symoffset, 1, *named])


# -- extents, without trusting the tables -------------------------------------------

def gnu_hash_table_end(elf: ElfFile, offset: int, count: int) -> int | None:
    """Where the GNU hash table at ``offset`` ends: header, Bloom filter, buckets, and a
    chain entry per hashed symbol (none when every bucket is empty: see
    ``gnu_hash_symbol_count``); ``count``: .dynsym's size.  None when its header is not
    inside the file."""
    header = elf.unpack_if_inside("IIII", offset)
    if header is None:
        return None
    nbuckets, symoffset, bloom_size, _shift = header
    buckets = offset + 16 + bloom_size * elf.word_size
    end = buckets + 4 * nbuckets
    if end <= elf.size and bytes(elf.view[buckets:end]).strip(b"\0"):
        end += 4 * max(count - symoffset, 0)
    return end


def sysv_hash_table_end(elf: ElfFile, offset: int) -> int | None:
    """Where the System V hash table at ``offset`` ends; None when its header is not
    inside the file."""
    size = sysv_entry_size(elf)
    header = elf.unpack_if_inside("II" if size == 4 else "QQ", offset)
    if header is None:
        return None
    nbucket, nchain = header
    return offset + (2 + nbucket + nchain) * size
