"""Reads of the bytes of an object that its constructor never writes.

gcc puts the constant parts of an object that also has a dynamic member in the
file: diamond's score matrices are a ``std::vector`` and then 10 KB of numbers,
and the initializer of their TU builds only the vector.  Code that reads the
numbers before that initializer runs reads what the file holds, in any link
order; ASan, which poisons the whole object, reports it all the same.

The analysis keys an object by its symbol, so the bytes a read touches and
those a constructor writes are not told apart.  For the reads a risk would
name, the reader and the constructor are walked again by an analyzer whose keys
are the addresses accessed (``ByteAddresses``), and the read is no risk when
every address it reads in the object lies past every byte the constructor
writes there, and the constructor hands no pointer into the object on (the code
it goes to may write any byte past it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.addresses import AddressIndex, ByteAddresses
from elfpatch.analysis.effects.summary import ANCHOR, BARE, Effects, note_spans
from elfpatch.analysis.risks import AnalysedInitializer
from elfpatch.elf.file import ElfFile

# How many bytes a store writes where no wider one is recorded (``SPAN``): a word.
_STORE_WIDTH = 8


class UnwrittenBytes:
    """Whether ``reader`` reads of the object ``key`` only bytes that ``builder``, the
    initializer constructing it, never writes (``order_risks``' ``unwritten``)."""

    def __init__(self, elf: ElfFile, index: AddressIndex) -> None:
        self.elf, self.index = elf, index
        self._analyzer: EffectsAnalyzer | None = None

    def __call__(self, reader: AnalysedInitializer, builder: AnalysedInitializer,
                 key: str) -> bool:
        extent = self.index.extent_of(key)
        if extent is None:
            return False
        read, built = self._effects(reader), self._effects(builder)
        return read is not None and built is not None and reads_past_writes(read, built, *extent)

    def _effects(self, item: AnalysedInitializer) -> Effects | None:
        """What ``item``'s function does, keyed by address; None for a part of a merged
        initializer (gcc -flto), which is not told apart from the rest here."""
        if item.part is not None or item.entry.address is None:
            return None
        return self._by_address().effects(item.entry.address)

    def _by_address(self) -> EffectsAnalyzer:
        if self._analyzer is None:
            self._analyzer = EffectsAnalyzer(self.elf, ByteAddresses(self.elf))
            self._analyzer.index.note_entries(self.index.entries)
        return self._analyzer


def reads_past_writes(read: Effects, built: Effects, start: int, end: int) -> bool:
    """Whether, in effects keyed by address, every address ``read`` reads in the object
    [``start``, ``end``) lies past every byte ``built`` writes there, ``built`` was
    followed to the end and takes no pointer into the object but to register its
    destructor.  A read may run on past its address (an index), so only bytes below
    it count as apart."""
    if not built.complete:
        return False
    inside = range(start, end)
    reads = [at for at in _addresses(read.reads) if at in inside]
    if not reads or any(at in inside for at in _addresses(read.assumed)):
        return False
    registered = {atexit.object for atexit in built.atexit}  # for its destructor alone
    handed = (*built.writes, *(key for key in built.addresses if key not in registered),
              *built.passed, *(pending[0] for pending in built.pending))
    if any(key[:1] == ANCHOR and int(key[1:], 16) in inside for key in handed):
        return False
    widths: dict[int, int] = {}
    for keys in built.groups:
        note_spans(keys, widths)
    written = [at + widths.get(at, _STORE_WIDTH) for at in _addresses(built.writes, BARE)
               if at in inside]
    return max(written, default=start) <= min(reads)


def _addresses(keys: Iterable[str], marks: str = BARE + ANCHOR) -> Iterator[int]:
    """The addresses of the keys that are one (``@0x…``, ``^0x…``)."""
    for key in keys:
        if key[:1] and key[:1] in marks:
            yield int(key[1:], 16)
