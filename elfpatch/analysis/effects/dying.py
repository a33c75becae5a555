"""Code that runs only on the way to a crash: what it touches is no finding.

An initializer's callee may, on a failed check, read a global to describe
the failure and then abort: abseil's ``LockLeave`` looks up the mutex's
debug name (locking ``synch_event_mu``) just before ``ABSL_RAW_LOG(FATAL)``
and ``__assert_fail``.  A program that gets there dies, in whatever order
its initializers ran, so the read is no init-order bug; charged, it is a
false error on every path through the lock.

A sweep (``walk.FunctionWalk``) cuts its function into *stretches*: code
entered only at its first instruction and left only at its last, where the
code branches, stops falling through or is branched to.  A stretch *dies*
when it ends in a call that never returns (``abort``, ``__assert_fail``, a
throw, ``_Unwind_Resume``), a trap, or a jump into a split-off part that
does; or when every way out of it leads into stretches that die (both arms
of ``if (event) name = …;`` before the fatal log).  Nothing else dies: a
return, a tail call, a jump through a register or the end of the code read
all may go on; so does a loop, whose exits are not all known to die before
its body is (the least fixed point).  Exception landing pads that unwind
further die too: an exception out of an initializer ends the program.

Code that nothing in the function falls or branches into, from its entry on,
runs only while an exception unwinds: a landing pad (a cleanup, a catch), or
what follows a call that never returns.  At start-up that is a failure on
the way, and what it touches is dropped as a dying stretch's is: warp's
``warp.so`` links the C++ runtime in, stripped, and an initializer's call of
``std::__throw_system_error`` went on, past the unnamed ``__cxa_throw``, into
its cleanup's ``__cxa_free_exception``, charged with the runtime's emergency
pool before the runtime's own initializer built it (619 false errors).  A
sized function's sweep read its landing pads and a stripped copy's stopped
at the last return: the two now agree.  Where the sweep met a jump it could
not follow (a switch it could not read, a jump through a register), unentered
code may be that jump's target and counts as entered.

A stretch that only a branch that is never taken enters is dropped too:
NVIDIA's libraries test ``getenv(name) == (char *)-1`` before code that
sets LLVM up (libnvJitLink: 9 times), and ``getenv`` returns a string or
NULL, never that.  Followed, that code charged two initializers with reads
that watchpoints show they never make.

The events of dying stretches that say what the code touches (reads,
writes, calls, pointers passed, keys) are dropped; those that say what it
holds (guards taken and released) stay, so that a guard's release on the
unwinding path still pairs with its acquisition.

A sweep knows a call that never returns by an import's name alone (a
stripped copy keeps those).  A call into the object's own code that never
returns is known from the callee's summary, once it is swept: the sweep
keeps a ``StretchMap``, and composing the effects drops what leads only
into such a call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from elfpatch.analysis.effects.summary import (
    ADDRESS,
    CALL,
    FETCH,
    KEYED,
    PASS,
    PASS_FOREIGN,
    READ,
    STAMP,
    UNKNOWN_PASS,
    UNSEEN,
    WRITE,
    Event,
    FunctionKey,
)

# The fate of a stretch's end: still open (decided by where it leads), or known.
OPEN, LIVES, DIES = 0, 1, 2
# Events that say what code touches or runs (dropped where it dies), not what it holds.
TOUCHES = frozenset({READ, WRITE, ADDRESS, PASS, PASS_FOREIGN, UNKNOWN_PASS, CALL, KEYED,
                     STAMP, UNSEEN, FETCH})


class Stretches:
    """The stretches of one sweep, in address order, as it makes them."""

    def __init__(self) -> None:
        self.starts: list[int] = []  # first address of each stretch
        self.first_event: list[int] = []  # index of its first event
        self.targets: list[list[int]] = []  # where its branches lead
        self.falls_on: list[bool] = []  # whether it falls into the next one
        self.fates: list[int] = []
        self.any_dies = False
        self.never: set[int] = set()  # targets of branches that are never taken
        self.cut = True  # the next instruction starts a stretch
        self.closed_at = -1  # the events after this index were made after the sweep
        self.swept_to = -1  # the address after the last instruction swept

    def start(self, address: int, events: int, falls: bool) -> None:
        """A stretch begins at ``address``; the one before falls into it if ``falls``."""
        if self.starts:
            self.falls_on[-1] = falls and self.fates[-1] == OPEN
        self.starts.append(address)
        self.first_event.append(events)
        self.targets.append([])
        self.falls_on.append(False)
        self.fates.append(OPEN)
        self.cut = False

    def branch(self, target: int) -> None:
        """The current stretch may go on at ``target``: it ends at this branch."""
        if self.starts:
            self.targets[-1].append(target)
        self.cut = True

    def never_taken(self, target: int) -> None:
        """The current stretch ends at a branch to ``target`` that is never taken."""
        self.never.add(target)
        self.cut = True

    def ends(self, fate: int) -> None:
        """The current stretch ends here, and how it ends is known."""
        if self.starts and self.fates[-1] == OPEN:
            self.fates[-1] = fate
            self.any_dies = self.any_dies or fate == DIES
        self.cut = True

    def close(self, events: int, swept_to: int) -> None:
        """The sweep is over: ``events`` made so far, code read up to ``swept_to``."""
        self.closed_at, self.swept_to = events, swept_to

    def stretch_of(self) -> list[int]:
        """Each event's stretch, for the events made during the sweep."""
        found = [-1] * self.closed_at
        if not self.starts:  # nothing was decoded
            return found
        ends = [*self.first_event[1:], self.closed_at]
        for n, (first, end) in enumerate(zip(self.first_event, ends, strict=True)):
            found[first:end] = [n] * (end - first)
        return found

    def dead(self, outside_dies: Callable[[int], bool], inside: Callable[[int], bool],
             leads: Sequence[list[int] | None], unentered: set[int] | None) -> list[bool]:
        """Which stretches die, or are never entered (``leads``: ``self.leads``).

        ``inside``: whether an address is in the function swept (a branch out of it
        leads into split-off code, dying when ``outside_dies`` says so);
        ``unentered``: what ``unentered`` found where the sweep followed every jump
        (None: it did not)."""
        dead = [fate == DIES for fate in self.fates]
        if self.any_dies:
            dead = die_back(dead, leads)
        for n in self._never_entered(inside) if unentered is None else unentered:
            dead[n] = True
        return dead

    def unentered(self, successors: Sequence[list[int]]) -> set[int]:
        """The stretches that no stretch entered from the function's first one falls or
        branches into (``successors``: ``self.successors``): landing pads, and what
        only they (or a branch never taken) lead to."""
        return set(range(len(self.starts))) - _reached([0], successors) \
            if self.starts else set()

    def leads(self, outside_dies: Callable[[int], bool],
              inside: Callable[[int], bool]) -> list[list[int] | None]:
        """Where each stretch may go on (``_leads``)."""
        return [self._leads(n, outside_dies, inside) for n in range(len(self.starts))]

    def _never_entered(self, inside: Callable[[int], bool]) -> set[int]:
        """The stretches that start where a branch never taken goes, and those that only
        they lead to: what no other stretch, itself entered, falls or branches into
        (LLVM's ``if (getenv("bar") != (char*)-1) return;`` before the calls that force
        passes to link: a block of calls that never run, and what follows from it).
        Code with no way in that the sweep sees (a landing pad, a jump table's case)
        counts as entered."""
        never = {n for n, start in enumerate(self.starts) if n and start in self.never}
        if not never:
            return never
        successors = self.successors(inside)
        entered_by = {n for following in successors for n in following}
        roots = [n for n in range(len(self.starts))
                 if n == 0 or (n not in entered_by and n not in never)]
        return _reached(never, successors) - _reached(roots, successors)

    def run_only_after(self, entry: int, inside: Callable[[int], bool],
                       may_enter: Callable[[int], bool]) -> set[int] | None:
        """The stretch that starts at ``entry`` and those that only code run after it
        falls or branches into: a block that runs, when it runs, as a whole (``if
        (!ready) { …; ready = &x; }``, laid out below and left by a jump back).
        None where no stretch starts at ``entry`` or a stretch that ``may_enter``
        refuses leads into it.  What only a jump the sweep cannot follow enters (a
        jump table's case) is left out, and so is what enters nothing that runs
        (alignment padding falling into the block)."""
        first = bisect_left(self.starts, entry)
        if first == len(self.starts) or self.starts[first] != entry:
            return None
        successors = self.successors(inside)
        runs = _reached([0], successors)
        if first not in runs:
            return None
        comes_from: dict[int, set[int]] = {}
        for m in runs:
            for n in successors[m]:
                comes_from.setdefault(n, set()).add(m)
        if not all(may_enter(m) for m in comes_from.get(first, ())):
            return None
        block = {first}
        pending = [first]
        while pending:
            for n in successors[pending.pop()]:
                if n not in block and comes_from[n] <= block:
                    block.add(n)
                    pending.append(n)
        return block

    def successors(self, inside: Callable[[int], bool]) -> list[list[int]]:
        """The stretches each stretch falls or branches into, within the function."""
        successors: list[list[int]] = [[n + 1] if falls and n + 1 < len(self.starts) else []
                                       for n, falls in enumerate(self.falls_on)]
        for m, targets in enumerate(self.targets):
            for target in targets:
                found = bisect_right(self.starts, target) - 1 if inside(target) else -1
                if found >= 0:
                    successors[m].append(found)
        return successors

    def _leads(self, n: int, outside_dies: Callable[[int], bool],
               inside: Callable[[int], bool]) -> list[int] | None:
        """The stretches stretch ``n`` may go on in (``_DIES_OUTSIDE`` for split-off
        code that dies), or None when it surely may go on elsewhere."""
        if self.fates[n] != OPEN:
            return None
        leads = [n + 1] if self.falls_on[n] and n + 1 < len(self.starts) else []
        for target in self.targets[n]:
            if not inside(target):
                if not outside_dies(target):
                    return None
                leads.append(_DIES_OUTSIDE)
                continue
            found = bisect_right(self.starts, target) - 1
            if found < 0 or target >= self.swept_to:  # code the sweep did not read
                return None
            leads.append(found)
        return leads or None


_DIES_OUTSIDE = -2


def die_back(dead: list[bool], leads: Sequence[list[int] | None]) -> list[bool]:
    """``dead`` and, working back from those, each stretch whose every way on has been
    found to die (the least fixed point: a loop never dies on its own account).
    ``leads``: where each stretch may go on, None where it may go on elsewhere."""
    dead = list(dead)
    ways_on = [0] * len(dead)  # ways on not yet known to die
    comes_from: dict[int, list[int]] = {}
    work = [n for n, died in enumerate(dead) if died]
    for n, way_out in enumerate(leads):
        if way_out is None or dead[n]:
            continue
        for m in way_out:
            if m != _DIES_OUTSIDE:
                ways_on[n] += 1
                comes_from.setdefault(m, []).append(n)
        if not ways_on[n]:
            dead[n] = True
            work.append(n)
    while work:
        for n in comes_from.get(work.pop(), ()):
            ways_on[n] -= 1
            if not ways_on[n] and not dead[n]:
                dead[n] = True
                work.append(n)
    return dead


def kept_events(events: Sequence[Event], stretch_of: Sequence[int],
                dead: Sequence[bool]) -> list[int]:
    """The indices of the ``events`` that stay: all but what the stretches that die
    touch (``stretch_of``: each event's stretch, -1 for none)."""
    return [n for n, event in enumerate(events)
            if not (event[0] in TOUCHES and stretch_of[n] >= 0 and dead[stretch_of[n]])]


def drop_events(events: list[Event], stretch_of: list[int], dropped: Collection[int]) -> None:
    """The events at the indices ``dropped`` left out, in place, ``stretch_of`` (each
    event's stretch; no longer than ``events``) kept in step."""
    stretch_of[:] = [stretch for n, stretch in enumerate(stretch_of) if n not in dropped]
    events[:] = [event for n, event in enumerate(events) if n not in dropped]


@dataclass(frozen=True)
class StretchMap:
    """What composing a function's effects needs to drop what leads only into a call
    of this object's own code that never returns.  That is known only once the
    callee's summary is: the C++ runtime linked in and stripped throws through
    functions with no name (libnvJitLink.so.12 on aarch64 builds an exception,
    taking it from the emergency pool where malloc fails, on the way to its
    unnamed ``__cxa_throw``)."""

    stretch_of: list[int]  # each event's stretch (-1: made apart from the sweep)
    leads: list[list[int] | None]  # where each stretch may go on (``Stretches._leads``)
    dead: list[bool]  # the stretches found to die when the function was swept
    calls: list[tuple[int, FunctionKey]]  # (event index, function) of each call followed
    # The stretches each falls or branches into (``Stretches.successors``), when every
    # jump of the function was followed; None when unentered code counts as entered.
    successors: list[list[int]] | None = None

    def live(self, events: list[Event], fails: Callable[[FunctionKey], bool],
             ) -> list[Event]:
        """``events`` less what stretches that lead only into a failing call touch,
        and what only code after such a call enters."""
        failing = {self.stretch_of[n] for n, callee in self.calls if fails(callee)}
        failing.discard(-1)
        if not failing:
            return events
        dead = die_back([died or n in failing for n, died in enumerate(self.dead)],
                        self.leads)
        if self.successors is not None:
            # Nothing after a call that never returns runs: its stretch leads nowhere.
            ways_on = [[] if n in failing else following
                       for n, following in enumerate(self.successors)]
            entered = _reached([0], ways_on)
            dead = [died or n not in entered for n, died in enumerate(dead)]
        return [events[n] for n in kept_events(events, self.stretch_of, dead)]


def _reached(starts: Iterable[int], successors: Sequence[list[int]]) -> set[int]:
    """The stretches ``starts`` are, and all those they fall or branch into."""
    reached = set(starts)
    pending = list(reached)
    while pending:
        for following in successors[pending.pop()]:
            if following not in reached:
                reached.add(following)
                pending.append(following)
    return reached
