"""Which stretches of a function die (``effects.dying.Stretches``), on shapes made by hand.

Each stretch is made as a sweep makes it: ``start`` where code is entered,
``branch`` at a conditional branch or a jump inside the function, ``ends``
where the code stops (a return, a call that never returns, a trap).  Events
are numbered as the sweep appends them: stretch ``n`` holds its own range.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable

import pytest

from elfpatch.analysis.effects.dying import DIES, LIVES, Stretches, StretchMap
from elfpatch.analysis.effects.names import NEVER_RETURN
from elfpatch.analysis.effects.summary import CALL, GUARD, READ

INSIDE = range(0x1000, 0x2000)


def inside(address: int) -> bool:
    return address in INSIDE


def never_outside(address: int) -> bool:
    raise AssertionError(f"no branch leaves the function here ({address:#x})")


def dying(stretches: Stretches, events: int,
          outside_dies: Callable[[int], bool] = never_outside,
          jumps_followed: bool = False) -> list[tuple[int, int]]:
    """The (first, end) event index ranges of the stretches that die (``jumps_followed``:
    the sweep followed every jump of the function)."""
    stretches.close(events, 0x1100)
    unentered = stretches.unentered(stretches.successors(inside)) if jumps_followed else None
    dead = stretches.dead(outside_dies, inside, stretches.leads(outside_dies, inside),
                          unentered)
    ends = [*stretches.first_event[1:], stretches.closed_at]
    return [(first, end) for first, end, died in zip(stretches.first_event, ends, dead,
                                                     strict=True) if died and end > first]


def test_a_branch_that_aborts_dies_and_the_other_way_lives() -> None:
    """``if (bad) { describe(); abort(); } return``: only the failed branch dies."""
    s = Stretches()
    s.start(0x1000, 0, True)
    s.branch(0x1010)  # jne bad
    s.start(0x1004, 1, True)
    s.ends(LIVES)  # ret
    s.start(0x1010, 2, False)
    s.ends(DIES)  # call describe; call abort
    assert dying(s, 4) == [(2, 4)]


def test_both_arms_of_a_diamond_before_the_abort_die() -> None:
    """``name = event ? event->name : "?"`` between the look-up and the fatal log: the
    look-up's stretch dies too, since both ways on die."""
    s = Stretches()
    s.start(0x1000, 0, True)
    s.branch(0x1020)  # js failed
    s.start(0x1004, 1, True)
    s.ends(LIVES)
    s.start(0x1020, 2, False)  # call look-up; test rax; je join
    s.branch(0x1030)
    s.start(0x1028, 3, True)  # lea r9, [rax+0x29]
    s.start(0x1030, 4, True)  # join: call log; call __assert_fail
    s.ends(DIES)
    assert dying(s, 6) == [(2, 3), (3, 4), (4, 6)]


def test_a_loop_on_the_way_keeps_its_reads() -> None:
    """A loop whose exit dies is not known to die itself (the least fixed point)."""
    s = Stretches()
    s.start(0x1000, 0, True)
    s.branch(0x1000)  # the loop branches back to its head
    s.start(0x1008, 1, True)
    s.ends(DIES)
    assert dying(s, 2) == [(1, 2)]


def test_a_branch_into_a_stretch_takes_its_fate() -> None:
    """A branch into the middle of a straight stretch goes where that stretch goes."""
    for fate, dies in ((DIES, True), (LIVES, False)):
        s = Stretches()
        s.start(0x1000, 0, True)
        s.branch(0x1014)  # into the middle of the stretch at 0x1010
        s.start(0x1004, 1, True)
        s.ends(DIES)
        s.start(0x1010, 2, False)
        s.ends(fate)
        assert dying(s, 3) == ([(0, 1), (1, 2), (2, 3)] if dies else [(1, 2)])


def test_a_branch_out_dies_where_the_split_off_part_does() -> None:
    s = Stretches()
    s.start(0x1000, 0, True)
    s.branch(0x5000)  # into f.cold, which unwinds
    s.start(0x1004, 1, True)
    s.ends(DIES)
    assert dying(s, 2, lambda address: address == 0x5000) == [(0, 1), (1, 2)]
    s = Stretches()
    s.start(0x1000, 0, True)
    s.branch(0x5000)  # into code that returns
    s.start(0x1004, 1, True)
    s.ends(DIES)
    assert dying(s, 2, lambda address: False) == [(1, 2)]


def test_a_stretch_entered_only_by_a_branch_never_taken_is_dropped() -> None:
    """``if (getenv(name) == (char *)-1) setup();``: the call's stretch is entered by
    nothing else; what falls or branches into it from live code keeps it."""
    s = Stretches()
    s.start(0x1000, 0, True)
    s.never_taken(0x1020)
    s.start(0x1004, 1, True)
    s.ends(LIVES)
    s.start(0x1020, 2, False)  # call setup; jmp back
    s.branch(0x1004)
    assert dying(s, 3) == [(2, 3)]
    s = Stretches()
    s.start(0x1000, 0, True)
    s.never_taken(0x1020)
    s.start(0x1004, 1, True)
    s.branch(0x1020)  # another way in
    s.start(0x1008, 2, True)
    s.ends(LIVES)
    s.start(0x1020, 3, False)
    s.ends(LIVES)
    assert dying(s, 4) == []


def test_what_only_a_branch_never_taken_leads_to_is_dropped_too() -> None:
    """LLVM's ``if (getenv("bar") != (char *)-1) return;`` before a block of calls with
    branches of its own: every stretch of the block is entered only from the block.
    A stretch the block shares with live code stays, and so does code with no way in
    that the sweep sees (a landing pad) where it met a jump it could not follow."""
    s = Stretches()
    s.start(0x1000, 0, True)  # getenv; cmn x0, #1; b.eq block
    s.never_taken(0x1020)
    s.start(0x1004, 1, True)  # return
    s.ends(LIVES)
    s.start(0x1020, 2, False)  # call; cbz x0, skip
    s.branch(0x1030)
    s.start(0x1028, 3, True)  # call
    s.start(0x1030, 4, True)  # read config; b join
    s.branch(0x1050)
    s.start(0x1040, 5, False)  # a landing pad: resume
    s.ends(LIVES)
    s.start(0x1050, 6, False)  # join: shared with the live code below
    s.ends(LIVES)
    s.start(0x1060, 7, False)  # live code that jumps to the join
    s.branch(0x1050)
    assert dying(s, 8) == [(2, 3), (3, 4), (4, 5)]  # the block's three stretches


def test_a_call_found_never_to_return_when_composed_kills_its_stretch() -> None:
    """``if (bad) { note = describe(); give_up(); } return``, ``give_up`` this object's
    own code: which of its calls never return is known only once the callees' summaries
    are, when the effects are composed (``StretchMap``)."""
    s = Stretches()
    s.start(0x1000, 0, True)  # read flag; jne bad
    s.branch(0x1010)
    s.start(0x1004, 1, True)  # ret
    s.ends(LIVES)
    s.start(0x1010, 1, False)  # call describe; read config; call give_up
    s.close(5, 0x1100)
    events = [(READ, "flag", None, 0), (CALL, 0x2000, None, 0), (READ, "config", None, 0),
              (CALL, 0x3000, None, 0), (GUARD, False, "g", 0)]
    leads = s.leads(never_outside, inside)
    mapped = StretchMap(s.stretch_of(), leads, [False] * len(leads), [(1, 0x2000), (3, 0x3000)])
    assert mapped.live(events, lambda callee: False) == events
    assert mapped.live(events, lambda callee: callee == 0x3000) == [events[0], events[4]]


def landing_pad_after_a_throw() -> Stretches:
    """``if (bad) throw E(why);``: the throw's stretch ends in the call that never
    returns; below it, the landing pad of ``E``'s constructor (free the exception,
    resume unwinding) that nothing falls or branches into."""
    s = Stretches()
    s.start(0x1000, 0, True)  # read flag; jne bad
    s.branch(0x1010)
    s.start(0x1004, 1, True)  # ret
    s.ends(LIVES)
    s.start(0x1010, 2, False)  # allocate; construct; call __cxa_throw (an import)
    s.ends(DIES)
    s.start(0x1020, 3, False)  # the landing pad: __cxa_free_exception; _Unwind_Resume
    s.ends(LIVES)  # the unwinder's resume, a function of this object: may return
    s.start(0x1030, 4, True)  # what the sweep ran on into (padding, the next function)
    s.ends(LIVES)
    return s


def test_code_entered_only_by_unwinding_dies_when_every_jump_was_followed() -> None:
    """The landing pad and what only it falls into run only while an exception unwinds:
    a failure, at start-up.  With a jump the sweep could not follow, that code may be
    its target: it counts as entered."""
    assert dying(landing_pad_after_a_throw(), 5, jumps_followed=True) == [(2, 3), (3, 4),
                                                                          (4, 5)]
    assert dying(landing_pad_after_a_throw(), 5, jumps_followed=False) == [(2, 3)]


def test_code_after_a_call_found_never_to_return_is_entered_by_nothing() -> None:
    """The same throw through the C++ runtime linked in: ``__cxa_throw`` is this
    object's own code, known never to return only when composed, and the sweep ran on
    into the landing pad below it (its ``__cxa_free_exception``, reading the runtime's
    emergency pool).  Composed, nothing after the throw is entered."""
    s = Stretches()
    s.start(0x1000, 0, True)  # read flag; jne bad
    s.branch(0x1010)
    s.start(0x1004, 1, True)  # ret
    s.ends(LIVES)
    s.start(0x1010, 2, False)  # call throw (this object's); the landing pad falls on
    s.branch(0x1030)  # cmp; je join: the landing pad's own branch
    s.start(0x1020, 3, True)  # call free
    s.start(0x1030, 4, True)  # join: call free_exception; call resume
    s.ends(LIVES)
    s.close(5, 0x1100)
    events = [(READ, "flag", None, 0), (GUARD, False, "g", 0), (CALL, 0x2000, None, 0),
              (CALL, 0x3000, None, 0), (READ, "pool", None, 0)]
    leads = s.leads(never_outside, inside)
    successors = s.successors(inside)
    mapped = StretchMap(s.stretch_of(), leads, [False] * len(leads), [(2, 0x2000)],
                        successors)
    assert mapped.live(events, lambda callee: False) == events
    assert mapped.live(events, lambda callee: callee == 0x2000) == events[:2]
    unfollowed = StretchMap(s.stretch_of(), leads, [False] * len(leads), [(2, 0x2000)])
    # Where a jump was not followed, what the throw's stretch runs on into stays.
    assert unfollowed.live(events, lambda callee: callee == 0x2000) == [*events[:2],
                                                                       *events[3:]]


# glibc's entry points that are no public header's: the stack protector's and
# _FORTIFY_SOURCE's failure reports, and longjmp's checked form.
_GLIBC_INTERNAL = {"__stack_chk_fail", "__chk_fail", "__fortify_fail", "__longjmp_chk"}
_C_HEADERS = ("stdlib.h", "setjmp.h", "pthread.h", "assert.h", "unistd.h")


def test_the_c_functions_known_never_to_return_are_declared_so_by_glibc() -> None:
    """Every C name ``NEVER_RETURN`` holds that glibc's headers declare is declared
    ``__noreturn__`` there (the C runtime's own and the unwinder's aside)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (apt-get install gcc)")
    source = "#define _GNU_SOURCE\n" + "".join(f"#include <{h}>\n" for h in _C_HEADERS)
    text = subprocess.run(["gcc", "-E", "-P", "-"], input=source, capture_output=True,
                          text=True, check=True).stdout
    declarations = " ".join(text.split()).split(";")
    never = {m.group(1) for d in declarations if "__noreturn__" in d
             for m in re.finditer(r"\b(\w+) *\(", d)}
    c_names = {n for n in NEVER_RETURN if not n.startswith(("_Z", "_Unwind", "__cxa"))}
    assert c_names - _GLIBC_INTERNAL <= never, c_names - _GLIBC_INTERNAL - never
    assert {"_Exit", "quick_exit", "pthread_exit", "longjmp", "siglongjmp"} <= c_names
