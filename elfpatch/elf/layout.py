"""Where the linker put the code the compiler expects never to run.

gcc (``-freorder-functions``, on from -O2) files each function under a text
section by what it expects of it: ``.text.unlikely`` for a function declared
cold (libstdc++'s ``_M_replace_cold``, abseil's ``Mutex::LockSlow``) or called
only where it predicts the code never runs (on the way to a throw or an abort,
from another cold function), and for every function's split-off part
(``f.cold``); ``.text.startup`` for static initializers and what only they
call; ``.text`` for the rest.  GNU ld's and gold's default layouts put them in
that order at the start of ``.text``: unlikely, exit, startup, hot, then the
rest.  And gcc aligns a function it optimizes for speed to 16 bytes (on
aarch64 unless that takes 12 bytes of padding), one it optimizes for size,
as it does cold code, not at all.

So in such a file the unlikely code runs from the start of ``.text`` to the
last function start below the lowest initializer that lies off the boundary
(where gcc never starts a function it aligns): above it, up to that
initializer, only startup functions, aligned.  The rule needs no symbol (the
unwind tables give every function's and part's start) and holds only where
the file shows the layout: initializers in ``.text``, every one of them on
the boundary (a build optimized for size, or by a compiler that does not
align, has some off it, and its startup helpers may be off it too), and on
aarch64 every function above them too (a function built for size is off the
boundary there only half the time; a tuning that aligns to 8 bytes puts any
function 8 bytes past).  Anything else gives no unlikely code, and every
function is followed as before.  lld does not group the sections: its lowest
initializer is crtbegin's ``frame_dummy``, with only the C runtime's aligned
start-up code below it, so it shows no unlikely code either.  Told
``-z keep-text-section-prefix``, lld and gold keep the unlikely code in a
section of its own, ``.text.unlikely``: that section is it (GNU ld ignores the
option).

Checked at run time: of 210,000 such function starts in 52 builds of twelve
open-source programs (-O2 and -flto, both link orders) and in 17 libraries of
real wheels (libtorch_cpu, cv2, libnvJitLink, Paddle's, Qt's, libmxnet...),
each made to trap while its program or library loaded, one ran: libstdc++'s
``_M_replace_cold``, moving a string's own bytes.  On aarch64, five of those
programs cross-built, run under qemu, reached none of their 312.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from elfpatch.elf.arrays import InitializerKind, resolved_arrays
from elfpatch.elf.constants import EM_AARCH64, EM_X86_64, SHF_EXECINSTR
from elfpatch.elf.file import ElfFile

# Where, past a 16-byte boundary, gcc never starts a function it optimizes for
# speed: on x86-64 anywhere (it aligns each to 16 bytes); on aarch64 8 or 12
# bytes past (it aligns each to 16 bytes unless that takes 12 bytes of padding
# or more: ``-falign-functions=16:12``, so 4 bytes past may be any function's).
_OFF_BOUNDARY = {
    EM_X86_64: frozenset(range(1, 16)),
    EM_AARCH64: frozenset({8, 12}),
}
# Machines where a function built for size lands off the boundary only some of
# the time: the code above the initializers must show no start there at all.
_WHOLE_TEXT_CHECKED = frozenset({EM_AARCH64})


def unlikely_code(elf: ElfFile, starts: Sequence[int]) -> range:
    """The addresses of ``elf``'s unlikely code: every function (or split-off part)
    that starts there is code gcc expects never to run; empty where the file does
    not show the layout that says so.  ``starts``: every function start, sorted."""
    machine = elf.header.machine
    off = _OFF_BOUNDARY.get(machine)
    if off is None:
        return range(0)
    kept = elf.section_by_name(".text.unlikely")
    if kept is not None and kept.flags & SHF_EXECINSTR and kept.size:
        return range(kept.addr, kept.addr + kept.size)  # the linker kept it apart
    text = elf.section_by_name(".text")
    if text is None or not starts:
        return range(0)
    end = text.addr + text.size
    initializers = [target for target in _initializers(elf) if text.addr <= target < end]
    if not initializers or any(target % 16 in off for target in initializers):
        return range(0)
    lowest = bisect_left(starts, min(initializers))
    if machine in _WHOLE_TEXT_CHECKED and any(
            start % 16 in off for start in starts[lowest:bisect_left(starts, end)]):
        return range(0)
    below = starts[bisect_left(starts, text.addr):lowest]
    last = next((start for start in reversed(below) if start % 16 in off), None)
    return range(0) if last is None else range(text.addr, last + 1)


def _initializers(elf: ElfFile) -> list[int]:
    """Where the functions of ``.init_array`` start (those the file resolves)."""
    return [slot.target for location, slots in resolved_arrays(elf)
            if location.kind == InitializerKind.INIT_ARRAY
            for slot in slots if slot.target is not None]
