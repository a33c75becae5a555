"""What the risks consume: the effects of an initializer (or destructor) and its callees.

Each function is swept once into a ``FunctionSummary``: the events of its
own code in address order (reads and writes of globals, addresses taken,
pointers passed to calls, calls into this object, exit-time registrations)
and why the sweep stopped early, if it did.  ``Collector`` composes the
summaries of an entry point and the functions it reaches into one
``Effects``, keeping program order: which global each piece of code
touches first, and in which order destructors are registered (they run in
the reverse order).

A pointer passed to a function of this object is neither a read nor a
write by itself: what that function does with its parameter decides
(``ParameterUse``).  A pointer passed to code that is not followed (another
library) may be read: it is counted as a read; passed as the object that
code acts on (first argument, or result pointer), it is also ``passed``,
since that code may just as well construct the object.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from elfpatch.base.text_enum import TextEnum

# Event kinds: (kind, subject, callee, position).  The subject is a global's
# symbol, or a parameter's position (an int) in a parameter sweep.
# PASS_FOREIGN: a pointer to another object's global, passed to a function of
# this one, whose writes through it are then not this object's constructions.
# GUARD: __cxa_guard_acquire (subject True) or __cxa_guard_release or _abort (False),
# between which a function-local static is built on its first use; the callee slot
# holds the guard (``guard_key``), or None where it is not known.
# KEYED: a call passed a constant key (a ``KeyedCall``): a string literal or a
# type's type_info, what registries file entries under and look them up by.
# STAMP: a store of an address of read-only data (a vtable, a string literal) into a
# global: what constructors do, and counters, flags and list heads never get.
# GUARD_BYTE: a global byte the code tests against zero and, where it is zero, sets
# to 1 itself: a guard variable tested inline (an inline variable's, in every TU
# that builds it, or a hand-made once-only flag).  No initializer builds it; it is
# an object of one byte of its own, whatever lies next to it.
# GUARD_VARIABLE: the guard variable passed to __cxa_guard_acquire (its key), what a
# read of it tests: whether a static is built, never what a registry holds.
# UNSEEN: code that is not followed runs from here (a call or jump through a register
# the sweep cannot resolve, bytes it cannot decode, the rest of a function too big to
# read); the subject is its ``StopReason``.  What the code does before it is all seen.
# FETCH: a call of an accessor that hands back a global (its address, or the pointer it
# holds; the subject is what the code then reaches through it; the callee slot holds
# the address after the call, which tells one fetch from another): one use of a
# registry built on first use starts there.  Code of several TUs inlined into one
# fetches it anew for each TU's look-up or registration (``LookupOrder``).  At
# position RESUME, it says that the code after it, laid out there, belongs to that
# earlier fetch (``fetches``).
# WRITE's position is ZERO_STORE for a store of zero into zero-initialized memory
# (.bss): it leaves the bytes as the loader made them; ONE_STORE for a store of
# the number 1 or of an address of this object (a flag set: never zero); ONE_BYTE
# for the construction of an object of one byte (``std::ios_base::Init``, what
# ``<iostream>`` puts in every TU); FRESH_STORE for
# a store into memory just allocated whose address was stored into a global
# (``if (!registry) registry = new Registry;``, built after the pointer is set): the
# first user building what the global points to, not an update of it; UPDATE_STORE
# for the store of an instruction that reads the place first (``add [x], 1``): an
# update, no constructor's.
READ, WRITE, ADDRESS, PASS, PASS_FOREIGN, UNKNOWN_PASS, CALL, ATEXIT, HOOK, GUARD, KEYED, \
    STAMP, GUARD_BYTE, GUARD_VARIABLE, UNSEEN, FETCH = range(16)
ZERO_STORE, ONE_STORE, ONE_BYTE, FRESH_STORE, UPDATE_STORE = 1, 2, 3, 4, 5  # WRITE's position
RESUME = 1  # FETCH's position
# WRITE's position from this on: a store of that many bytes by one instruction (a
# vector register): all of them belong to the object stored to.
WIDE_STORE = 16
# What marks the key of the object a global points to: ``*key``, the object code reads
# and writes through a pointer it loaded from the global ``key`` (a registry built
# on first use behind ``static T* registry = new T``).
POINTEE = "*"
# The subject (str, int, bool, AtExit or KeyedCall) and the callee (int or None) are
# typed by the kind: a tagged union a type checker cannot narrow on an int, hence Any
# for those two.
Event = tuple[int, Any, Any, int]
# Constant arguments a call passes: (position, number), by position.  A CALL
# event's third field holds them when the callee was walked knowing them.
Constants = tuple[tuple[int, int], ...]
# What inserts into a node container of libstdc++'s (std::map and std::set,
# std::unordered_*, std::list): exported functions, named in a stripped copy too.
INSERTIONS = frozenset({
    "_ZSt29_Rb_tree_insert_and_rebalancebPSt18_Rb_tree_node_baseS0_RS_",
    "_ZNKSt8__detail20_Prime_rehash_policy14_M_need_rehashEmmm",
    "_ZNSt8__detail15_List_node_base7_M_hookEPS0_",
})
# A function to follow: its address, or its address and the constants that select
# its paths (``paths.Paths``).
FunctionKey = int | tuple[int, Constants]
# Constants may also say what the caller stored in the object a pointer argument
# points to (``bits``): one entry per 8-byte word, from the pointer on, holding a
# known bit: (MEMORY + parameter * MEMORY_WORDS + word, mask << 64 | value).
MEMORY = 1 << 10
MEMORY_WORDS = 32  # how far from the pointer on: 256 bytes


# Constants may also say that the walk reads the globals no code run at load writes
# (``quiet.QuietBytes``) as the loader leaves them: this one entry, which the
# analyzer adds to a call of a function that tests such a global
# (``EffectsAnalyzer.quiet``), never a caller.
QUIET_AT_LOAD = (1 << 30, 0)
# ``FunctionSummary.tests_through`` holds a global's bytes the function tests as
# (GLOBAL, address, width).
GLOBAL = -1


def memory_constant(parameter: int, word: int, known: tuple[int, int]) -> tuple[int, int]:
    """The entry saying that word ``word`` of what parameter ``parameter`` points to
    holds the known bits ``known`` (mask, value)."""
    return MEMORY + parameter * MEMORY_WORDS + word, known[0] << 64 | known[1]


def memory_fact(entry: tuple[int, int]) -> tuple[int, int, tuple[int, int]] | None:
    """(parameter, byte offset, known bits of the 8 bytes there) of a ``memory_constant``
    entry; None for a number passed in a register."""
    position, number = entry
    if position < MEMORY or entry == QUIET_AT_LOAD:
        return None
    parameter, word = divmod(position - MEMORY, MEMORY_WORDS)
    return parameter, 8 * word, (number >> 64, number & ((1 << 64) - 1))


def may_decide(summary: FunctionSummary, constants: Constants) -> bool:
    """Whether ``constants``, cut to those that may decide anything (``decisive``),
    decide one of the function's own tests (``summary``: its walk knowing none): a
    number passed in a register it compares, or bits passed of bytes it tests."""
    return any(entry == QUIET_AT_LOAD or memory_fact(entry) is not None
               or summary.tests_arguments >> entry[0] & 1 for entry in constants)


def decisive(summary: FunctionSummary, constants: Constants) -> Constants:
    """Those of ``constants`` that may decide anything in the function: every number
    passed in a register (it may hand it on to a callee that tests it), and like them
    ``QUIET_AT_LOAD`` (no ``memory_fact``), and the bits passed of the words holding
    bytes it tests through a pointer (those are never handed on).  Calls that differ
    only in the bits of bytes it never tests (each of LLVM's options stores its own
    value before naming itself) share one walk."""
    return tuple(entry for entry in constants
                 if (fact := memory_fact(entry)) is None
                 or any(tested == fact[0] and at < fact[1] + 8 and fact[1] < at + width
                        for tested, at, width in summary.tests_through))


def function_key(address: int, constants: Constants | None) -> FunctionKey:
    """The function a call follows: its address, with the constants it is passed when
    it is walked knowing them (a CALL event's subject and callee, as
    ``FunctionSummary.callees`` keys it)."""
    return (address, constants) if constants else address


# What a function does with one of its pointer parameters (bits): reads
# through it, writes through it, or hands it as the object to act on (its
# first argument, or the pointer to a by-value result) to code that is not
# followed, which may build it.  USE_ASSUMED qualifies USE_READ: no code seen
# reads through the pointer; it reaches this object's code that was not
# followed to the end (a budget, a depth, code not read whole), which is taken
# to read it.  USE_READ_FIRST says the first access through the pointer reads
# it: what a lock, an insertion or a counter's bump does to an object already
# there, where a constructor's first access writes.
# USE_LOCK: it writes through the pointer only as a lock does (a lock word taken or
# given back, never an entry), where USE_WRITE writes anything.
USE_READ, USE_WRITE, USE_UNKNOWN, USE_ASSUMED, USE_READ_FIRST, USE_LOCK = 1, 2, 4, 8, 16, 32
# The position of the pointer to a by-value result where it has a register of
# its own (aarch64's x8; x86-64 passes it as the first argument).
RESULT_POSITION = -1


def unseen_use(position: int) -> int:
    """What code that is not followed may do with a pointer passed at ``position``:
    read it, and, as the object it acts on, build it."""
    if position == RESULT_POSITION:
        return USE_UNKNOWN
    return USE_READ | USE_UNKNOWN if position == 0 else USE_READ | USE_READ_FIRST


def handed_to_unknown_code(event: Event) -> bool:
    """Whether ``event`` hands a parameter to a call through a register
    (``FunctionWalk.parameters_to_unknown_code``): the only ``UNKNOWN_PASS`` whose
    use is assumed, not known (``unfollowed_use``)."""
    return event[0] == UNKNOWN_PASS and event[2] is not None and bool(event[2] & USE_ASSUMED)


def unfollowed_use(position: int) -> int:
    """``unseen_use`` of this object's own code that was not followed to the end:
    its read is assumed, not seen (``USE_ASSUMED``)."""
    use = unseen_use(position)
    return use | USE_ASSUMED if use & USE_READ else use


def read_seen(use: int) -> bool:
    """Whether ``use`` holds a read that code seen makes."""
    return bool(use & USE_READ) and not use & USE_ASSUMED


class StopReason(TextEnum):
    """Why code was not followed to its end; the keys of the JSON's ``coverage.stopped``."""

    INDIRECT_JUMP = "indirect jump"
    INDIRECT_CALL = "indirect call"
    SIZE_CAP = "size cap"
    UNKNOWN_INSTRUCTION = "unknown instruction"
    UNREADABLE = "code not in the file"
    DEPTH = "call depth"
    FUNCTION_BUDGET = "function budget"


# A function stopped for these may hold a return its sweep did not see.
_UNREAD_CODE = frozenset({StopReason.SIZE_CAP, StopReason.UNKNOWN_INSTRUCTION,
                          StopReason.UNREADABLE})


@dataclass(frozen=True)
class AtExit:
    """One exit-time registration (__cxa_atexit, atexit, __cxa_thread_atexit_impl)."""

    object: str | None  # symbol of the object whose destructor is registered
    destructor: str | None  # symbol of the function registered
    # Where the destructor's code is in this object (None: another object's, or unknown).
    destructor_address: int | None = field(default=None, compare=False)
    # A function registered with ``atexit``: it runs at exit and is no object's
    # destructor (gcc's cleanup of a static array, ``__tcf_N``, is registered with
    # ``__cxa_atexit`` and a null object, and is one).
    no_object: bool = field(default=False, compare=False)


class KeyedCall(NamedTuple):
    """A call passed a constant key: ``string:<text>`` (a string literal's text, the
    same in every object) or ``type:<_ZTI…>`` (a type_info, by its symbol)."""

    function: str  # the function called: its symbol, else its address (``0x…``)
    key: str
    position: int  # the argument that holds the key
    address: int | None  # where the function is in this object; None: another object's


# One entry of ``LookupOrder.log``: (what, key, number), what being ``FETCH`` (the
# number: the use it starts or resumes), ``READ``, ``WRITE`` (an update, not a
# construction), ``PASS`` (a pointer passed, its use pending; the number: the pass's
# index in ``Effects.pending``) or ``UNKNOWN_PASS`` (handed to code not followed,
# which may register).
FetchLogEntry = tuple[int, str, int]


@dataclass(frozen=True)
class Effects:
    writes: tuple[str, ...]  # globals defined here that the code writes or constructs
    reads: tuple[str, ...]  # globals (here, or another object's through the GOT) it reads
    calls: tuple[str, ...]  # functions of this object it calls directly (followed);
    #                         code without a symbol appears as its address ("0x1234")
    external_calls: tuple[str, ...]  # functions called through the PLT/GOT
    atexit: tuple[AtExit, ...]  # in the order they are registered
    constructs_ios_init: bool  # calls std::ios_base::Init::Init() (the TU has <iostream>)
    complete: bool  # False when a budget or an unknown indirect jump stopped the analysis
    addresses: tuple[str, ...] = ()  # globals whose address is taken, contents untouched
    passed: tuple[str, ...] = ()  # globals whose address reaches code that is not followed
    # (global, True when written) for each global the code touches, by first touch.
    first_access: tuple[tuple[str, bool], ...] = ()
    stopped: tuple[StopReason, ...] = ()  # why the code was not followed to the end
    hooks: tuple[int, ...] = ()  # this object's functions handed over to run later
    # Pointers passed to this object's functions, what those do with them not yet
    # worked out (see ``settle``; ``Pending``).
    pending: tuple[Pending, ...] = ()
    # Objects built between __cxa_guard_acquire and __cxa_guard_release: function-local
    # statics, built on first use (known without a name, in a stripped file); and the
    # guard bytes code tests inline (``GUARD_BYTE``), set only by what they guard.
    lazy: tuple[str, ...] = ()
    # In a file without symbols: the bare addresses (``@0x…``, ``^0x…``) each function
    # followed touches, the evidence of which belong to one object (``object_keys``).
    groups: tuple[tuple[str, ...], ...] = ()
    # Calls passed a constant key, in program order (registrations and look-ups).
    keyed_calls: tuple[KeyedCall, ...] = ()
    # Globals written outside a function-local static's construction: an entry added
    # to a registry, a member store; not the first-use construction itself.
    updates: tuple[str, ...] = ()
    # Globals into which the code stores an address of read-only data (``STAMP``).
    stamped: tuple[str, ...] = ()
    # Branches on a constant the code passes to a function it calls: (decided, so only
    # the path selected was followed; not decided, so every path was kept).
    branches: tuple[int, int] = (0, 0)
    # Globals written with something other than zero into zero-initialized memory:
    # those whose bytes the code changes (a "constructor" that only stores zeros into
    # .bss leaves them as they were, and a read before it sees the same).
    changed: tuple[str, ...] = ()
    # Reads (of ``reads``) that no code seen makes: a pointer to the global reaches
    # this object's code that was not followed to the end, taken to read it.
    assumed: tuple[str, ...] = ()
    # Guards: the bytes the code tests inline (``GUARD_BYTE``: an inline variable's, a
    # hand-made flag) and those it passes to __cxa_guard_acquire (``GUARD_VARIABLE``);
    # each orders a construction, never holds an entry of a registry.
    guards: tuple[str, ...] = ()
    # Globals (of ``reads``) read where no guard is held: outside any first-use
    # construction, as a look-up in a registry built on first use reads it.
    open_reads: tuple[str, ...] = ()
    # Those of ``open_reads`` made before any code that is not followed runs, in
    # program order (a call the budget or the depth left out, an ``UNSEEN`` event):
    # what the code has surely done by then is all known, followed to the end or not.
    leading_reads: tuple[str, ...] = ()
    # Globals the code writes outside a first-use construction only as a lock does
    # (``USE_LOCK``), not counted in ``updates``: a look-up under a registry's lock
    # writes the lock word and no entry.
    locked: tuple[str, ...] = ()
    # Globals the code only ever sets to a value that says "done" (a 1, an address:
    # ``ONE_STORE``), never writes otherwise: flags raised, holding no entry.
    raised: tuple[str, ...] = ()
    # Objects whose destructor is registered (``atexit``) by a function whose own
    # code, not its callees', stores to the object before handing it to any call:
    # what a constructor inlined there builds (after a look, perhaps, at what is
    # there), not an object it fills only through another function.
    built_by_registrar: tuple[str, ...] = ()
    # Registries fetched from their accessor (``FETCH``) that one fetch only read, and a
    # later fetch wrote into (``LookupOrder``): in code of several TUs inlined into one,
    # a look-up that ran before a registration.
    looked_up_first: tuple[str, ...] = ()
    # What ``looked_up_first`` is worked out from, kept while passes are pending
    # (``settle``) or keys not yet placed (``rekeyed``): ``LookupOrder.log``.
    fetch_log: tuple[FetchLogEntry, ...] = ()

    def written_first(self, symbol: str) -> bool | None:
        """Whether the first touch of ``symbol`` writes it (None: never touched)."""
        return next((writes for name, writes in self.first_access if name == symbol), None)


UNKNOWN_EFFECTS = Effects((), (), (), (), (), False, False)
# (global, function, position, another object's, passed under a guard, how many globals
# the code had touched when it passed it: where the pass comes in ``first_access``)
Pending = tuple[str, int, int, bool, bool, int]


class LiveEvents(Protocol):
    """A function's events less what leads only into calls that never return, once the
    callees' summaries say which do (``dying.StretchMap``)."""

    def live(self, events: list[Event], fails: Callable[[FunctionKey], bool],
             ) -> list[Event]: ...


@dataclass
class FunctionSummary:
    """Effects of one function, without those of the functions it calls."""

    events: list[Event] = field(default_factory=list)
    calls: dict[str, None] = field(default_factory=dict)
    external_calls: dict[str, None] = field(default_factory=dict)
    ios_init: bool = False
    stopped: dict[StopReason, None] = field(default_factory=dict)
    callees: dict[FunctionKey, None] = field(default_factory=dict)  # functions to follow
    decided: int = 0  # branches on a constant argument decided (``Effects.branches``)
    undecided: int = 0
    # Bits of the argument positions whose registers it compares (all of them when it
    # indexes a jump table): a constant passed there may select its paths (worth a
    # walk knowing it, ``EffectsAnalyzer.specialised``).
    tests_arguments: int = 0
    # The bytes it tests through a pointer parameter, (parameter, offset, width): what a
    # caller stored there may select its paths (``memory_constant``); and those of
    # globals it tests, (GLOBAL, address, width): what the loader leaves there may
    # (``QUIET_AT_LOAD``).
    tests_through: set[tuple[int, int, int]] = field(default_factory=set)
    # Bits of the parameters its own code handles (a parameter sweep): copied to another
    # register or a stack slot, or called; reads and writes through them, and hands to
    # named functions, are its events.  What ``parameter_use`` takes it to receive.
    parameters_handled: int = 0
    # The global's address every return hands back, or (a str) the key of the global
    # whose pointer every return hands back (None: not one known).
    returned: int | str | None = None
    returns_seen: bool = False
    # The number every return hands back (None: not one known).
    returned_constant: int | None = None
    # It hands its first argument to __cxa_atexit with no object: a copy of libc's
    # ``atexit`` (each object links its own, from libc_nonshared.a; unnamed once
    # stripped).  Its callers register what they pass it.
    registers_argument: bool = False
    # It registers a destructor for an object (an ``ATEXIT`` event naming one).
    registers_objects: bool = False
    # Whether control may come back to a caller: a return, a jump out (a tail call,
    # or through a register), or a jump into its split-off part (.cold) whose code
    # does not run straight into a throw, an abort or a trap.
    may_return: bool = False
    # What composing needs to drop the code that leads only into a call of this object's
    # own code that never returns (``dying.StretchMap``); None when it calls none.
    stretch_map: LiveEvents | None = field(default=None, repr=False, compare=False)
    # ``bare_keys()`` once worked out: the same tuple in every ``Effects`` that expands
    # this function, so placing them (``object_keys``) sees each function once.
    _bare: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        return not self.stopped

    @property
    def never_returns(self) -> bool:
        """Every way through it ends in a throw, an unwind, an abort or a trap (a
        ``CV_Assert`` failure's handler, a fatal logger): it runs only when its caller
        is failing.  Known only of a function whose code was all read."""
        return not self.may_return and not self.stopped.keys() & _UNREAD_CODE

    def note_return(self, returned: int | str | None) -> None:
        if not self.returns_seen:
            self.returned, self.returns_seen = returned, True
        elif returned != self.returned:
            self.returned = None

    def note_constant(self, number: int | None) -> None:
        """The number a return hands back (None: not one known); before ``note_return``
        notes that return, for every return."""
        if not self.returns_seen:
            self.returned_constant = number
        elif number != self.returned_constant:
            self.returned_constant = None

    def stop(self, reason: StopReason) -> None:
        self.stopped[reason] = None

    def stop_here(self, reason: StopReason) -> None:
        """A stop where the sweep is: the code after it in program order is not all
        seen (an ``UNSEEN`` event)."""
        self.stop(reason)
        self.events.append((UNSEEN, reason, None, 0))

    def bare_keys(self) -> tuple[str, ...]:
        """The bare addresses this function's events name (none in a file with .symtab);
        asked for once the sweep is over."""
        if self._bare is None:
            self._bare = bare_keys_of(self.events)
        return self._bare


class Part(NamedTuple):
    """One initializer of those gcc's link-time optimisation merged into one function."""

    address: int | None  # the function called, or None for code inlined into the merged one
    symbol: str | None
    effects: Effects
    inline: bool  # code of several translation units may be mixed in program order


def incomplete(reason: StopReason) -> FunctionSummary:
    summary = FunctionSummary()
    summary.stop_here(reason)
    return summary


# How a pointer passed as argument ``position`` to the function at ``callee`` is used.
ParameterUse = Callable[[int, int], int]
# The same for one global, or None when what the function does with it does not matter.
PendingUse = Callable[[str, int, int, bool], int | None]


GuardKey = str | int | None


class GuardsHeld:
    """The guards of function-local statics held where the events are, in program order.

    A section is taken once and given back twice in the code as laid out: by
    ``__cxa_guard_release`` when the static is built, and by ``__cxa_guard_abort``
    on the exception path after it.  Counting both gave back an enclosing
    section's guard too, and what it built (a flag set once, under its own
    guard, by whichever initializer comes first) looked built unguarded.  Known
    guards are given back by name; unknown ones by count, release only.
    """

    def __init__(self) -> None:
        self.known: dict[str | int, None] = {}
        self.unknown = 0

    def event(self, taken: bool, guard: GuardKey) -> None:
        if guard is not None:
            if taken:
                self.known[guard] = None
            else:
                self.known.pop(guard, None)
        elif taken:
            self.unknown += 1
        else:
            self.unknown = max(self.unknown - 1, 0)

    def __len__(self) -> int:
        return len(self.known) + self.unknown


class LookupOrder:
    """Which registries a fetch only looked into before a later fetch wrote into them
    (``Effects.looked_up_first``).

    Code reaches a registry built on first use through its accessor (``T&
    registry() { static T r; return r; }``), called once for each use: a look-up,
    a registration.  One use may read before it writes (a registration checks the
    key is not taken yet); code of several TUs inlined into one (gcc -flto's
    merged initializer) calls the accessor again for each TU's part.  A fetch
    after which the code reads the registry and writes nothing into it, then a
    later fetch after which it writes there, is a look-up that ran before a
    registration.

    Only what a fetch reaches is logged: the key fetched, and in a file without
    symbols the bare addresses of its members (``MEMBER_REACH`` past it).  Code
    under a guard (the registry's construction on first use) is not: the caller
    leaves it out.  Code laid out after another fetch that belongs to an earlier
    one says so (``RESUME``, ``fetches``): each use is numbered, and the log
    charges what follows to the use in force.
    """

    def __init__(self) -> None:
        self.log: list[FetchLogEntry] = []
        self.keys: dict[str, None] = {}  # the keys fetched
        self.starts: list[int] = []  # their addresses, in a file without symbols
        self.uses: dict[tuple[str, int], int] = {}  # (key, where fetched) -> its use

    def fetch(self, key: str, site: int, resumed: bool) -> None:
        """A fetch of ``key`` by the call before ``site``, or (``resumed``) code that
        belongs to that fetch."""
        if resumed:
            use = self.uses.get((key, site))
            if use is not None:
                self.log.append((FETCH, key, use))
            return
        use = self.uses[key, site] = len(self.uses)
        self.log.append((FETCH, key, use))
        if key not in self.keys:
            self.keys[key] = None
            address = _bare_address(key)
            if address is not None:
                self.starts.append(address)

    def touch(self, what: int, key: str, pending: int = 0) -> None:
        """A read, an update, or a pass of ``key``, logged when a fetch reaches it."""
        if key in self.keys or self._member(key):
            self.log.append((what, key, pending))

    def _member(self, key: str) -> bool:
        """In a file without symbols, whether ``key`` lies just past an address fetched."""
        address = _bare_address(key) if self.starts else None
        return address is not None and any(_member_reach(start, address)
                                           for start in self.starts)


def looked_up_first(log: Iterable[FetchLogEntry], guards: Collection[str],
                    uses: Mapping[int, int] | None = None) -> tuple[str, ...]:
    """The registries a use only read before a later use wrote into them, each known
    by the key the look-up read first (``LookupOrder``); ``guards``: the guard
    variables code tests (the accessor's, next to its static: whether it is built,
    not what it holds); ``uses``: what is done with each pending pass, by its index
    (None: not known yet, may register)."""
    current: dict[str, int] = {}  # each key fetched -> the use in force
    uses_of: dict[str, list[int]] = {}  # -> its uses, in the order they start
    # Each use -> what its code did: READ, WRITE, UNKNOWN_PASS, or nothing (None).
    did: dict[int, int | None] = {}
    read_first: dict[int, str] = {}  # -> the key a use that reads read first
    for what, key, number in log:
        if key in guards:
            continue
        if what == FETCH:
            current[key] = number
            if number not in did:
                did[number] = None
                uses_of.setdefault(key, []).append(number)
            continue
        done: int | None = what
        if what == PASS:
            use = uses.get(number, 0) if uses is not None else USE_UNKNOWN
            done = UNKNOWN_PASS if use & USE_UNKNOWN else WRITE if use & USE_WRITE \
                else READ if read_seen(use) else None
        for fetched, use in current.items():
            if not _reaches(fetched, key):
                continue
            if done in (WRITE, UNKNOWN_PASS) and did[use] != WRITE:
                did[use] = done
            elif done == READ and did[use] is None:
                did[use] = READ
                read_first[use] = key
    found: dict[str, None] = {}
    for numbers in uses_of.values():
        looking = next((n for n in numbers if did[n] == READ), None)
        if looking is not None and any(did[n] == WRITE for n in numbers if n > looking):
            found.setdefault(read_first[looking], None)
    return tuple(found)


def _reaches(fetched: str, key: str) -> bool:
    """Whether ``key`` is the global fetched, or in a file without symbols one of its
    members: a bare address ``MEMBER_REACH`` past it, until objects are placed
    (``rekeyed``), then the same object."""
    if fetched == key:
        return True
    start, address = _bare_address(fetched), _bare_address(key)
    return start is not None and address is not None and _member_reach(start, address)


def _member_reach(start: int, address: int) -> bool:
    """Whether ``address`` lies within ``MEMBER_REACH`` past ``start``."""
    return 0 <= address - start < MEMBER_REACH


def _bare_address(key: str) -> int | None:
    """The address a bare key names (``@0x…``, ``^0x…``); None for a symbol or a key
    placed in an object."""
    return int(key[1:], 16) if key[:1] in _MARKS else None


class Collector:
    """Composes function summaries into one ``Effects``, in program order.

    ``summaries`` holds the functions that may be followed (those the
    budget allowed); a call to one of them contributes its events where
    the call is, the first time it is met.  A call to a function that never
    returns contributes nothing, nor does a pointer passed to it: that code
    runs only on an error path, when the initializer fails (an exception
    leaving a static initializer ends the program), so what it reads is not
    read before its constructor in a run that works.
    """

    def __init__(self, summaries: dict[FunctionKey, FunctionSummary],
                 use: ParameterUse | None) -> None:
        """``use``: None to leave pointers passed to this object's functions pending."""
        self.summaries, self.use = summaries, use
        self.pending: list[Pending] = []
        # Each global read, by first read; True while only assumed (``USE_ASSUMED``):
        # a read seen sets None, in place.
        self.reads: dict[str, bool | None] = {}
        self.writes: dict[str, None] = {}
        self.addresses: dict[str, None] = {}
        self.passed: dict[str, None] = {}
        self.first: dict[str, bool] = {}
        # Each registration once, known by its object and by where the destructor's
        # code is (its name when that is another object's): two registrations of
        # this object's unnamed destructors (a stripped file) are two.
        self.atexit: dict[tuple[str | None, int | str | None], AtExit] = {}
        self.hooks: dict[int, None] = {}
        self.lazy: dict[str, None] = {}
        self.guard_bytes: dict[str, None] = {}
        self.open_reads: dict[str, None] = {}
        self.leading_reads: dict[str, None] = {}
        self.unseen = False  # code not followed has run, in program order
        self.keyed: dict[KeyedCall, None] = {}
        self.updates: dict[str, None] = {}
        self.locked: dict[str, None] = {}
        self.stamped: dict[str, None] = {}
        self.changed: dict[str, None] = {}
        self.raised: dict[str, None] = {}  # set to 1 or an address (``ONE_STORE``)
        self.written_otherwise: dict[str, None] = {}
        self.guards = GuardsHeld()
        self.guarded = 0  # how many guards are held where the events are
        # Each global's first touch since the outermost guard held was taken, True for a
        # write: what a static's construction builds is written there before it is
        # read, whatever the code read before the guard (the static itself, on the
        # way taken when it is built already).
        self.guard_touches: dict[str, bool] = {}
        self.expanded: dict[FunctionKey, None] = {}  # in the order they were met
        self.within: list[FunctionKey] = []  # the functions being expanded, outermost first
        self._inserts: dict[FunctionKey, bool] = {}  # ``inserts``, once worked out
        self.built_by_registrar: dict[str, None] = {}
        self.order = LookupOrder()

    def function(self, address: FunctionKey) -> None:
        """The events of the function at ``address`` and, in place, of its callees.

        A call passing constants that decide nothing in the callee is the plain
        function's (``EffectsAnalyzer.specialised``)."""
        if type(address) is tuple and address not in self.summaries:
            address = address[0]
        if address in self.expanded:
            return
        if address not in self.summaries:  # left out by the budget or the depth
            self.unseen = True
            return
        self.expanded[address] = None
        summary = self.summaries[address]
        mapped = summary.stretch_map
        events = summary.events if mapped is None else mapped.live(summary.events, self.fails)
        self.within.append(address)
        self.events(events)
        self.within.pop()
        if summary.registers_objects:
            self.built_by_registrar.update(dict.fromkeys(built_then_registered(events)))

    def events(self, events: Iterable[Event]) -> None:
        reads, first, open_reads, order = self.reads, self.first, self.open_reads, self.order
        for kind, subject, callee, position in events:
            if kind == READ:  # ``read``, inlined: the commonest event by far
                reads[subject] = None
                first.setdefault(subject, False)
                if self.guarded:
                    self.guard_touches.setdefault(subject, False)
                else:
                    open_reads[subject] = None
                    if not self.unseen:
                        self.leading_reads[subject] = None
                    if order.keys:
                        order.touch(READ, subject)
            elif kind == WRITE:
                if position == FRESH_STORE:
                    self.built(subject)
                else:
                    self.write(subject, position == ZERO_STORE, raised=position == ONE_STORE)
            elif kind == CALL:
                key = function_key(subject, callee)
                if not self.fails(key):
                    self.function(key)
            elif kind in (PASS, PASS_FOREIGN):
                if self.fails(callee):
                    continue
                if self.use is None:
                    if order.keys and not self.guarded:
                        order.touch(PASS, subject, len(self.pending))
                    self.pending.append((subject, callee, position, kind == PASS_FOREIGN,
                                         self.guarded > 0, len(first)))
                else:
                    self.pass_on(subject, self.use(callee, position), kind == PASS_FOREIGN)
            elif kind == UNKNOWN_PASS:
                self.pass_to(subject, unseen_use(position) if callee is None else callee)
            elif kind == ATEXIT:
                self.atexit.setdefault((subject.object, subject.destructor
                                        if subject.destructor_address is None
                                        else subject.destructor_address), subject)
            elif kind == ADDRESS:
                self.addresses.setdefault(subject, None)
            elif kind == HOOK:
                self.hooks.setdefault(subject, None)
            elif kind == GUARD:
                held = self.guarded
                self.guards.event(subject, callee)
                self.guarded = len(self.guards)
                if self.guarded and not held:
                    self.guard_touches = {}
            elif kind == KEYED:
                self.keyed.setdefault(subject, None)
            elif kind == STAMP:
                self.stamped.setdefault(subject, None)
            elif kind == GUARD_BYTE:
                self.lazy.setdefault(subject, None)
                self.guard_bytes.setdefault(subject, None)
            elif kind == GUARD_VARIABLE:
                self.guard_bytes.setdefault(subject, None)
            elif kind == UNSEEN:
                self.unseen = True
            elif kind == FETCH and not self.guarded:
                order.fetch(subject, callee, position == RESUME)

    def fails(self, key: FunctionKey) -> bool:
        """Whether the function followed at ``key`` never returns (an error path)."""
        if type(key) is tuple and key not in self.summaries:
            key = key[0]
        summary = self.summaries.get(key)
        return summary is not None and summary.never_returns

    def pass_on(self, symbol: str, use: int, foreign: bool) -> None:
        """A pointer passed to a function of this object that uses it so; another
        object's global is not built by this one's code."""
        if foreign and use:  # its read is seen when a read or a write of it is
            seen = read_seen(use) or use & USE_WRITE
            use = (use & USE_UNKNOWN) | USE_READ | (0 if seen else USE_ASSUMED)
        self.pass_to(symbol, use)

    def pass_to(self, symbol: str, use: int) -> None:
        if use & USE_READ_FIRST:  # it updates the object: not a construction
            self.touched(symbol, False)
        writes = use & (USE_WRITE | USE_LOCK)
        if (writes or use & USE_UNKNOWN) and self.guarded \
                and self.guard_touches.get(symbol, True):
            self.lazy.setdefault(symbol, None)
        if writes or use & USE_UNKNOWN:
            # A call that builds or may build the object: taken to build it
            # before anything it reads of it.
            self.touched(symbol, True)
        if use & USE_UNKNOWN and self.order.keys and not self.guarded:
            self.order.touch(UNKNOWN_PASS, symbol)
        if use & USE_READ:
            self.read(symbol, bool(use & USE_ASSUMED))
        if writes:
            self.write(symbol, lock=not use & USE_WRITE)
        if use & USE_UNKNOWN:
            self.passed.setdefault(symbol, None)
        if not use:
            self.addresses.setdefault(symbol, None)

    def read(self, symbol: str, assumed: bool = False) -> None:
        if assumed:
            self.reads.setdefault(symbol, True)
        else:
            self.reads[symbol] = None
        if not self.guarded:
            self.open_reads.setdefault(symbol, None)
            if not self.unseen:
                self.leading_reads.setdefault(symbol, None)
            if self.order.keys:
                self.order.touch(READ, symbol)
        self.touched(symbol, False)

    def touched(self, symbol: str, written: bool) -> None:
        """The first touch of ``symbol``, a write or not, if it is the first: in all the
        code, and since the outermost guard held was taken (``events`` inlines this
        for reads, the commonest event)."""
        self.first.setdefault(symbol, written)
        if self.guarded:
            self.guard_touches.setdefault(symbol, written)

    def write(self, symbol: str, zero: bool = False, lock: bool = False,
              raised: bool = False) -> None:
        """A store; one under a guard builds a static on first use, unless the code
        under the guard read the object first: that updates an object built
        elsewhere (a registry another TU's initializer builds, filled from a
        function-local static's construction or a once-only guard).  ``lock``: a
        lock's write, which updates the lock word alone (``locked``); ``raised``: a
        store of 1 or of an address, a flag set (``ONE_STORE``)."""
        if not zero:
            self.changed.setdefault(symbol, None)
        (self.raised if raised else self.written_otherwise).setdefault(symbol, None)
        if self.guarded and self.guard_touches.setdefault(symbol, True):
            self.lazy.setdefault(symbol, None)
        elif lock:
            if self.lock_for_an_insertion():
                self.locked.setdefault(symbol, None)
        else:
            self.updates.setdefault(symbol, None)
            if self.order.keys:
                self.order.touch(WRITE, symbol)
        self.writes.setdefault(symbol, None)
        self.first.setdefault(symbol, True)

    def lock_for_an_insertion(self) -> bool:
        """Whether a lock taken here may be a registry's, held around an insertion: the
        function taking it (the one being expanded; not known once pending passes are
        settled) inserts into a container, itself or through what it calls.  LLVM's
        ``ManagedStatic`` takes its creation lock in a function that inserts nothing:
        each initializer of an option takes it, and those that insert elsewhere were
        taken to register into it, the others to look it up (MindSpore's ``libakg``:
        76 false errors)."""
        return not self.within or self.inserts(self.within[-1])

    def inserts(self, key: FunctionKey) -> bool:
        """Whether the function at ``key`` or one it calls (followed) inserts into a
        node container (``INSERTIONS``)."""
        known = self._inserts.get(key)
        if known is None:
            known = self._inserts[key] = self._reaches_an_insertion(key)
        return known

    def _reaches_an_insertion(self, key: FunctionKey) -> bool:
        seen, ahead = {key}, [key]
        while ahead:
            at = ahead.pop()
            summary = self.summaries.get(at)
            if summary is None and type(at) is tuple:
                summary = self.summaries.get(at[0])
            if summary is None:
                continue
            if not INSERTIONS.isdisjoint(summary.external_calls):
                return True
            for callee in summary.callees:
                if callee not in seen:
                    seen.add(callee)
                    ahead.append(callee)
        return False

    def built(self, symbol: str) -> None:
        """A store into what ``symbol`` points to, just allocated (``FRESH_STORE``): its
        construction on first use, as under a guard."""
        self.written_otherwise.setdefault(symbol, None)
        self.changed.setdefault(symbol, None)
        self.lazy.setdefault(symbol, None)
        self.writes.setdefault(symbol, None)
        self.touched(symbol, True)

    def effects(self, complete: bool, stopped: Iterable[StopReason]) -> Effects:
        calls: dict[str, None] = {}
        external: dict[str, None] = {}
        ios_init = False
        decided = undecided = 0
        for address in self.expanded:
            summary = self.summaries[address]
            calls.update(summary.calls)
            external.update(summary.external_calls)
            ios_init = ios_init or summary.ios_init
            decided += summary.decided
            undecided += summary.undecided
        touched = set(self.reads) | set(self.writes)
        groups = (self.summaries[address].bare_keys() for address in self.expanded)
        return Effects(tuple(self.writes), tuple(self.reads), tuple(calls), tuple(external),
                       tuple(self.atexit.values()), ios_init, complete,
                       tuple(a for a in self.addresses if a not in touched),
                       tuple(self.passed), tuple(self.first.items()), tuple(stopped),
                       tuple(self.hooks), tuple(self.pending), tuple(self.lazy),
                       tuple(group for group in groups if group), tuple(self.keyed),
                       tuple(self.updates), tuple(self.stamped), (decided, undecided),
                       tuple(self.changed), self.assumed_reads(), tuple(self.guard_bytes),
                       tuple(self.open_reads), tuple(self.leading_reads),
                       tuple(self.locked),
                       tuple(k for k in self.raised if k not in self.written_otherwise),
                       tuple(self.built_by_registrar),
                       looked_up_first(self.order.log, self.guard_bytes), tuple(self.order.log))

    def assumed_reads(self) -> tuple[str, ...]:
        return tuple(symbol for symbol, assumed in self.reads.items() if assumed)


def built_then_registered(events: Iterable[Event]) -> Iterator[str]:
    """The objects whose destructor one function's own ``events`` register after
    storing to them, before handing them to any call (``Effects.built_by_registrar``).
    Places are compared without their marks: a store names ``@0x10``, the
    registration the pointer taken, ``^0x10``."""
    stored: set[str] = set()
    handed: set[str] = set()
    for kind, subject, _callee, position in events:
        if kind == ATEXIT:
            if subject.object and _unmarked(subject.object) in stored:
                yield subject.object
        elif type(subject) is not str:
            continue
        elif kind == WRITE:
            if position != UPDATE_STORE and _unmarked(subject) not in handed:
                stored.add(_unmarked(subject))
        elif kind in _HANDING:
            handed.add(_unmarked(subject))


_HANDING = frozenset({PASS, PASS_FOREIGN, UNKNOWN_PASS})


def _unmarked(key: str) -> str:
    """A bare address's key without its mark (``@0x10``, ``^0x10`` -> ``0x10``)."""
    return key[1:] if key[:1] in _MARKS else key


def bare_keys_of(events: Iterable[Event]) -> tuple[str, ...]:
    """The bare addresses one function's events name (none in a file with .symtab),
    and, marked ``STORED`` (``!0x…``), those of them it stores to, and ``SINGLE``
    (``=0x…``) those it builds as objects of one byte or tests as guard bytes, and
    the guards it passes to ``__cxa_guard_acquire``: the static a guard guards,
    laid out right after it, is an object of its own; and, marked ``SPAN``
    (``%0x…+16``), those it stores a vector register to, with how many bytes."""
    found: dict[str, None] = {}
    stored: dict[str, None] = {}
    for event in events:
        kind, subject = event[0], event[1]
        if kind == ATEXIT:
            subject = subject.object
        elif kind == FETCH:  # says how code reaches an object, not where one lies
            continue
        if type(subject) is str and subject[:1] in _MARKS:
            found[subject] = None
            if kind == WRITE:
                stored[STORED + subject[1:]] = None
                if event[3] == ONE_BYTE:
                    stored[SINGLE + subject[1:]] = None
                elif event[3] >= WIDE_STORE:
                    stored[f"{SPAN}{subject[1:]}+{event[3]}"] = None
            elif kind in (GUARD_BYTE, GUARD_VARIABLE):
                stored[SINGLE + subject[1:]] = None
    return (*found, *stored)


def settle(effects: Effects, use: PendingUse) -> Effects:
    """``effects`` with its pending passes worked out (those ``use`` answers for);
    the others are taken for what they surely are: addresses.  A pass made before
    any other touch of its global is its first touch where the function uses the
    pointer (a constructor whose code has no name, in a stripped file, called
    before the reads that follow it)."""
    if not effects.pending:
        return effects
    # A global's first touch, by where it comes among the code's first touches.
    touched_at = {key: at for at, (key, _written) in enumerate(effects.first_access)}
    ahead = {pending[0] for pending in effects.pending
             if touched_at.get(pending[0], len(touched_at)) >= pending[5]}
    collector = Collector({}, None)
    collector.reads = dict.fromkeys(effects.reads)
    collector.reads.update(dict.fromkeys(effects.assumed, True))
    collector.writes = dict.fromkeys(effects.writes)
    collector.addresses = dict.fromkeys(effects.addresses)
    collector.passed = dict.fromkeys(effects.passed)
    collector.first = {key: written for key, written in effects.first_access if key not in ahead}
    # Where under a guard each pending pass was is not kept: the first touch anywhere
    # stands for the first under the guard.
    collector.guard_touches = collector.first
    collector.lazy = dict.fromkeys(effects.lazy)
    collector.updates = dict.fromkeys(effects.updates)
    collector.locked = dict.fromkeys(effects.locked)
    collector.changed = dict.fromkeys(effects.changed)
    collector.open_reads = dict.fromkeys(effects.open_reads)
    uses: dict[int, int] = {}
    for number, (symbol, callee, position, foreign, guarded, _touched) \
            in enumerate(effects.pending):
        found = uses[number] = use(symbol, callee, position, foreign) or 0
        collector.guarded = int(guarded)
        collector.pass_on(symbol, found, foreign)
    # In the order of first touch, as before; the touch after a pass that turned out
    # to use nothing is the first again.
    first = {key: collector.first.get(key, written) for key, written in effects.first_access}
    first.update(collector.first)
    touched = set(collector.reads) | set(collector.writes)
    return dataclasses.replace(
        effects, writes=tuple(collector.writes), reads=tuple(collector.reads),
        addresses=tuple(a for a in collector.addresses if a not in touched),
        passed=tuple(collector.passed), first_access=tuple(first.items()),
        pending=(), lazy=tuple(collector.lazy), updates=tuple(collector.updates),
        locked=tuple(collector.locked),
        changed=tuple(collector.changed), assumed=collector.assumed_reads(),
        open_reads=tuple(collector.open_reads),
        raised=tuple(k for k in effects.raised if k not in collector.written_otherwise),
        looked_up_first=looked_up_first(effects.fetch_log, effects.guards, uses))


# -- objects known by address -----------------------------------------------------------
# How far past the nearest address the code takes as a pointer an access in a
# file without symbols is taken to be a member of that object (std::map: 48 bytes).
MEMBER_REACH = 64
# How far a member only ever read, with nothing else to go by, is (a string's size
# and buffer: 8 and 16).
READ_MEMBER_REACH = 32
# Both instruction sets analysed are 64-bit: a pointer member lies a multiple of this
# past its object's start.
POINTER_SIZE = 8


def object_keys(groups: Iterable[Iterable[str]], written: Iterable[str] = (),
                destroyed: Iterable[str] = (), alone: Iterable[str] = (),
                apart: Mapping[int, Collection[int]] = MappingProxyType({}),
                ) -> dict[str, str]:
    """Bare addresses of a file without symbols (``@0x…``, ``^0x…``), each placed in an
    object.  ``groups``: the keys each function touches (``Effects.groups``);
    ``alone``: keys to place that no group need hold; ``apart``: addresses known to be
    no member of the objects that start at the addresses given for them.

    An address belongs to the object starting at the nearest address at or below
    it that code takes as a pointer (within ``MEMBER_REACH``) only if some one
    function touches both it and that object's start, and every function that
    stores to it also stores to that start or takes it as a pointer, and some
    function that stores to the start (if any does) touches that address or one
    past it: a constructor writes a string's pointer, size and buffer together,
    while a counter that happens to lie just past a string is bumped by
    functions that never touch the string (LLVM's command-line options each
    bump one, the string's own TU too), a global just past another is set from
    it by an initializer that only reads it, and one just past a registry is
    set by the initializer that registers into it, which the registry's own
    constructor never touches.  An address no code writes
    (``written``: the keys any code writes or builds) is read only, as a member
    read apart from the rest is (a string's size at +8, its constructor being
    another library's code): it joins the object within ``READ_MEMBER_REACH``.
    An address only read past the last store the object's builder makes before
    it goes on to the next object it takes the address of is not joined either
    (open3d's initializers build rows of 16-byte objects; another reads what
    lies between two of them).
    Any other address is an object of its own: splitting one object in two can
    only repeat a finding, taking two for one invents them.  Other keys are left
    out (unchanged).

    An address the code reads a pointer from and dereferences is no member of an
    object it lies a number of bytes past that is no multiple of a pointer's
    size: a pointer member is aligned within its object (a nifty counter's
    one-byte init object at an odd address, a pointer global 23 bytes past it).

    Worked on the whole table at once (a big stripped library has 100,000 such
    keys): one sorted list of the anchors, and the groups consulted only for the
    few addresses that fall just past one.
    """
    marked: list[list[str]] = []
    stored: list[frozenset[int]] = []  # per group: the addresses it stores to
    # Objects of one byte: nothing past their start is theirs, nor are they members of
    # what lies below (a guard byte just past the string it guards).
    singles: set[int] = set()
    spans: dict[int, int] = {}  # where a vector register was stored -> how many bytes
    pointers: set[int] = set()  # addresses read as pointers and dereferenced
    for keys in groups:
        marked.append([key for key in keys if key[:1] in _MARKS])
        pointers.update(_dereferenced(keys))
        stored.append(frozenset(int(key[1:], 16) for key in keys if key[:1] == STORED))
        singles.update(int(key[1:], 16) for key in keys if key[:1] == SINGLE)
        note_spans(keys, spans)
    found = dict.fromkeys(key for keys in marked for key in keys)
    alone = list(alone)
    found.update(dict.fromkeys(key for key in alone if key[:1] in _MARKS))
    pointers.update(_dereferenced(alone))
    addresses = {key: int(key[1:], 16) for key in found}
    # Each group's addresses, worked out once for both uses below.
    pieces = [frozenset(map(addresses.__getitem__, keys)) for keys in marked]
    anchors = sorted({address for key, address in addresses.items() if key[0] == ANCHOR})
    anchors = _object_starts(anchors, marked, pieces, addresses,
                             {int(key[1:], 16) for key in destroyed if key[:1] in _MARKS},
                             singles)
    starts = _nearest_starts(anchors, addresses, singles)
    # Only an address just past a start needs the groups that hold it.
    near = [(key, address, start) for (key, address), start
            in zip(addresses.items(), starts, strict=True)
            if start != address and start not in singles and address not in singles
            and not (address in pointers and (address - start) % POINTER_SIZE)
            and start not in apart.get(address, ())]
    wanted = {address for _key, address, _start in near}
    by_address = _groups_holding(wanted, pieces)
    stored_by = _groups_storing(wanted, marked, addresses, stored)
    near_starts = {start for _key, _address, start in near}
    reach = _builders_reach(near_starts, pieces, stored)
    built = _built_extents(near_starts, marked, addresses, stored)
    builders_stores = _stores_of_builders(near_starts, pieces, stored)
    changed = {addresses[key] if key in addresses else int(key[1:], 16)
               for key in written if key[:1] in _MARKS}
    # Each address an object of its own (made in C), then those just past a start that
    # belong to its object moved into it.
    placed = dict(zip(addresses, map(_UNMARKED, addresses), strict=True))
    for key, address, start in near:
        together = any(start in piece for piece in by_address.get(address, ())) \
            and all(start in piece or _sets_members(piece, start, builders_stores)
                    for piece in stored_by.get(address, ())) \
            and reach.get(start, address) >= address
        if together or not (address in changed or address - start >= READ_MEMBER_REACH
                            or built.get(start, address) < address):
            placed[key] = f"{start:#x}"
    if spans:
        _place_in_spans(placed, addresses, spans, singles)
    return placed


def note_spans(keys: Iterable[str], spans: dict[int, int]) -> None:
    """Each store of a vector register among ``keys`` (``%0x…+N``) into ``spans``: where
    it was stored -> the most bytes one such store wrote there."""
    for key in keys:
        if key[:1] == SPAN:
            at, _, width = key[1:].partition("+")
            start = int(at, 16)
            spans[start] = max(spans.get(start, 0), int(width))


def _dereferenced(keys: Iterable[str]) -> Iterator[int]:
    """The bare addresses of ``keys`` that code reads a pointer from and follows
    (``*@0x…``)."""
    return (int(key[2:], 16) for key in keys
            if key[:1] == POINTEE and key[1:2] in _MARKS)


def with_pointees(keys: dict[str, str], candidates: Iterable[str]) -> dict[str, str]:
    """``keys`` (``object_keys``) with what each placed global points to following the
    global: ``*@0x…`` placed as ``*`` and the global's new key (``POINTEE``), for
    those of ``candidates`` that are such keys."""
    keys.update({key: POINTEE + keys[key[1:]] for key in candidates
                 if key[:1] == POINTEE and key[1:] in keys})
    return keys


def _place_in_spans(placed: dict[str, str], addresses: dict[str, int],
                    spans: dict[int, int], singles: set[int]) -> None:
    """Each address left an object of its own that lies inside the bytes one vector
    register's store wrote, placed in the object that store wrote to (a table's last
    element, which gcc -O2 fills with one ``movaps`` and another TU reads): one
    instruction writes one object, at most."""
    starts = sorted(spans)
    where = {address: key for key, address in addresses.items()}
    for key, address in addresses.items():
        if placed[key] != f"{address:#x}" or address in singles:
            continue
        k = bisect_right(starts, address - 1) - 1  # the nearest store below it
        if k >= 0 and address < starts[k] + spans[starts[k]]:
            below = where.get(starts[k])
            placed[key] = placed[below] if below is not None else f"{starts[k]:#x}"


def _nearest_starts(anchors: list[int], addresses: dict[str, int],
                    singles: Collection[int]) -> list[int]:
    """For each key's address, the nearest object start at or below it within
    ``MEMBER_REACH`` with no object of one byte (``singles``) between, else the
    address itself: objects do not overlap, and a guard byte lies past the static
    it guards (a list head laid out past an inline variable and its guard)."""
    between = sorted(singles)
    starts = []
    for address in addresses.values():
        k = bisect_right(anchors, address) - 1
        if k < 0 or address - anchors[k] >= MEMBER_REACH:
            starts.append(address)
            continue
        start = anchors[k]
        j = bisect_right(between, start)
        starts.append(address if j < len(between) and between[j] < address else start)
    return starts


def _groups_holding(wanted: set[int], pieces: list[frozenset[int]],
                    ) -> dict[int, list[frozenset[int]]]:
    """Each of the ``wanted`` addresses -> the groups of more than one address that hold it
    (a group of one address is evidence of nothing)."""
    by_address: dict[int, list[frozenset[int]]] = {}
    for piece in pieces:
        if len(piece) > 1:
            for address in piece & wanted:
                by_address.setdefault(address, []).append(piece)
    return by_address


def _groups_storing(wanted: set[int], marked: list[list[str]], addresses: dict[str, int],
                    stored: list[frozenset[int]]) -> dict[int, list[frozenset[int]]]:
    """Each of the ``wanted`` addresses -> what each group that stores to it builds: the
    addresses it stores to and those it takes as pointers."""
    by_address: dict[int, list[frozenset[int]]] = {}
    for keys, stores in zip(marked, stored, strict=True):
        hit = stores & wanted
        if not hit:
            continue
        built = stores | {addresses[key] for key in keys if key[0] == ANCHOR}
        for address in hit:
            by_address.setdefault(address, []).append(built)
    return by_address


def _stores_of_builders(starts: set[int], pieces: list[frozenset[int]],
                        stored: list[frozenset[int]]) -> dict[int, set[int]]:
    """Each of ``starts`` -> the addresses the groups that touch it store to."""
    found: dict[int, set[int]] = {}
    for piece, stores in zip(pieces, stored, strict=True):
        for start in piece & starts:
            found.setdefault(start, set()).update(stores)
    return found


def _sets_members(piece: frozenset[int], start: int, builders_stores: dict[int, set[int]],
                  ) -> bool:
    """Whether a group that stores past ``start`` without touching it sets members of the
    object there: it stores to two or more addresses within ``MEMBER_REACH`` past it, and
    the code that touches the start stores to each of them too (a std::map's ``clear``
    resets its header, never the empty comparator the map starts with).  A counter
    bumped just past a string, or a global next to a registry set by the code that
    registers, is one address, or one that the object's own code never stores to."""
    near = {address for address in piece if start < address < start + MEMBER_REACH}
    return len(near) >= 2 and near <= builders_stores.get(start, set())


def _builders_reach(wanted: set[int], pieces: list[frozenset[int]],
                    stored: list[frozenset[int]]) -> dict[int, int]:
    """Each of the ``wanted`` starts that some group stores to -> the highest address
    such a group touches: how far the object's constructor shows it extends.  Where
    no group stores to the start itself (a std::map's empty comparator comes
    first, its header after), the groups that store to the lowest address past it
    within ``MEMBER_REACH`` stand for its constructor (the map's, not an
    initializer that sets the flag lying just past it)."""
    builders = _builders_marks(wanted, stored)
    reach: dict[int, int] = {}
    for piece, stores in zip(pieces, stored, strict=True):
        hit = builders.keys() & stores
        if hit:
            highest = max(piece)
            for start in (start for mark in hit for start in builders[mark]):
                reach[start] = max(reach.get(start, highest), highest)
    return reach


def _builders_marks(starts: set[int], stored: list[frozenset[int]]) -> dict[int, list[int]]:
    """The address a group stores to that makes it a builder -> the starts it builds:
    each of ``starts`` some group stores to, else the lowest address past it within
    ``MEMBER_REACH`` that one does (none: left out)."""
    every = set().union(*stored)
    addresses: list[int] | None = None  # sorted, once a start no group stores to needs it
    marks: dict[int, list[int]] = {}
    for start in starts:
        if start in every:
            marks.setdefault(start, []).append(start)
            continue
        addresses = addresses if addresses is not None else sorted(every)
        k = bisect_right(addresses, start)
        if k < len(addresses) and _member_reach(start, addresses[k]):
            marks.setdefault(addresses[k], []).append(start)
    return marks


def _built_extents(wanted: set[int], marked: list[list[str]], addresses: dict[str, int],
                   stored: list[frozenset[int]]) -> dict[int, int]:
    """Each of the ``wanted`` starts that some group stores to -> the highest address
    such a group stores to at or past it before the next address the group takes
    as a pointer: where the object's builder stops before it builds the next one
    (one initializer building a row of 16-byte objects skips what lies between
    two of them).  A group whose only store is the start it takes as a pointer
    hands the object to code that builds it (a string's constructor, another
    library's): that says nothing of where the object ends."""
    extents: dict[int, int] = {}
    for keys, stores in zip(marked, stored, strict=True):
        hit = stores & wanted
        if not hit:
            continue
        taken = sorted({addresses[key] for key in keys if key[0] == ANCHOR})
        ordered = sorted(stores)  # the start is one of them: a store at or past it
        for start in hit:
            k = bisect_right(taken, start)
            below = bisect_left(ordered, taken[k]) if k < len(taken) else len(ordered)
            top = ordered[below - 1]
            if top == start and k and taken[k - 1] == start:
                continue  # built by the code it is handed to
            extents[start] = max(extents.get(start, top), top)
    return extents


def _object_starts(anchors: list[int], marked: list[list[str]], pieces: list[frozenset[int]],
                   addresses: dict[str, int], destroyed: set[int],
                   singles: set[int]) -> list[int]:
    """The anchors that start objects.  One within ``MEMBER_REACH`` past another is that
    object's member taken as a pointer (a map's header handed to the insertion)
    when some function accesses it as a member, without taking it as a pointer,
    together with the object below; unless its own destructor is registered
    (``destroyed``: two strings side by side stay two), or either is an object
    of one byte (``singles``).  Code that takes both as
    pointers (a -flto initializer building neighbouring globals) is no evidence.
    ``marked``: each group's keys of bare addresses, ``pieces`` their addresses;
    ``addresses``: each key's address (``object_keys``)."""
    anchored = set(anchors)
    members: dict[int, list[frozenset[int]]] = {}  # only anchors are ever looked up
    for keys, touched in zip(marked, pieces, strict=True):
        if anchored.isdisjoint(touched):
            continue
        taken = {addresses[key] for key in keys if key[0] == ANCHOR}
        for key in keys:
            address = addresses[key]
            if key[0] == BARE and address not in taken and address in anchored:
                members.setdefault(address, []).append(touched)
    starts: list[int] = []
    for address in anchors:
        if starts and address - starts[-1] < MEMBER_REACH and address not in destroyed \
                and starts[-1] not in singles and address not in singles \
                and any(starts[-1] in touched for touched in members.get(address, ())):
            continue
        starts.append(address)
    return starts


# Keys of addresses in a file without symbols, before they are placed in objects:
# an address accessed, and one the code takes as a pointer.  In a function's group
# only: an address it stores to (``bare_keys_of``).
BARE, ANCHOR, STORED, SINGLE, SPAN = "@", "^", "!", "=", "%"
_MARKS = (BARE, ANCHOR)
_UNMARKED = itemgetter(slice(1, None))  # "@0x10" -> "0x10"


def _raised(effects: Effects, keys: dict[str, str], raised: tuple[str, ...]) -> tuple[str, ...]:
    """The flags raised once keys of one object are one: only where each of its keys
    was (a map's header holds its own address, a flag's store, and zeros: the map
    is no flag)."""
    was = set(effects.raised)
    otherwise = {keys.get(key, key) for key in effects.writes if key not in was}
    return tuple(key for key in raised if key not in otherwise)


def effects_keys(effects: Effects) -> Iterator[str]:
    """Every key of a global ``effects`` mentions."""
    yield from effects.reads
    yield from effects.writes
    yield from effects.addresses
    yield from effects.passed
    yield from (p[0] for p in effects.pending)
    yield from (r.object for r in effects.atexit if r.object)


def rekeyed(effects: Effects, keys: dict[str, str]) -> Effects:
    """``effects`` with its globals known by ``keys`` (old -> new; the rest unchanged);
    two old keys of one object become one, first touch first."""
    logged = (entry[1] for entry in effects.fetch_log)
    if not keys or not any(key in keys for key in chain(effects_keys(effects), logged)):
        return effects

    def each(items: Iterable[str]) -> tuple[str, ...]:
        items = tuple(items)
        return tuple(dict.fromkeys(map(keys.get, items, items)))  # keys.get(k, k), in C

    first: dict[str, bool] = {}
    # How many globals were touched first before each place in the old order, once two
    # keys of one object are one (where a pending pass comes in the new order).
    placed = [0]
    for key, written in effects.first_access:
        first.setdefault(keys.get(key, key), written)
        placed.append(len(first))
    reads, writes = each(effects.reads), each(effects.writes)
    touched = set(reads) | set(writes)
    log = tuple((what, keys.get(key, key), n) for what, key, n in effects.fetch_log)
    # Two keys of one object: its read is assumed only if each key's read was.
    assumed = set(effects.assumed)
    seen = {keys.get(key, key) for key in effects.reads if key not in assumed}
    return dataclasses.replace(
        effects, reads=reads, writes=writes,
        addresses=tuple(a for a in each(effects.addresses) if a not in touched),
        passed=each(effects.passed), first_access=tuple(first.items()),
        atexit=tuple(dataclasses.replace(r, object=keys.get(r.object, r.object))
                     if r.object else r for r in effects.atexit),
        pending=tuple((keys.get(p[0], p[0]), *p[1:5], placed[p[5]]) for p in effects.pending),
        lazy=each(effects.lazy), guards=each(effects.guards), updates=each(effects.updates),
        locked=each(effects.locked),
        open_reads=each(effects.open_reads), leading_reads=each(effects.leading_reads),
        stamped=each(effects.stamped),
        changed=each(effects.changed), raised=_raised(effects, keys, each(effects.raised)),
        built_by_registrar=each(effects.built_by_registrar), groups=(),
        # Placed, a member is its object: worked out again, each key the object's.
        looked_up_first=looked_up_first(log, each(effects.guards)), fetch_log=log,
        assumed=tuple(key for key in each(effects.assumed) if key not in seen))
