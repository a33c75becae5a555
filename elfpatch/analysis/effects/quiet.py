"""Globals that no code run at load writes: flags read as the loader leaves them.

A tracing switch, a debug level, a "verbose" word: zero in .bss, set only by
code that runs after start-up (``main`` parsing its options, a debugger).  A
function an initializer calls may test one and, only when it is set, log into
a journal another TU builds.  Charged with that path, the initializer gets a
false ``init-order`` error: at load the flag is zero, and the path never runs.

Which bytes are quiet is known only once every initializer's effects are: a
first pass follows them all (``Effects``, the C runtime's entries too); the
bytes a function it followed tests (``FunctionSummary.tests_through``, as
``(GLOBAL, address, width)``) are quiet when nothing that pass followed
writes them or hands their object's address to other code (a guard to
``__cxa_guard_acquire`` too), no pointer in the file's data points into their
object, and no object loaded before can name them (a library's exported
objects are out; a program's are not, but its copies of a library's are).
Their object is the symbol holding them; where none does, what lies near
below them (``NEAR``).  The functions testing quiet bytes are then walked
again knowing them (``QUIET_AT_LOAD``), and the initializers reaching those
are composed again: the paths the flag rules out are left out.  Those paths free the budget for
code the first pass did not follow, so the bytes are checked again against
what the second pass follows (``EffectsAnalyzer.narrow_quiet``).

Code not followed (past the call depth, the budget, a call through a register)
is not known to write them, as it is not known to read anything else; nor is
a store through a pointer the code followed stored in memory before.
``benchmarks/quiet_flags.py`` reads them in a process that has loaded the
library.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from elfpatch.analysis.effects.addresses import AddressIndex
from elfpatch.analysis.effects.summary import ANCHOR, BARE, GLOBAL, Effects, FunctionSummary
from elfpatch.elf import constants as C

# Where no symbol says which object holds a flag, code knows objects by the addresses
# it uses, and those do not say where one ends: an object whose address the code
# hands on (or data points to) this close below may hold the flag as a member
# (an LLVM SmallVector's capacity, read by address, set by ``grow`` through the
# vector's), and a store this close below may be wide enough to cover it.
NEAR = 256
WIDEST_STORE = 32  # bytes: an AVX register's


class QuietBytes:
    """Byte ranges no code run at load writes, which the loader fills with zeros."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for start, end in sorted(ranges):
            self.starts.append(start)
            self.ends.append(end)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def ranges(self) -> set[tuple[int, int]]:
        """(start, width) of each range."""
        return {(start, end - start) for start, end in zip(self.starts, self.ends, strict=True)}

    def holds(self, address: int, width: int) -> bool:
        """Whether every one of the ``width`` bytes from ``address`` is quiet."""
        at = bisect_left(self.starts, address + 1) - 1
        return at >= 0 and address + width <= self.ends[at]


def tested_globals(summaries: Iterable[FunctionSummary]) -> set[tuple[int, int]]:
    """(address, width) of each global's bytes the functions test."""
    return {(at, width) for summary in summaries
            for tested, at, width in summary.tests_through if tested == GLOBAL}


def touched(found: Iterable[Effects]) -> tuple[set[str], set[str]]:
    """The keys of the globals the code writes, and of those whose address it hands to
    other code (through that address, code may write anywhere in the object): the
    guards too, which ``__cxa_guard_release`` sets and a construction inlined sets
    itself.  An address only computed (``Effects.addresses``: a member reached from
    it) is no hand-over: what the code writes through it is written at an address
    known."""
    written: set[str] = set()
    handed: set[str] = set()
    for effects in found:
        written.update(effects.writes)
        handed.update(effects.passed, effects.guards, effects.lazy)
        handed.update(pending[0] for pending in effects.pending)
    return written, handed


def quiet_bytes(index: AddressIndex, tested: set[tuple[int, int]],
                found: Iterable[Effects]) -> QuietBytes:
    """Those of the ``tested`` bytes that are quiet at load (see the module's text)."""
    if index.elf.header.type != C.ET_DYN or not tested:
        return QuietBytes(())  # a fixed executable's data holds pointers nothing relocates
    candidates = [(at, width) for at, width in tested if _unshared(index, at, width)]
    if not candidates:
        return QuietBytes(())
    written, handed = touched(found)
    extents = {at: index.object_extent(at) for at, _width in candidates}
    stored, reaching = _near_addresses(written, handed, [(at, width) for at, width in candidates
                                                         if extents[at] is None])
    # Where an object the data points to may hold them: what the checks above leave.
    kept = [(at, width) for at, width in candidates
            if _untouched(index, written, handed, stored, reaching, at, width, extents[at])]
    pointed = _pointed_into_zeros(index) if kept else []
    return QuietBytes((at, at + width) for at, width in kept
                      if not _any_in(pointed, *(extents[at] or (at - NEAR, at + width))))


def _untouched(index: AddressIndex, written: set[str], handed: set[str], stored: list[int],
               reaching: list[int], at: int, width: int,
               extent: tuple[int, int] | None) -> bool:
    """Whether no code followed writes the flag's object or hands its address on: the
    symbol holding it (``extent``; accesses are keyed by its start), or without one,
    what lies near below."""
    if extent is not None:
        key = index.data_key(at)
        return at + width <= extent[1] and key not in written and key not in handed
    return not (_any_in(stored, at - WIDEST_STORE + 1, at + width)
                or _any_in(reaching, at - NEAR, at + width))


def _near_addresses(written: set[str], handed: set[str], flags: list[tuple[int, int]],
                    ) -> tuple[list[int], list[int]]:
    """The addresses (sorted) among the keys written and handed on, of a stripped
    file's ``@0x…`` and ``^0x…``, that lie near below one of ``flags``."""
    if not flags:
        return [], []
    low = min(at for at, _ in flags) - NEAR
    high = max(at + width for at, width in flags)

    def near(keys: set[str]) -> list[int]:
        found = (int(key[1:], 16) for key in keys if key[:3] in _MARKED)
        return sorted(address for address in found if low <= address < high)

    return near(written), near(handed)


_MARKED = (f"{BARE}0x", f"{ANCHOR}0x")


def _any_in(addresses: list[int], low: int, high: int) -> bool:
    """Whether one of the sorted ``addresses`` lies in [low, high)."""
    position = bisect_left(addresses, low)
    return position < len(addresses) and addresses[position] < high


def _unshared(index: AddressIndex, at: int, width: int) -> bool:
    """Zeros the loader fills that no other object's code writes at load, and, where
    the file has symbols, a symbol holds them (the code's accesses are keyed by it).
    A library's exported objects may be written by any object loaded before it.  A
    program's (exported for the plugins it loads later: qemu's trace switches)
    only by its dependencies' initializers, which would have to name them, and no
    library names a program's flag; but not its copies of a library's objects,
    which the loader fills (COPY relocations)."""
    last = at + width - 1
    if not (index.zero_initialized(at) and index.zero_initialized(last)):
        return False
    exported = index.exported_data_at(at) or index.exported_data_at(last)
    if exported and (not index.is_program or index.copy_relocated(at)
                     or index.copy_relocated(last)):
        return False
    return index.data_key(at) is not None


def _pointed_into_zeros(index: AddressIndex) -> list[int]:
    """The addresses in zero-filled memory that the file's relocated data points to
    (``AddressIndex.data_pointers``), sorted."""
    zeros = index.zero_filled_ranges
    if not zeros:
        return []
    inside = range(min(lo for lo, _ in zeros), max(hi for _, hi in zeros)).__contains__
    return sorted(filter(inside, index.data_pointers()))
