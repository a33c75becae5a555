"""Re-reading a patched file before it replaces anything.

The checks compare the output with the input and share no code with the
edits: from the plan alone they derive where each symbol must now be (the
symbols made LOCAL right after the old locals, in their order, everything
else in its old order), then check that every table follows: the symbol
entries themselves, the relocations' symbol indices, .gnu.version, and the
GNU and System V hash tables (each exported symbol still found under its
hash, and no LOCAL one).  A writer that skips or botches any of these steps
is caught here, before the rename.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path

from elfpatch.elf import constants as C
from elfpatch.elf.columns import column
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import (
    GnuHashTable,
    SysvHashTable,
    dynamic_symbol_count,
    gnu_hash,
    read_gnu_hash,
    read_sysv_hash,
)
from elfpatch.elf.relocations import (
    RelocationTable,
    dynamic_relocation_tables,
    static_relocation_tables,
)
from elfpatch.elf.symbols import (
    DYNSYM,
    SYMTAB,
    SymbolTable,
    read_dynsym,
    read_symtab,
    versym_offset,
)
from elfpatch.errors import ElfpatchError
from elfpatch.patch.plan import TARGET_GLOBAL, TARGET_LOCAL, TARGET_WEAK_HIDDEN, LibraryPlan

_EXPECTED = {
    TARGET_LOCAL: (C.STB_LOCAL, None),
    TARGET_WEAK_HIDDEN: (C.STB_WEAK, C.STV_HIDDEN),
    TARGET_GLOBAL: (C.STB_GLOBAL, C.STV_DEFAULT),
}

# Any st_info byte with binding LOCAL (upper nibble 0).
_LOCAL_INFO = re.compile(rb"[\x00-\x0f]")


class VerificationError(ElfpatchError):
    """The patched copy failed a check; the original was left untouched."""


def verify_output(original: ElfFile, output_path: Path, plan: LibraryPlan) -> None:
    label = original.name
    try:
        with ElfFile.open(output_path) as patched:
            _verify(original, patched, plan)
    except VerificationError:
        raise
    except ElfpatchError as error:
        raise VerificationError(label, f"patched copy does not parse: {error.reason}; "
                                "original left untouched") from None


def _fail(original: ElfFile, reason: str) -> VerificationError:
    return VerificationError(original.name, f"verification of the patched copy failed: {reason}; "
                             "original left untouched")


@dataclass(frozen=True)
class _Layout:
    """Where each entry of one symbol table must be after the fix.

    The old locals stay; the symbols made LOCAL (``moved``, sorted) follow
    them in their old order; every other symbol keeps its order behind them.
    """

    count: int
    first_global: int
    moved: tuple[int, ...]

    def runs(self) -> list[tuple[int, int, int]]:
        """(new start, old start, length) of each stretch of entries that moves as one."""
        first, moved = self.first_global, self.moved
        runs = [(0, 0, first)] if first else []
        runs += [(first + k, old, 1) for k, old in enumerate(moved)]
        new, previous = first + len(moved), first
        for stop in (*moved, self.count):
            if stop > previous:
                runs.append((new, previous, stop - previous))
                new += stop - previous
            previous = stop + 1
        return runs

    def new_index(self, old: int) -> int:
        if old < self.first_global or not self.moved:
            return old
        k = bisect_right(self.moved, old)
        if k and self.moved[k - 1] == old:
            return self.first_global + k - 1
        return old + len(self.moved) - k

    @cached_property
    def old_of_new(self) -> array:
        table = array("I", bytes(4 * self.count))
        for new, old, length in self.runs():
            table[new : new + length] = array("I", range(old, old + length))
        return table

    @cached_property
    def new_of_old(self) -> array:
        table = array("I", bytes(4 * self.count))
        for new, old, length in self.runs():
            table[old : old + length] = array("I", range(new, new + length))
        return table


def _first_global(table: SymbolTable) -> int:
    if table.first_global is not None:
        return table.first_global
    match = re.compile(rb"[^\x00-\x0f]").search(table.infos, 1)
    return match.start() if match else table.count


def _verify(original: ElfFile, patched: ElfFile, plan: LibraryPlan) -> None:
    if patched.size != original.size:
        raise _fail(original, "file size changed")
    wanted: dict[str, dict[int, str]] = defaultdict(dict)
    for change in plan.changes:
        wanted[change.table][change.index] = change.target
    for kind, read in ((DYNSYM, read_dynsym), (SYMTAB, read_symtab)):
        old, new = read(original), read(patched)
        if old is None or new is None:
            if old is not new or wanted.get(kind):
                raise _fail(original, f"{kind} is missing")
            continue
        targets = wanted.get(kind, {})
        layout = _layout(original, old, new, targets)
        _verify_none_left(original, old, new, targets)
        _verify_entries(original, old, new, layout, targets)
        _verify_bindings(original, new, layout, targets)
        _verify_locals_first(original, new)
        if kind == DYNSYM:
            _verify_dynamic_tables(original, patched, old, new, layout)
        elif layout.moved:
            _verify_relocations(original, patched, layout, static_relocation_tables)


def _layout(original: ElfFile, old: SymbolTable, new: SymbolTable,
            targets: dict[int, str]) -> _Layout:
    if new.count != old.count:
        raise _fail(original, f"{old.kind} has {new.count} entries instead of {old.count}")
    moved = tuple(sorted(i for i, target in targets.items() if target == TARGET_LOCAL))
    return _Layout(old.count, _first_global(old), moved)


def _verify_none_left(original: ElfFile, old: SymbolTable, new: SymbolTable,
                      targets: dict[int, str]) -> None:
    """No planned symbol (known by its name's string-table offset) is UNIQUE anywhere."""
    planned = {old.name_offsets[index] for index in targets}
    for index in new.unique_indices():
        if new.name_offsets[index] in planned:
            raise _fail(original, f"{new.name(index)} is still UNIQUE in {new.kind}")


def _verify_entries(original: ElfFile, old: SymbolTable, new: SymbolTable, layout: _Layout,
                    targets: dict[int, str]) -> None:
    """Every entry is where the layout puts it, unchanged but for planned st_info/st_other."""
    size, info_at, other_at = old.entsize, old.field_offset("info"), old.field_offset("other")
    before, after = bytearray(old.raw), bytearray(new.raw)
    for index in targets:
        for data, at in ((before, index), (after, layout.new_index(index))):
            data[at * size + info_at] = data[at * size + other_at] = 0
    for new_start, old_start, length in layout.runs():
        if after[new_start * size : (new_start + length) * size] != \
                before[old_start * size : (old_start + length) * size]:
            raise _fail(original, f"{old.kind} entries {old_start}..{old_start + length - 1} "
                        "did not arrive unchanged where they belong")
    for index in targets:
        if new.infos[layout.new_index(index)] & 0xF != old.infos[index] & 0xF:
            raise _fail(original, f"{old.kind} symbol {index} changed type")


def _verify_bindings(original: ElfFile, table: SymbolTable, layout: _Layout,
                     targets: dict[int, str]) -> None:
    """Each planned symbol has its new binding and visibility."""
    infos, others = table.infos, table.others
    for old_index, target in targets.items():
        index = layout.new_index(old_index)
        binding, visibility = _EXPECTED[target]
        if infos[index] >> 4 != binding or visibility not in (None, others[index] & 0x3):
            raise _fail(original, f"{table.name(index)} lacks its planned binding in "
                        f"{table.kind}")


def _verify_locals_first(original: ElfFile, table: SymbolTable) -> None:
    first = table.first_global
    if first is None:
        return
    infos = table.infos
    if re.search(rb"[^\x00-\x0f]", infos[1:first]) or _LOCAL_INFO.search(infos, first):
        raise _fail(original, f"{table.kind} locals do not all precede sh_info ({first})")


def _verify_dynamic_tables(original: ElfFile, patched: ElfFile, old: SymbolTable,
                           new: SymbolTable, layout: _Layout) -> None:
    if layout.moved:
        _verify_relocations(original, patched, layout)
        _verify_versions(original, patched, layout)
        _verify_gnu_hash(original, patched, old, layout)
        _verify_sysv_hash(original, patched, layout)
    else:  # no symbol moved: every table that holds symbol indices is as it was
        for offset, size, what in _index_tables(original, layout.count):
            if patched.bytes_at(offset, size, what) != original.bytes_at(offset, size, what):
                raise _fail(original, f"{what} changed although no symbol moved")
    _verify_hash_sizes(original, patched, new)


def _index_tables(elf: ElfFile, count: int) -> list[tuple[int, int, str]]:
    """(offset, size, name) of the relocation, version and hash tables of .dynsym."""
    found = [(t.offset, t.count * t.entsize, t.name) for t in dynamic_relocation_tables(elf)]
    versym = versym_offset(elf)
    if versym is not None:
        found.append((versym, 2 * count, ".gnu.version"))
    gnu = read_gnu_hash(elf)
    if gnu is not None:
        found.append((gnu.offset, gnu.chains_offset - gnu.offset + 4 * (count - gnu.symoffset),
                      ".gnu.hash"))
    sysv = read_sysv_hash(elf)
    if sysv is not None:
        found.append((sysv.offset, (2 + sysv.nbucket + sysv.nchain) * sysv.entry_size, ".hash"))
    return found


def _verify_relocations(original: ElfFile, patched: ElfFile, layout: _Layout,
                        tables: Callable[[ElfFile], list[RelocationTable]] =
                        dynamic_relocation_tables) -> None:
    """Every relocation keeps its place and type and still points at its own symbol."""
    for old, new in zip(tables(original), tables(patched), strict=True):
        if old.offsets != new.offsets:
            raise _fail(original, f"{old.name} offsets changed")
        if old.infos and max(old.infos) >> old.symbol_shift >= layout.count:
            raise _fail(original, f"{old.name} refers past the end of its symbol table")
        if not _renumbered(old.infos, new.infos, old.symbol_shift, layout):
            raise _fail(original, f"{old.name}: a relocation no longer names its symbol")


def _renumbered(old: array, new: array, shift: int, layout: _Layout,
                block: int = 4096) -> bool:
    """Whether each r_info of ``new`` is that of ``old`` with the symbol renumbered.

    Most relocations name no symbol or one before the first global (relative
    ones): a block of those must be unchanged, which is checked at C speed.
    """
    mapping, low, first = layout.new_of_old, (1 << shift) - 1, layout.first_global
    for start in range(0, len(old), block):
        before, after = old[start : start + block], new[start : start + block]
        if max(before) >> shift < first:
            if before != after:
                return False
            continue
        if [(mapping[i >> shift] << shift) | (i & low) for i in before] != after.tolist():
            return False
    return True


def _verify_versions(original: ElfFile, patched: ElfFile, layout: _Layout) -> None:
    """.gnu.version follows its symbols; a symbol made LOCAL has VER_NDX_LOCAL."""
    offset = versym_offset(original)
    if offset is None:
        return
    little = original.header.little_endian
    size = 2 * layout.count
    old = column(original.bytes_at(offset, size, ".gnu.version"), 2, 0, 2, little)
    new = column(patched.bytes_at(offset, size, ".gnu.version"), 2, 0, 2, little)
    expected = array("H")
    moved = set(layout.moved)
    for _new_start, old_start, length in layout.runs():
        if old_start in moved:
            expected.append(C.VER_NDX_LOCAL)
        else:
            expected.extend(old[old_start : old_start + length])
    if new != expected:
        index = next(i for i, (a, b) in enumerate(zip(new, expected, strict=True)) if a != b)
        raise _fail(original, f".gnu.version entry {index} is {new[index]}, expected "
                    f"{expected[index]}")


def _verify_gnu_hash(original: ElfFile, patched: ElfFile, old_table: SymbolTable,
                     layout: _Layout) -> None:
    """The hashed symbols are the old ones minus those made LOCAL, each under its own hash.

    The hash of each symbol comes from the original table (its chain keeps
    all bits but the lowest, which its bucket decides), or from its name when
    a single bucket leaves that bit open.  Then every bucket of the new table
    must list exactly its symbols, and the Bloom filter must be exactly theirs.
    """
    old, new = read_gnu_hash(original), read_gnu_hash(patched)
    if old is None or new is None:
        if old is not new:
            raise _fail(original, ".gnu.hash disappeared")
        return
    if (new.nbuckets, new.bloom_size, new.bloom_shift, new.offset) != \
            (old.nbuckets, old.bloom_size, old.bloom_shift, old.offset):
        raise _fail(original, ".gnu.hash header changed")
    symoffset, count, nbuckets = old.symoffset, layout.count, new.nbuckets
    hashes = _gnu_hashes(original, old, old_table, count)
    unhashed = bisect_left(layout.moved, symoffset)  # moved symbols that were not hashed
    if new.symoffset != symoffset + len(layout.moved) - unhashed:
        raise _fail(original, ".gnu.hash does not cover exactly the exported symbols")
    kept = layout.old_of_new[new.symoffset :]  # the hashed symbols, in their new order
    kept_hashes = [hashes[i - symoffset] for i in kept]
    buckets = [h % nbuckets for h in kept_hashes]
    last = [a != b for a, b in pairwise(buckets)] + [True] if buckets else []
    expected_chains = [(h & ~1) | end for h, end in zip(kept_hashes, last, strict=True)]
    chains = _gnu_chains(patched, new, count)
    if list(chains) != expected_chains:
        wrong = next(i for i, (a, b) in enumerate(zip(chains, expected_chains, strict=False))
                     if a != b)
        raise _fail(original, f".gnu.hash chain of symbol {new.symoffset + wrong} is wrong")
    expected_starts = [0] * nbuckets
    first = [True, *last[:-1]] if buckets else []
    for position in (p for p, begins in enumerate(first) if begins):
        bucket = buckets[position]
        if expected_starts[bucket]:
            raise _fail(original, f".gnu.hash bucket {bucket} is split")
        expected_starts[bucket] = new.symoffset + position
    if list(new.buckets) != expected_starts:
        raise _fail(original, ".gnu.hash buckets do not start their symbols")
    stored = column(patched.bytes_at(new.offset + 16, new.bloom_size * new.word_size,
                                     ".gnu.hash Bloom filter"),
                    new.word_size, 0, new.word_size, patched.header.little_endian)
    if list(stored) != new.bloom_words(kept_hashes):
        raise _fail(original, ".gnu.hash Bloom filter does not match its symbols")


def _gnu_chains(elf: ElfFile, table: GnuHashTable, count: int) -> array:
    return column(elf.bytes_at(table.chains_offset, 4 * (count - table.symoffset),
                               ".gnu.hash chains"), 4, 0, 4, elf.header.little_endian)


def _gnu_hashes(elf: ElfFile, table: GnuHashTable, symbols: SymbolTable, count: int) -> list[int]:
    """The full hash of each symbol from symoffset on, read from the original table.

    A bucket's symbols run from its start to the next bucket's start; each
    chain value is the hash with its lowest bit replaced, and of h and h | 1
    only one falls in the bucket (with two buckets or more).
    """
    symoffset = table.symoffset
    if table.nbuckets < 2:
        return [gnu_hash(symbols.name_bytes(i)) for i in range(symoffset, count)]
    starts = sorted((start, bucket) for bucket, start in enumerate(table.buckets) if start)
    bucket_of = [0] * (count - symoffset)
    for (start, bucket), (stop, _next) in pairwise([*starts, (count, -1)]):
        if not symoffset <= start < count:
            raise _fail(elf, f".gnu.hash bucket {bucket} starts outside .dynsym")
        bucket_of[start - symoffset : stop - symoffset] = [bucket] * (stop - start)
    nbuckets = table.nbuckets
    evens = [value & ~1 for value in _gnu_chains(elf, table, count)]
    return [h | (h % nbuckets != bucket) for h, bucket in zip(evens, bucket_of, strict=True)]


def _verify_sysv_hash(original: ElfFile, patched: ElfFile, layout: _Layout) -> None:
    """Each bucket reaches the same symbols as before, minus those made LOCAL."""
    old, new = read_sysv_hash(original), read_sysv_hash(patched)
    if old is None or new is None:
        if old is not new:
            raise _fail(original, ".hash disappeared")
        return
    if (new.nbucket, new.nchain) != (old.nbucket, old.nchain):
        raise _fail(original, ".hash header changed")
    moved, mapping = set(layout.moved), layout.new_of_old
    for bucket in range(old.nbucket):
        before = {mapping[i] for i in _sysv_chain(original, old, bucket) if i not in moved}
        if set(_sysv_chain(original, new, bucket)) != before:
            raise _fail(original, f".hash bucket {bucket} no longer leads to its symbols")


def _sysv_chain(elf: ElfFile, table: SysvHashTable, bucket: int) -> list[int]:
    found: list[int] = []
    index = table.buckets[bucket]
    while index:
        if index >= table.nchain or len(found) > table.nchain:
            raise _fail(elf, f".hash chain of bucket {bucket} is broken")
        found.append(index)
        index = table.chains[index]
    return found


def _verify_hash_sizes(original: ElfFile, patched: ElfFile, table: SymbolTable) -> None:
    count = dynamic_symbol_count(patched)
    gnu, sysv = read_gnu_hash(patched), read_sysv_hash(patched)
    if (gnu is not None or sysv is not None) and count != table.count:
        raise _fail(original, f"hash table implies {count} dynamic symbols, .dynsym has "
                    f"{table.count}")
    if gnu is not None and sysv is not None:
        from elfpatch.elf.hashes import gnu_hash_symbol_count

        if gnu_hash_symbol_count(patched, gnu) != table.count:
            raise _fail(original, ".gnu.hash does not cover .dynsym")
