"""Re-reading a patched file before it replaces anything.

The checks compare the output with the input and share no code with the
edits: from the plan alone they derive where each symbol must now be (the
symbols made LOCAL right after the old locals, in their order, everything
else in its old order), then check that every table follows: the symbol
entries themselves, the relocations' symbol indices, .gnu.version, and the
GNU and System V hash tables (each exported symbol still found under its
hash, and no LOCAL one).  Every byte outside the tables the plan may
change (worked out from the plan and the file's map of regions, not from
the edits) must be the original's.  A writer that skips or botches any of
these steps, or writes anywhere else, is caught here, before the rename.
"""

from __future__ import annotations

import mmap
import os
import sys
from array import array
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from pathlib import Path

from elfpatch.base.alongside import Alongside, in_turn
from elfpatch.elf import constants as C
from elfpatch.elf.columns import column
from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import (
    GnuHashTable,
    SysvHashTable,
    gnu_chain_end_flags,
    gnu_hash,
    gnu_hash_symbol_count,
    read_gnu_chains,
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
from elfpatch.errors import CorruptElfError, ElfpatchError
from elfpatch.patch import regions
from elfpatch.patch.regions import RegionMap, Spans
from elfpatch.patch.reorder import sh_info_field
from elfpatch.plan.bindings import (
    LOCAL_TARGETS,
    BindingTarget,
    LibraryPlan,
)

# Below this size the two halves run in turn even where the caller could run them
# alongside: a fork costs more than the checks of a small file (2,000 small
# libraries spent most of their time forking).
_ALONGSIDE_MINIMUM = 16 << 20

_EXPECTED = {
    BindingTarget.LOCAL: (C.STB_LOCAL, None),
    BindingTarget.LOCAL_HIDDEN: (C.STB_LOCAL, C.STV_HIDDEN),
    BindingTarget.WEAK_HIDDEN: (C.STB_WEAK, C.STV_HIDDEN),
    BindingTarget.GLOBAL: (C.STB_GLOBAL, C.STV_DEFAULT),
}


class VerificationError(ElfpatchError):
    """The patched copy failed a check; the original was left untouched."""


def verify_output(original: ElfFile, output_path: Path, plan: LibraryPlan,
                  alongside: Alongside = in_turn) -> None:
    """Raise unless the file at ``output_path`` is ``original`` with ``plan`` applied.

    ``alongside`` runs the checks' two halves (the service forks one for big files).

    A check that fails is run again on the input against itself (an empty
    plan): if the input fails it too, the fault was the input's, and that is
    what the error says.
    """
    failure = _failure(original, output_path, plan, alongside)
    if failure is None:
        return
    _blame_the_input(original)
    if isinstance(failure, VerificationError) or failure.path == original.name:
        raise failure  # a failed check, or the input found corrupt while checking
    raise VerificationError(original.name, f"patched copy does not parse: {failure.reason}; "
                            "original left untouched")


def _failure(original: ElfFile, path: Path, plan: LibraryPlan,
             alongside: Alongside) -> ElfpatchError | None:
    patched = ElfFile.open(path)
    try:
        _verify(original, patched, plan, alongside)
    except ElfpatchError as error:
        return error.with_traceback(None)  # its frames hold views of the mapping closed below
    finally:
        _close(patched)
    return None


def _close(elf: ElfFile) -> None:
    with suppress(BufferError):  # views still held by an error on its way up free the mapping
        elf.close()


def _blame_the_input(original: ElfFile) -> None:
    """Raise ``CorruptElfError`` if the input fails the checks with nothing changed."""
    try:
        _verify(original, original, LibraryPlan(original.name, (), ()), in_turn)
    except VerificationError as error:
        detail = error.reason.removeprefix(_FAILED).removesuffix(_UNTOUCHED)
        raise CorruptElfError(original.name, f"{detail}, in the input itself; nothing "
                              "written") from None
    except ElfpatchError as error:
        raise error.with_traceback(None) from None


_FAILED, _UNTOUCHED = "verification of the patched copy failed: ", "; original left untouched"


def _fail(original: ElfFile, reason: str) -> VerificationError:
    return VerificationError(original.name, f"{_FAILED}{reason}{_UNTOUCHED}")


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
    def old_of_new(self) -> array[int]:
        table = array("I", bytes(4 * self.count))
        for new, old, length in self.runs():
            table[new : new + length] = array("I", range(old, old + length))
        return table

    @cached_property
    def new_of_old(self) -> array[int]:
        table = array("I", bytes(4 * self.count))
        for new, old, length in self.runs():
            table[old : old + length] = array("I", range(new, new + length))
        return table


def _first_global(table: SymbolTable) -> int:
    if table.first_global is not None:
        return table.first_global
    found = table.first_nonlocal(1)
    return found if found is not None else table.count


@dataclass(frozen=True)
class _TablePair:
    """One symbol table before and after, the symbols planned in it, and their layout."""

    old: SymbolTable
    new: SymbolTable
    targets: dict[int, BindingTarget]
    layout: _Layout


def _verify(original: ElfFile, patched: ElfFile, plan: LibraryPlan,
            alongside: Alongside) -> None:
    """All checks, in two halves that ``alongside`` may run side by side.

    .dynsym with its version and hash tables on one side; .symtab and every
    relocation table on the other: about even on a library like libtorch.
    """
    if patched.size != original.size:
        raise _fail(original, "file size changed")
    wanted: dict[str, dict[int, BindingTarget]] = defaultdict(dict)
    for change in plan.changes:
        wanted[change.table][change.index] = change.target
    dynsym = _pair(original, patched, DYNSYM, read_dynsym, wanted)
    symtab = _pair(original, patched, SYMTAB, read_symtab, wanted)
    # The rest of the file, every byte outside the tables the plan rewrites, in two shares.
    rest = _Unchanged.of(original, patched, [dynsym, symtab])

    def dynamic_half() -> None:
        if dynsym is not None:
            _verify_symbols(original, dynsym)
            _verify_dynamic_tables(original, patched, dynsym)
        rest.verify(0)

    def other_half() -> None:
        if dynsym is not None and dynsym.layout.moved:
            _verify_relocations(original, patched, dynsym.layout)
        if symtab is not None:
            _verify_symbols(original, symtab)
            if symtab.layout.moved:
                _verify_relocations(original, patched, symtab.layout, static_relocation_tables)
        rest.verify(1)

    run = alongside if original.size >= _ALONGSIDE_MINIMUM else in_turn
    run(dynamic_half, other_half)


def _pair(original: ElfFile, patched: ElfFile, kind: str,
          read: Callable[[ElfFile], SymbolTable | None],
          wanted: dict[str, dict[int, BindingTarget]]) -> _TablePair | None:
    old, new = read(original), read(patched)
    if old is None or new is None:
        if old is not new or wanted.get(kind):
            raise _fail(original, f"{kind} is missing")
        return None
    targets = wanted.get(kind, {})
    return _TablePair(old, new, targets, _layout(original, old, new, targets))


def _verify_symbols(original: ElfFile, pair: _TablePair) -> None:
    _verify_none_left(original, pair.old, pair.new, pair.targets)
    _verify_entries(original, pair.old, pair.new, pair.layout, pair.targets)
    _verify_locals_first(original, pair.new)


def _layout(original: ElfFile, old: SymbolTable, new: SymbolTable,
            targets: dict[int, BindingTarget]) -> _Layout:
    if new.count != old.count:
        raise _fail(original, f"{old.kind} has {new.count} entries instead of {old.count}")
    moved = tuple(sorted(i for i, target in targets.items() if target in LOCAL_TARGETS))
    return _Layout(old.count, _first_global(old), moved)


def _verify_none_left(original: ElfFile, old: SymbolTable, new: SymbolTable,
                      targets: dict[int, BindingTarget]) -> None:
    """No planned symbol (known by its name's string-table offset) is UNIQUE anywhere."""
    planned = {old.name_offsets[index] for index in targets}
    for index in new.unique_indices():
        if new.name_offsets[index] in planned:
            raise _fail(original, f"{new.name(index)} is still UNIQUE in {new.kind}")


def _verify_entries(original: ElfFile, old: SymbolTable, new: SymbolTable, layout: _Layout,
                    targets: dict[int, BindingTarget]) -> None:
    """The new table is, byte for byte, the old one laid out anew with the planned bindings.

    The expected table is built from the old entries and compared in one
    ``memcmp`` (a bytearray compared with a buffer); only a mismatch is
    then looked at entry by entry, to name it.
    """
    size, info_at, other_at = old.entsize, old.field_offset("info"), old.field_offset("other")
    before = old.raw
    expected = bytearray(len(before))
    for new_start, old_start, length in layout.runs():
        expected[new_start * size : (new_start + length) * size] = \
            before[old_start * size : (old_start + length) * size]
    for index, target in targets.items():
        at = layout.new_index(index) * size
        binding, visibility = _EXPECTED[target]
        expected[at + info_at] = C.st_info(binding, old.symbol_type(index))
        if visibility is not None:
            expected[at + other_at] = C.with_visibility(old.others[index], visibility)
    if expected != new.raw:
        raise _fail(original, _first_wrong_entry(old, new, expected, layout))


def _first_wrong_entry(old: SymbolTable, new: SymbolTable, expected: bytearray,
                       layout: _Layout) -> str:
    size, after = old.entsize, new.raw
    index = next(i for i in range(new.count)
                 if after[i * size : (i + 1) * size] != expected[i * size : (i + 1) * size])
    return (f"{old.kind} entry {index} (symbol {layout.old_of_new[index]} before) is not "
            "the old entry with its planned binding")


def _verify_locals_first(original: ElfFile, table: SymbolTable) -> None:
    first = table.first_global
    if first is None:
        return
    global_at = table.first_nonlocal(1)
    if (global_at is not None and global_at < first) or table.first_local(first) is not None:
        raise _fail(original, f"{table.kind} locals do not all precede sh_info ({first})")


def _verify_dynamic_tables(original: ElfFile, patched: ElfFile, dynsym: _TablePair) -> None:
    """Versions and hash tables (the relocations are checked in the other half).

    When no symbol moved they are not the plan's to change at all, which the
    comparison of every other byte covers.
    """
    layout = dynsym.layout
    if layout.moved:
        _verify_versions(original, patched, layout)
        _verify_gnu_hash(original, patched, dynsym.old, layout)
        _verify_sysv_hash(original, patched, layout)
    _verify_hash_sizes(original, patched, dynsym.new)


def _verify_relocations(original: ElfFile, patched: ElfFile, layout: _Layout,
                        tables: Callable[[ElfFile], list[RelocationTable]] =
                        dynamic_relocation_tables) -> None:
    """Each relocation table is the old one, byte for byte, but for renumbered symbols."""
    for old, new in zip(tables(original), tables(patched), strict=True):
        symbols = old.symbol_indices
        if symbols and max(symbols) >= layout.count:
            raise _fail(original, f"{old.name} refers past the end of its symbol table")
        if _expected_relocations(old, layout) != new.raw:
            raise _fail(original, f"{old.name}: a relocation no longer names its symbol, or "
                        "changed otherwise")


def _expected_relocations(table: RelocationTable, layout: _Layout) -> bytearray:
    """The table's bytes with every r_info's symbol index mapped to its new index."""
    mapping, little = layout.new_of_old, table.elf.header.little_endian
    expected = bytearray(table.raw)
    if table.elf.word_size == 8:
        field = table.info_half_offset(upper=True)
        values = array("I", [mapping[i] for i in table.symbol_indices])
    else:
        field = 4
        values = array("I", [(mapping[i >> 8] << 8) | (i & 0xFF) for i in table.infos])
    if little != (sys.byteorder == "little"):
        values.byteswap()
    packed = values.tobytes()
    for byte in range(4):
        expected[field + byte :: table.entsize] = packed[byte::4]
    return expected


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
    """The new table is the old one without the symbols made LOCAL, and nothing else changed.

    Worked out from the old table in its own terms: the symbols left keep
    their chain entries in order, a symbol ends its bucket when the next one
    left lies past an end bit of the old chains, a bucket starts at its first
    symbol left (or is empty), and the Bloom filter keeps every word but
    those the removed symbols set, which hold exactly the bits of the symbols
    left there.  Prefix counts make each of these one pass in C or one
    comprehension, not a walk per symbol.
    """
    old, new = read_gnu_hash(original), read_gnu_hash(patched)
    if old is None or new is None:
        if old is not new:
            raise _fail(original, ".gnu.hash disappeared")
        return
    if (new.nbuckets, new.bloom_size, new.bloom_shift, new.offset) != \
            (old.nbuckets, old.bloom_size, old.bloom_shift, old.offset):
        raise _fail(original, ".gnu.hash header changed")
    symoffset, count = old.symoffset, layout.count
    removed = [i - symoffset for i in layout.moved if i >= symoffset]
    if new.symoffset != symoffset + len(removed):
        raise _fail(original, ".gnu.hash does not cover exactly the exported symbols")
    shape = _OldGnuShape.of(original, old, count, removed)
    kept = [i - symoffset for i in layout.old_of_new[new.symoffset :]]  # in their new order
    if read_gnu_chains(patched, new, count)[: len(kept)] != shape.chains_left(kept):
        raise _fail(original, ".gnu.hash chains are not those of the symbols left")
    if new.buckets != shape.buckets_left(old, new.symoffset):
        raise _fail(original, ".gnu.hash buckets do not start their symbols")
    stored = column(patched.bytes_at(new.offset + 16, new.bloom_size * new.word_size,
                                     ".gnu.hash Bloom filter"),
                    new.word_size, 0, new.word_size, patched.header.little_endian)
    if stored != shape.bloom_left(original, old, kept, removed, old_table):
        raise _fail(original, ".gnu.hash Bloom filter does not match its symbols")


@dataclass(frozen=True)
class _OldGnuShape:
    """Prefix counts over the old hashed symbols (positions counted from symoffset).

    ``ends_before[p]``: end bits among positions < p; ``kept_before[p]``:
    symbols left among positions < p; ``end_positions``: where the end bits are.
    """

    chains: array[int]
    ends_before: list[int]
    kept_before: list[int]
    end_positions: list[int]

    @classmethod
    def of(cls, elf: ElfFile, table: GnuHashTable, count: int,
           removed: list[int]) -> _OldGnuShape:
        chains = read_gnu_chains(elf, table, count)
        end_flags = gnu_chain_end_flags(chains)
        kept_flags = bytearray(b"\x01") * len(chains)
        for position in removed:
            kept_flags[position] = 0
        return cls(chains, [0, *accumulate(end_flags)], [0, *accumulate(kept_flags)],
                   [p for p, flag in enumerate(end_flags) if flag])

    def chains_left(self, kept: list[int]) -> array[int]:
        chains, ends_before = self.chains, self.ends_before
        following = [*kept[1:], len(chains)] if kept else []
        return array("I", [(chains[p] & ~1) | (ends_before[q] > ends_before[p])
                           for p, q in zip(kept, following, strict=True)])

    def buckets_left(self, table: GnuHashTable, new_symoffset: int) -> array[int]:
        """Each bucket's new start: its first symbol left, if its old run has one."""
        symoffset, ends_before, kept_before = table.symoffset, self.ends_before, self.kept_before
        ends = self.end_positions
        firsts = [start - symoffset if start else -1 for start in table.buckets]
        # A run holds a symbol left when fewer are left before its start than after its end.
        return array("I", [
            new_symoffset + kept_before[first]
            if first >= 0 and kept_before[ends[ends_before[first]] + 1] > kept_before[first] else 0
            for first in firsts])

    def bloom_left(self, elf: ElfFile, table: GnuHashTable, kept: list[int],
                   removed: list[int], symbols: SymbolTable) -> array[int]:
        bits, size = 8 * table.word_size, table.bloom_size
        words = column(elf.bytes_at(table.offset + 16, size * table.word_size,
                                    ".gnu.hash Bloom filter"),
                       table.word_size, 0, table.word_size, elf.header.little_endian)
        if size == 0:
            return words
        chains = self.chains
        touched = {(chains[p] // bits) % size for p in removed}
        neighbours = [p for p in kept if (chains[p] // bits) % size in touched]
        rebuilt = table.bloom_words([self._hash(table, p, symbols) for p in neighbours])
        for word in touched:
            words[word] = rebuilt[word]
        return words

    def _hash(self, table: GnuHashTable, position: int, symbols: SymbolTable) -> int:
        """The whole hash: the chain entry's bits, the lowest one told by the bucket."""
        if table.nbuckets < 2:
            return gnu_hash(symbols.name_bytes(table.symoffset + position))
        even = self.chains[position] & ~1
        start = table.buckets[even % table.nbuckets] - table.symoffset
        same_run = 0 <= start <= position and \
            self.ends_before[start] == self.ends_before[position]
        return even if same_run else even | 1


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
        if set(_sysv_chain(original, new, bucket, patched=True)) != before:
            raise _fail(original, f".hash bucket {bucket} no longer leads to its symbols")


def _sysv_chain(original: ElfFile, table: SysvHashTable, bucket: int,
                patched: bool = False) -> list[int]:
    """The symbols of one bucket; a broken chain is the input's fault unless ``patched``."""
    found: list[int] = []
    index = table.buckets[bucket]
    while index:
        if index >= table.nchain or len(found) > table.nchain:
            reason = f".hash chain of bucket {bucket} is broken"
            raise _fail(original, reason) if patched else original.corrupt(reason)
        found.append(index)
        index = table.chains[index]
    return found


def _verify_hash_sizes(original: ElfFile, patched: ElfFile, table: SymbolTable) -> None:
    """Each hash table still spans .dynsym: DT_HASH's nchain, the GNU table's last chain.

    A GNU table that hashes nothing (every bucket empty, as GNU ld makes it
    for an executable that exports nothing) spans no symbol: it only must
    not claim more unhashed symbols than .dynsym has.
    """
    sysv = read_sysv_hash(patched)
    if sysv is not None and sysv.nchain != table.count:
        raise _fail(original, f".hash implies {sysv.nchain} dynamic symbols, .dynsym has "
                    f"{table.count}")
    gnu = read_gnu_hash(patched)
    if gnu is None:
        return
    implied = gnu_hash_symbol_count(patched, gnu)
    if implied is None and gnu.symoffset > table.count:
        raise _fail(original, f".gnu.hash symoffset {gnu.symoffset} is past the end of "
                    f".dynsym ({table.count} entries)")
    if implied is not None and implied != table.count:
        raise _fail(original, f".gnu.hash implies {implied} dynamic symbols, .dynsym has "
                    f"{table.count}")


# -- nothing else changed ------------------------------------------------------------

# The tables each symbol table's users occupy: what moving its symbols rewrites.
_USERS = {DYNSYM: (regions.VERSYM, regions.GNU_HASH, regions.SYSV_HASH,
                   regions.DYNAMIC_RELOCATIONS),
          SYMTAB: (regions.STATIC_RELOCATIONS, regions.SYMTAB_SHNDX)}
_CHUNK = 1 << 18  # large enough to make the per-slice cost nothing, small enough for the cache
_FAULT_AROUND = 1 << 16  # Linux's default fault_around_bytes


@dataclass(frozen=True)
class _Unchanged:
    """The ranges of the file the plan has no reason to change, cut in two even shares.

    Each share is compared with the original by the half of the checks that
    takes it: the patched file is read with ``preadv`` into one reused
    buffer (no mapping), compared with the original's view in one memcmp
    per slice, and the original's pages just compared are handed back to
    the kernel, so a 434 MB library costs a fraction of a second and no
    resident memory.
    """

    original: ElfFile
    patched: ElfFile
    area: RegionMap | None
    shares: tuple[tuple[tuple[int, int], ...], ...]

    @classmethod
    def of(cls, original: ElfFile, patched: ElfFile,
           pairs: list[_TablePair | None]) -> _Unchanged:
        if patched is original:  # the input checked against itself: nothing to compare
            return cls(original, patched, None, ((), ()))
        area = RegionMap.of(original)
        changeable = Spans.of(r for pair in pairs if pair is not None and pair.targets
                              for r in _changeable(original, area, pair))
        return cls(original, patched, area, _shares(changeable.gaps(original.size), 2))

    def verify(self, share: int) -> None:
        ranges = self.shares[share]
        if not ranges:
            return
        descriptor = os.open(self.patched.name, os.O_RDONLY)
        try:
            buffer = bytearray(_CHUNK)
            for start, end in ranges:
                self._compare(descriptor, start, end, buffer)
        finally:
            os.close(descriptor)

    def _compare(self, descriptor: int, start: int, end: int, buffer: bytearray) -> None:
        before = self.original.view
        for at in range(start, end, _CHUNK):
            stop = min(at + _CHUNK, end)
            piece = buffer if stop - at == _CHUNK else bytearray(stop - at)
            if os.preadv(descriptor, [piece], at) != stop - at or piece != before[at:stop]:
                raise _fail(self.original, self._first_change(at, stop))
            if stop - at == _CHUNK:
                _forget(self.original, at, stop)

    def _first_change(self, start: int, stop: int) -> str:
        old, new = bytes(self.original.view[start:stop]), bytes(self.patched.view[start:stop])
        offset = start + next((i for i, (a, b) in enumerate(zip(old, new, strict=True))
                               if a != b), 0)
        inside = self.area.named_at(offset) if self.area is not None else None
        return (f"byte {offset:#x}{f' (in {inside})' if inside else ''} changed, outside "
                "every table the plan rewrites")


def _shares(ranges: list[tuple[int, int]], count: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """``ranges`` cut into ``count`` runs of about the same number of bytes."""
    total = sum(end - start for start, end in ranges)
    shares: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    quota, share, filled = -(-total // count), 0, 0
    for start, end in ranges:
        while start < end:
            take = min(end - start, quota - filled) if share < count - 1 else end - start
            shares[share].append((start, start + take))
            start, filled = start + take, filled + take
            if filled >= quota and share < count - 1:
                share, filled = share + 1, 0
    return tuple(tuple(share) for share in shares)


def _forget(elf: ElfFile, start: int, stop: int) -> None:
    """Unmap pages of a mapped file once compared: they stay in the page cache, but
    are no longer counted against this process (a later read maps them again).

    A page fault maps the pages around it too, some before ``start`` that the
    previous slice already gave back: those go again.
    """
    mapping = elf.view.obj
    if isinstance(mapping, mmap.mmap):
        first = max(start - start % mmap.PAGESIZE - _FAULT_AROUND, 0)
        mapping.madvise(mmap.MADV_DONTNEED, first, stop - first)


def _changeable(elf: ElfFile, area: RegionMap, pair: _TablePair) -> list[tuple[int, int]]:
    """The byte ranges the plan of one symbol table may rewrite.

    Bindings alone: the planned entries.  Symbols moved: the whole table,
    its sh_info, and every table holding its indices (for .symtab also the
    signature symbol, sh_info, of each section group).
    """
    table = pair.old
    if not pair.layout.moved:
        return [(table.entry_offset(i), table.entry_offset(i + 1)) for i in pair.targets]
    found = [(start, end) for kind in (table.kind, *_USERS[table.kind])
             for start, end in area.owned(kind).ranges()]
    headers = [table.section] if table.section is not None else []
    if table.kind == SYMTAB and table.section is not None:
        headers += [s for s in elf.sections
                    if s.type == C.SHT_GROUP and s.link == table.section.index]
    found += [(field, field + 4) for field in (sh_info_field(elf, s) for s in headers)]
    return found

