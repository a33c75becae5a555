"""The sweep over one function's machine code, whatever the instruction set.

A ``FunctionWalk`` decodes one function (capstone) in address order and
tracks, within straight-line code and across forward branches, which
registers (and which stack slots) hold a known address: ``lea reg,
[rip+X]``, ``adrp``+``add``, an immediate, a GOT load (``mov reg,
[rip+slot]``, ``adrp``+``ldr``), a copy of one of those, or, in a parameter
sweep, one of the function's own pointer parameters.  Each memory access
through such a register, each call and what it is passed, becomes an event
of the function's ``FunctionSummary``.

Loading a global's address (from the GOT, or with ``lea``/``adrp``) is not
a read: only a load or store through the address touches the object, and
a pointer handed to a call is what that call does with it.

Subclasses, one per instruction set (``x86_64.py``, ``aarch64.py``), turn
mnemonics into these steps.  They read capstone's printed text (mnemonic and
operand string, from ``disasm_lite``): each one's docstring lists the forms
it relies on, and ``tests/test_effects_corpus.py`` pins capstone's output
for them and the events derived from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from elfpatch.analysis.effects.addresses import AddressIndex, GotEntry, printable_text
from elfpatch.analysis.effects.bits import Bits, exactly, selected
from elfpatch.analysis.effects.dying import (
    DIES,
    LIVES,
    Stretches,
    StretchMap,
    drop_events,
    kept_events,
)
from elfpatch.analysis.effects.fetches import with_resumes
from elfpatch.analysis.effects.names import (
    ALLOCATORS,
    ATEXIT_FUNCTIONS,
    FORMAT_POSITIONS,
    GUARD_FUNCTIONS,
    HOOK_FUNCTIONS,
    IOS_INIT_CONSTRUCTORS,
    NEVER_MINUS_ONE,
    argument_registers,
    c_pointer_use,
    fatal_message,
    format_arguments,
    is_constructor,
    never_returns,
    runs_only_contended,
)
from elfpatch.analysis.effects.paths import Paths, condition_holds
from elfpatch.analysis.effects.quiet import QuietBytes
from elfpatch.analysis.effects.summary import (
    ADDRESS,
    ANCHOR,
    ATEXIT,
    BARE,
    CALL,
    FETCH,
    FRESH_STORE,
    GUARD,
    GUARD_BYTE,
    GUARD_VARIABLE,
    HOOK,
    KEYED,
    MEMBER_REACH,
    MEMORY_WORDS,
    ONE_BYTE,
    ONE_STORE,
    PASS,
    PASS_FOREIGN,
    POINTEE,
    QUIET_AT_LOAD,
    READ,
    RESULT_POSITION,
    STAMP,
    UNKNOWN_PASS,
    UPDATE_STORE,
    WIDE_STORE,
    WRITE,
    ZERO_STORE,
    AtExit,
    Constants,
    FunctionSummary,
    GuardKey,
    KeyedCall,
    StopReason,
    function_key,
    memory_constant,
    memory_fact,
    unfollowed_use,
)

if TYPE_CHECKING:
    from capstone import Cs

    from elfpatch.elf.file import ElfFile

class Value(NamedTuple):
    """What a register (or a stack slot) is known to hold."""

    address: int | None = None  # an address: lea/adr, adrp+add, an immediate
    got: GotEntry | None = None  # the address of got.symbol, loaded from its GOT slot
    page: bool = False  # an adrp page whose low 12 bits are still to be added
    parameter: int | None = None  # the function's pointer parameter at this position
    exact: bool = True  # False: somewhere inside the object, at an offset not known
    # A switch's jump table: an entry loaded from the table at this address, and
    # then the entry added to that address (the case to jump to).
    table: int | None = None
    switch: int | None = None
    # A number that is not an address (an immediate, xor reg, reg): a constant a
    # caller passes selects a callee's switch case or branch (``decide``).
    constant: int | None = None
    case: int | None = None  # the jump table's entry the switch's index selects
    # What an import returned, when that says which values it cannot be
    # (``names.NEVER_MINUS_ONE``) or that nothing else points there yet
    # (``names.ALLOCATORS``): the import's name.
    returned_by: str | None = None
    # A pointer read from a global (its key): what the code reads and writes through
    # it is the object that global points to, keyed ``*key`` (``POINTEE``).
    pointee: str | None = None
    # An address on the stack: this many bytes past where the stack pointer points.
    stack: int | None = None


State = dict[str, Value]
# One decoded instruction: (address, size, mnemonic, operands), as capstone's disasm_lite.
Instruction = tuple[int, int, str, str]


def named_address(value: Value) -> int | None:
    """The address ``value`` names exactly: its own (an adrp page's start, the access
    adding the rest), or, loaded from a GOT slot, the definition there when this
    object makes it and it is no thread-local."""
    entry = value.got
    if entry is not None:
        return entry.definition if entry.defined and not entry.is_tls else None
    return value.address if value.exact else None


def never_null(value: Value | None) -> bool:
    """Whether ``value`` is the exact address of something of this object (computed,
    or loaded from a GOT slot whose symbol it defines): a pointer stored as a flag
    that says "set" (``if (head.next) return; …; head.next = &end;``)."""
    if value is None or value.page or value.table is not None or not value.exact:
        return False
    if value.got is not None:
        return value.got.defined and not value.got.weak_undefined \
            and value.got.symbol is not None
    return value.address is not None


def never_null_when_allocated(value: Value) -> bool:
    """Whether ``value`` is what an allocator just returned: NULL only when memory has
    run out (operator new throws instead), so what the code does then is no finding
    of start-up's.  A statically linked C++ runtime's ``__cxa_allocate_exception``
    takes its emergency pool (and the pool's lock, built by the runtime's own
    initializer) only when malloc fails: 11 of warp's ``warp.so``'s 632 false
    init-order errors."""
    return value.returned_by in ALLOCATORS


# Values are built for nearly every instruction that names an address or a number;
# made from the whole tuple, every field in order, they cost a quarter of what the
# keyword call does.
_new_tuple = tuple.__new__


# How many bytes a std::string takes (libstdc++: pointer, length, 16-byte buffer).
_STRING_SIZE = 32


def address_value(address: int | None) -> Value:
    """``Value(address=address)``."""
    return _new_tuple(Value, (address, None, False, None, True, None, None, None, None, None,
                              None, None))


def constant_value(number: int) -> Value:
    """``Value(constant=number)``."""
    return _new_tuple(Value, (None, None, False, None, True, None, None, number, None, None,
                              None, None))


def got_value(entry: GotEntry) -> Value:
    """``Value(got=entry)``."""
    return _new_tuple(Value, (None, entry, False, None, True, None, None, None, None, None,
                              None, None))


def pointee_value(key: str) -> Value:
    """``Value(pointee=key)``: a pointer read from the global ``key``."""
    return _new_tuple(Value, (None, None, False, None, True, None, None, None, None, None,
                              key, None))


def intersect(a: State, b: State) -> State:
    kept = {reg: value for reg, value in a.items() if b.get(reg) == value}
    if len(kept) < len(a):
        # A pointer read from a global one way, just allocated and stored there the
        # other (``if (!r) r = new R;``): what the global points to, either way.
        for reg, value in a.items():
            other = b.get(reg)
            if value.pointee is not None and other is not None and reg not in kept \
                    and other.pointee == value.pointee:
                kept[reg] = pointee_value(value.pointee)
    return kept


# The flags of the last compare of a known number: (where the instruction reading
# them must be, the number, what it was compared with, its width in bits, whether a
# branch on them was already decided).
Flags = tuple[int, int, int, int, bool]


class Target(NamedTuple):
    name: str | None
    follow: int | None  # address of this object's code to follow
    external: bool  # called through the PLT/GOT


class FlagTest(NamedTuple):
    """Where the code goes on a flag's test against zero (``flag_paths``)."""

    set: int  # when the flag is set
    unset: int  # when it is zero
    pointer: bool  # the test is of a whole 64-bit word (a pointer), not of a byte or bit


class Analyzer(Protocol):
    """What a walk asks of the analyzer that runs it (``analyzer.EffectsAnalyzer``): said
    here, so that the walks need not import the analyzer that imports them."""

    elf: ElfFile
    index: AddressIndex
    fixed_addresses: bool  # code may hold data addresses as immediates
    failing_tails: dict[int, bool]  # ``FunctionWalk.fails_at``, known so far
    quiet: QuietBytes | None  # globals no code run at load writes, once known

    @property
    def disassembler(self) -> Cs: ...

    @property
    def detailed(self) -> Cs: ...

    def in_image(self, address: int) -> bool: ...

    def code_target(self, address: int) -> Target: ...

    def registers_written(self, callee: Target) -> frozenset[str] | None: ...

    def returned_global(self, function: int, constants: Constants = ()) -> int | str | None: ...

    def registers_at_exit(self, function: int) -> bool: ...

    def returned_constant(self, function: int) -> int | None: ...


class FunctionWalk:
    """One linear sweep over one function; subclasses decode one instruction set."""

    ARGUMENTS: tuple[str, ...] = ()
    argument_set: frozenset[str] = frozenset()  # ARGUMENTS, for membership tests
    RESULT_POINTER: str | None = None  # where a by-value result's address is passed, if apart
    RESULT: str | None = None  # the register a function returns a pointer in
    STACK_POINTER = "sp"  # the register slot keys name (``[sp+16]``)
    CALLER_SAVED: frozenset[str] = frozenset()
    CALL_WRITES: frozenset[str] = frozenset()  # registers the call instruction itself sets
    STOPS: frozenset[str] = frozenset()  # returns, traps: never fall through
    BRANCH_SIZES: frozenset[int] = frozenset()  # sizes of a conditional branch, in bytes
    KEEPS_FLAGS: frozenset[str] = frozenset()  # mnemonics that never set the flags
    BRANCH_INITIALS = ""  # the first letters of every direct branch's mnemonic
    # mnemonic -> handler(walk, address of the next instruction, operands)
    HANDLERS: ClassVar[dict[str, Callable[[Any, int, str], bool]]] = {}

    def __init__(self, analyzer: Analyzer, start: int, code: memoryview,
                 sized: bool, parameters: bool = False, constants: Constants = (),
                 pruned: frozenset[int] = frozenset()) -> None:
        self.analyzer, self.index = analyzer, analyzer.index
        self.start, self.code, self.sized = start, code, sized
        self.end = start + len(code)
        self.summary = FunctionSummary()
        self.events = self.summary.events
        # A parameter sweep starts knowing that each argument register holds a parameter.
        self.state: State = {register: Value(parameter=position) for position, register
                             in self.parameter_registers()} if parameters else {}
        self.pending: dict[int, State] = {}  # forward branch target -> state on arrival
        # Where the code that builds a function-local static starts, when it is laid
        # out further down (``built_later``) -> the guard taken there.
        self.guarded_from: dict[int, GuardKey] = {}
        # Guards taken by a function known by its code alone (``guard_by_code``).
        self.guards_taken: set[int] = set()
        # Detours swept where they run (``detour``): first address -> the address after.
        self.skipped: dict[int, int] = {}
        self.rejoined: dict[int, State] = {}  # where a detour jumps back to -> its state
        self._where: dict[int, int] | None = None  # ``index_of``, built on first need
        self.stack_slots = False  # whether any stack slot holds a known value
        # Bytes stored on the stack as numbers since the last join, call or move of the
        # stack pointer (offset past it -> byte): a string key built in place
        # (``stack_string``).
        self.stack_bytes: dict[int, int] = {}
        # Numbers in registers the state keeps none for (``number``: only argument
        # registers'), until they are written or anything but a move runs: what a
        # store of a register puts on the stack.
        self.numbers: dict[str, int] = {}
        # Strings a call built on the stack from a literal (offset -> key), until the
        # next call; and the one the call being made builds (``string_built``).
        self.stack_strings: dict[int, str] = {}
        self.built: tuple[int, str] | None = None
        # The stretch of each call through a register (tails swept again after the
        # stretches are judged add theirs to the summary anew: ``tails_again``).
        self.indirect_calls: list[int] = []
        self.unreached = False  # no forward path reaches the code swept now
        # A walk that knows constant arguments decides the branches they select
        # (``paths.Paths``); any other walk keeps every path.
        self.paths = Paths(pruned) if constants else None
        # Numbers known in part (``bits``): in registers the code masked or set bits of;
        # in global memory its own stores wrote (byte's address -> its bits, packed:
        # ``mask << 8 | value``), until a call, a join or a store that may land
        # anywhere; and, in a walk a caller passed them to, in what an argument
        # register points to (register -> byte offset -> packed bits), until the
        # register is written, a call, a join or a store.
        self.bits: dict[str, Bits] = {}
        self.memory_bits: dict[int, int] = {}
        self.through: dict[str, dict[int, int]] = {}
        # Registers loaded through an argument register (``ldrh w8, [x0, #10]``) -> the
        # bytes loaded, (parameter, offset, width): a test of one may be decided by
        # what a caller stored there (``FunctionSummary.tests_through``).
        self.loaded_through: dict[str, tuple[int, int, int]] = {}
        # Globals no code run at load writes, read as the loader leaves them (in a walk
        # of a call at load that knows them, ``QUIET_AT_LOAD``): never forgotten.
        self.quiet: QuietBytes | None = None
        for entry in constants:
            fact = memory_fact(entry)
            if entry == QUIET_AT_LOAD:
                self.quiet = analyzer.quiet
            elif fact is None:
                self.state[self.ARGUMENTS[entry[0]]] = constant_value(entry[1])
            else:
                parameter, offset, known = fact
                _store_bits(self.through.setdefault(self.ARGUMENTS[parameter], {}),
                            offset, 8, known)
        self.flags: Flags | None = None
        self.instructions: list[tuple[int, int, str, str]] = []  # a sized function's
        self.position = 0  # the index of the instruction being read
        # (index, target) of each branch back in a sized function, found on first need.
        self.backward: list[tuple[int, int]] | None = None
        # Its stretches of straight code, to drop what those that die touch (``dying``).
        self.stretches = Stretches()
        # Where a compare that never finds its operands equal ends (``never_taken``):
        # an import's result with -1, a number known not to be zero with zero.
        self.never_equal: int | None = None

    @staticmethod
    def may_return_address(code: bytes) -> bool:
        """Whether the code loads a global's address into the result register
        somewhere (a quick look at the bytes, before reading what it returns)."""
        return False

    @staticmethod
    def tests_guard_byte(code: bytes) -> bool:
        """Whether the code loads a byte the way a function-local static's guard is
        tested (a quick look at the bytes): an accessor that builds its static."""
        return False

    @classmethod
    def parameter_registers(cls) -> list[tuple[int, str]]:
        """(position, register) of each pointer a caller may pass."""
        found = list(enumerate(cls.ARGUMENTS))
        if cls.RESULT_POINTER is not None:
            found.append((RESULT_POSITION, cls.RESULT_POINTER))
        return found

    # -- the sweep --------------------------------------------------------
    def run(self) -> FunctionSummary:
        # One pass: a loop head gets the state it has on entry, so what is
        # reported holds on the first iteration; forward branches merge.
        reached, falls, pending, sized = self.start, True, self.pending, self.sized
        padding = False
        events, first = self.events, -1  # where the instruction of the first event is
        guarded_from, skipped, skip_to = self.guarded_from, self.skipped, 0
        handlers, other, paths, stretches = self.HANDLERS, self.other, self.paths, self.stretches
        decoded: Iterable[tuple[int, int, str, str]] = self.decode()
        if sized:  # kept, for what the code after a place writes (``orphan_state``)
            decoded = self.instructions = list(decoded)
        for position, (address, size, mnemonic, operands) in enumerate(decoded):
            if address < skip_to or (skipped and address in skipped):
                # Swept already, where it runs (``detour``).
                skip_to = max(skip_to, skipped.pop(address, 0))
                falls, reached = False, address + size
                continue
            if paths is not None:
                if address in paths.pruned:  # only a path the constants rule out gets here
                    falls, reached = False, address + size
                    continue
                self.expire_flags(address)
                paths.instruction(address)
            if not falls or address in pending:
                self.position = position  # only entering code looks at what came before
                self.enter(address, falls and not padding)
                stretches.start(address, len(events), falls)
            elif stretches.cut:
                stretches.start(address, len(events), True)
            if guarded_from and address in guarded_from:
                events.append((GUARD, True, guarded_from.pop(address), 0))
            # Alignment padding after a jump: dead, it must not weaken what the
            # code it falls into is entered with.
            padding = (not falls or padding) and _is_padding(mnemonic, operands)
            handler = handlers.get(mnemonic)
            if handler is not None:
                falls = handler(self, address + size, operands)
            else:
                falls = other(address, size, mnemonic, operands)
            if paths is not None:
                paths.falls(address + size if falls else None)
            if first < 0 and events and events[-1][0] != ADDRESS:
                first = address  # the first read or write, not an address taken before
            reached = address + size
            if not sized and not falls and not any(t > address for t in pending):
                break
        else:
            if sized and reached < self.end:  # undecodable bytes
                self.summary.stop_here(StopReason.UNKNOWN_INSTRUCTION)
        stretches.close(len(events), reached)
        stretch_of = stretches.stretch_of()
        leads, dead = self.dying_stretches()
        if dead is not None:
            stretch_of = self.drop_dying(dead, stretch_of)
            if self.indirect_calls and all(0 <= at < len(dead) and dead[at]
                                           for at in self.indirect_calls):
                # Only code dropped calls through a register (a landing pad destroying
                # a std::function): the code that runs is all followed.
                self.summary.stopped.pop(StopReason.INDIRECT_CALL, None)
        if sized and paths is None and (pending or self.rejoined):
            self.tails_again()
        # Worked out after the tails are swept again (that adds branches), at most once
        # for what follows: the stretches stay as they are.
        successors = cache(lambda: self.stretches.successors(self.inside))
        if events:
            self.guard_by_flag(first, stretch_of)
            self.guard_by_counter(first, stretch_of)
            self.drop_capability_check(stretch_of)
            with_resumes(events, stretch_of, successors)
        self.map_stretches(stretch_of, leads, dead, successors)
        return self.summary

    def dying_stretches(self) -> tuple[list[list[int] | None] | None, list[bool] | None]:
        """Where each stretch leads (when some call may turn out never to return, or a
        stretch dies, or code is entered only by unwinding), and which die (None:
        none)."""
        stretches = self.stretches
        unentered = stretches.unentered(stretches.successors(self.inside)) \
            if self.jumps_followed else None
        dies = stretches.any_dies or bool(stretches.never) or bool(unentered)
        if not dies and not self.summary.callees:
            return None, None
        leads = stretches.leads(self.tail_fails, self.inside)
        dead = stretches.dead(self.tail_fails, self.inside, leads, unentered) if dies else None
        return leads, dead if dead is not None and any(dead) else None

    @property
    def jumps_followed(self) -> bool:
        """Whether the sweep followed every jump: then code nothing falls or branches
        into is entered only by unwinding (``dying``)."""
        return StopReason.INDIRECT_JUMP not in self.summary.stopped

    def inside(self, address: int) -> bool:
        return self.start <= address < self.end

    def drop_dying(self, dead: list[bool], stretch_of: list[int]) -> list[int]:
        """What the code on the way to a crash, or entered only by a branch never taken,
        touches is dropped (``dying``); the guards it takes or releases stay.  A callee
        called there alone is not followed.  ``stretch_of`` is returned for the events
        that stay (each event of the sweep has one: nothing else has made any yet)."""
        events = self.events
        kept = kept_events(events, stretch_of, dead)
        if len(kept) == len(events):
            return stretch_of
        called = {function_key(events[n][1], events[n][2]) for n in kept if events[n][0] == CALL}
        for event in events:
            if event[0] == CALL and function_key(event[1], event[2]) not in called:
                self.summary.callees.pop(function_key(event[1], event[2]), None)
        stretch_of = [stretch_of[n] for n in kept]
        events[:] = [events[n] for n in kept]
        return stretch_of

    def map_stretches(self, stretch_of: list[int], leads: list[list[int] | None] | None,
                      dead: list[bool] | None,
                      successors: Callable[[], list[list[int]]]) -> None:
        """What composition needs to drop what leads only into a call that never
        returns, when the function calls any it follows (``dying.StretchMap``;
        ``successors``: the stretches' as they are now, worked out on demand)."""
        events = self.events
        if leads is None or not self.summary.callees:
            return
        calls = [(n, function_key(event[1], event[2])) for n, event in enumerate(events)
                 if event[0] == CALL]
        stretch_of = stretch_of + [-1] * (len(events) - len(stretch_of))
        self.summary.stretch_map = StretchMap(stretch_of, leads, dead or [False] * len(leads),
                                              calls,
                                              successors() if self.jumps_followed else None)

    def tails_again(self) -> None:
        """Code further down that jumps back into a tail already swept (a block laid
        out of line that rejoins the function's last stretch before it returns):
        the tail swept again with what the jump knows, for the stores it makes on
        that path (``*head = next`` when the node removed is the list's first, the
        head's address known only there).  Only tails that run straight to a
        return, with forward branches alone; a loop's branch back is no such jump."""
        back = sorted((target, state) for target, state in {**self.pending,
                                                            **self.rejoined}.items()
                      if self.index_of(target) is not None)[:_TAILS_AGAIN]
        for target, state in back:
            start = self.index_of(target)
            if start is None or not self.runs_to_return(start):
                continue
            self.state, self.pending, self.unreached = dict(state), {}, False
            self.flags, self.guarded_from = None, {}
            falls = True
            for position in range(start, min(start + _TAIL_LENGTH, len(self.instructions))):
                address, size, mnemonic, operands = self.instructions[position]
                if not falls or address in self.pending:
                    self.position = position
                    self.enter(address, falls)
                falls = self.step(address, size, mnemonic, operands)
                if not falls and not any(t > address for t in self.pending):
                    break

    def step(self, address: int, size: int, mnemonic: str, operands: str) -> bool:
        """One instruction read outside ``run``'s own loop (which inlines this for
        speed); False when it never falls through."""
        handler = self.HANDLERS.get(mnemonic)
        return handler(self, address + size, operands) if handler is not None \
            else self.other(address, size, mnemonic, operands)

    def index_of(self, address: int) -> int | None:
        """Where in a sized function's ``instructions`` the one at ``address`` is."""
        if self._where is None:
            self._where = {instruction[0]: n for n, instruction in enumerate(self.instructions)}
        return self._where.get(address)

    def runs_to_return(self, start: int) -> bool:
        """Whether the code from the instruction at index ``start`` reaches a return
        within ``_TAIL_LENGTH`` instructions, branching only forward."""
        ahead = start
        for at, _size, mnemonic, operands in self.instructions[start:start + _TAIL_LENGTH]:
            target = self.branch_target(mnemonic, operands)
            if target is not None and target <= at:
                return False
            if target is not None and self.start <= target < self.end:
                ahead = max(ahead, target)
            if mnemonic in self.STOPS:
                return at >= ahead
        return False

    def guard_by_flag(self, first: int, stretch_of: list[int]) -> None:
        """A hand-made once-only guard: the function first tests a global flag and
        sets it itself, never back to zero (``done = true``, or a pointer set to an
        address).  What it does while the flag is not set happens on its first call
        only, like a function-local static's construction between
        ``__cxa_guard_acquire`` and release: it is marked as guarded by the flag, and
        what it builds is built on first use by whichever caller comes first.  Two
        shapes: the function returns at once when the flag is set (``if (done)
        return; …; done = true;``: all that follows the test is guarded), or only a
        block runs while it is not (``if (!ready) { …; ready = &x; }``, then code
        that runs on every call).  ``first``: where the instruction that reads the
        flag is; ``stretch_of``: each event's stretch, kept in step."""
        events = self.events
        found = self.first_global_read()
        if found is None:
            return
        read, flag = found
        touches = [event for event in events[read + 1:]
                   if event[1] == flag and event[0] != GUARD_BYTE]
        if not touches or any(kind not in (READ, WRITE)
                              or (kind == WRITE and position != ONE_STORE)
                              for kind, _flag, _callee, position in touches):
            return
        test = self.flag_paths(first)
        if test is None:
            return
        if self.returns_at_once(test.set):
            if all(touch[0] == WRITE for touch in touches):
                events.insert(read + 1, (GUARD, True, flag, 0))
                stretch_of.insert(read + 1, -1)
                events.append((GUARD, False, flag, 0))
        elif test.pointer and any(touch[0] == WRITE for touch in touches):
            # Only a pointer: a byte tested and set to 1 in a block is also how gcc
            # guards an inline variable's construction, which each TU makes where its
            # code reaches it (``detour``), in the function that reads it.
            self.guard_block(flag, test.unset, stretch_of)

    def first_global_read(self) -> tuple[int, str] | None:
        """(index, key) of the function's first event when it reads a global (a flag's
        or a count's test), after the address of the object it may be a member of (a
        file without symbols): both at the one instruction.  None otherwise."""
        events = self.events
        read = next((n for n, event in enumerate(events) if event[0] != ADDRESS), None)
        if read is None or events[read][0] != READ or type(events[read][1]) is not str:
            return None
        return read, events[read][1]

    def guard_by_counter(self, first: int, stretch_of: list[int]) -> None:
        """A nifty counter: the function first bumps a global count and goes on only
        when it was zero (``if (count++ == 0) { … }``; ``std::ios_base::Init``'s
        constructor, which every TU that includes ``<iostream>`` calls).  What
        follows runs on the first call only: it is guarded by the count, as
        ``guard_by_flag`` guards what a flag allows.  The count is never set to a
        number in the function (the body may bump it again: libstdc++'s raises it
        past one at the end), and its test sends a count that was not zero straight
        to a return (``counter_tested``).  A stripped C++ runtime linked in has no
        name for it: cuFFT's 470 initializers each call it, and what its first call
        builds was charged to all of them (113 false link-order warnings).
        ``first``: where the instruction that reads the count is."""
        events = self.events
        found = self.first_global_read()
        if found is None:
            return
        read, counter = found
        body = read
        while body < len(events) and events[body][1] == counter \
                and events[body][0] in (READ, WRITE):
            body += 1
        if not any(event[0] == WRITE for event in events[read:body]) \
                or any(event[1] == counter and (event[0] not in (READ, WRITE)
                                                or event[3] in (ZERO_STORE, ONE_STORE))
                       for event in events[body:]) \
                or any(event[0] == GUARD for event in events) or not self.counter_tested(first):
            return
        events.insert(body, (GUARD, True, counter, 0))
        stretch_of.insert(body, -1)
        events.append((GUARD, False, counter, 0))

    def drop_capability_check(self, stretch_of: list[int]) -> None:
        """A helper that reads a flag of the processor's capabilities to choose between
        two ways of doing one atomic operation (``capability_dispatch``): the way it
        takes changes nothing it does, and the flag, which an initializer of the C
        runtime sets (libgcc's ``__aarch64_have_lse_atomics``, linked in after the
        program's objects), is read before that on purpose.  Its reads of the flag
        are left out; ``stretch_of`` kept in step."""
        found = self.first_global_read()
        if found is None or not self.capability_dispatch():
            return
        events, flag = self.events, found[1]
        drop_events(events, stretch_of, {n for n, event in enumerate(events)
                                         if event[0] == READ and event[1] == flag})

    def capability_dispatch(self) -> bool:
        """Whether this function is such a helper; False for an instruction set that
        has none."""
        return False

    def counter_tested(self, first: int) -> bool:
        """Whether the count updated at ``first`` (read whole into a register, or
        exchanged and added) is tested right after, the way taken when it was not zero
        returning at once; False for an instruction set that does not say."""
        return False

    def guard_block(self, flag: str, entry: int, stretch_of: list[int]) -> None:
        """The events of the block that runs only while ``flag`` is not set (entered
        at ``entry``, only from where the flag is read), bracketed by the flag's
        guard when the block sets the flag itself."""
        events = self.events
        reads_flag = {stretch_of[n] for n, event in enumerate(events[:len(stretch_of)])
                      if event[0] == READ and event[1] == flag}
        block = self.stretches.run_only_after(entry, self.inside, reads_flag.__contains__)
        if block is None:
            return
        inside = [n for n, stretch in enumerate(stretch_of) if stretch in block]
        if not any(events[n][:2] == (WRITE, flag) and events[n][3] == ONE_STORE
                   for n in inside):
            return
        runs: list[list[int]] = []  # [first, last] index of each run of the block's events
        for n in inside:
            if runs and runs[-1][1] == n - 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        for low, high in reversed(runs):
            events.insert(high + 1, (GUARD, False, flag, 0))
            stretch_of.insert(high + 1, -1)
            events.insert(low, (GUARD, True, flag, 0))
            stretch_of.insert(low, -1)

    def built_later(self, following: int) -> int | None:
        """Where the code that builds a function-local static starts, when
        ``__cxa_guard_acquire``'s caller branches there, further down, on a nonzero
        result (``test eax, eax; jne build``), and falls through into what runs once
        the static is built: gcc lays the construction out after the rest, and what
        the rest does is not guarded.  None when the construction follows the call
        (or an instruction set that does not say)."""
        branch = self.result_branch(following)
        if branch is None or not branch[0]:
            return None
        return branch[1] if following < branch[1] < self.end else None

    def result_branch(self, following: int) -> tuple[bool, int] | None:
        """(taken when the result is nonzero, where it goes) of the branch on the 32-bit
        result of the call before ``following``, right after it (``test eax, eax;
        jne``); None for anything else (an instruction set that does not say)."""
        return None

    def flag_paths(self, first: int) -> FlagTest | None:
        """Where the code goes when the flag the instruction at ``first`` reads is set,
        and where when it is not, when the next instructions test it against zero
        and branch; None for anything else (an instruction set that does not say)."""
        return None

    def returns_at_once(self, address: int) -> bool:
        """Whether the code at ``address`` returns within a few instructions, touching
        nothing but registers and the stack on the way."""
        return False

    def instructions_at(self, address: int, count: int) -> list[tuple[int, int, str, str]]:
        """The first ``count`` instructions at ``address`` (fewer where the code ends):
        from a sized function's own list when they are in it, else decoded."""
        at = self.index_of(address) if self.sized and self.instructions else None
        if at is not None:
            return self.instructions[at:at + count]
        code = self.index.code_at(address, _STRAIGHT_LINE_BYTES)
        if code is None:
            return []
        found = []
        for instruction in decode_in_chunks(self.analyzer.disassembler, bytes(code), address):
            found.append(instruction)
            if len(found) == count:
                break
        return found

    def decode(self) -> Iterator[tuple[int, int, str, str]]:
        """The instructions, decoded at once when the size is known, else in chunks."""
        engine, code = self.analyzer.disassembler, bytes(self.code)
        if not self.sized:
            return decode_in_chunks(engine, code, self.start)
        # capstone ships no type information: these are disasm_lite's documented tuples.
        instructions: Iterator[tuple[int, int, str, str]] = engine.disasm_lite(code, self.start)
        return instructions

    def enter(self, address: int, falls: bool) -> None:
        """The register state on arrival: fallthrough merged with forward branches.

        Code that only a backward branch (or nothing: padding after a return)
        reaches knows what the loop it may be the body of leaves alone
        (``orphan_state``: nothing, where it is no such loop's), and what falls
        out of it into a forward branch's target is not merged, nor do its
        branches count: that target has the branch's state, as a loop head has
        the state it has on entry (what is reported holds on the first
        iteration, and stack slots, which ``orphan_state`` does not keep, stay
        known after the loop).
        """
        self.forget_stack()  # known on one way in only
        self.numbers.clear()
        if self.bits or self.memory_bits or self.through:
            self.forget_bits()
        incoming = self.pending.pop(address, None)
        if incoming is not None and (not falls or self.unreached):
            self.state, self.unreached = incoming, False
        elif incoming is not None:
            self.state = intersect(self.state, incoming)
        elif not falls:
            orphan = self.orphan_state(address)
            self.state = orphan if orphan is not None else {}
            self.unreached = orphan is None

    def orphan_state(self, address: int) -> State | None:
        """What is known where code neither falls in nor is branched to from above: a
        loop body laid out before its condition (``jmp cond; body: …; cond: … jb
        body``), reached only by a branch back from below.

        Code below is entered from above only through the forward branches still
        pending, and comes back here only through branches back, the last of
        which ends the loop: a register no instruction of the loop writes holds,
        here, what the forward branches into the loop all agree on (the string's
        address the loop fills, that the registration after it needs).  A branch
        from above past the loop's end enters code that never comes back into it
        (a branch back into the loop from there would have made that code part of
        the loop).  Anything else is not known.
        """
        if not self.after_jump_down(address):
            return None
        loop = self.loop_in(self.position, address)
        if loop is None:
            return None
        written, end = loop
        below = [state for target, state in self.pending.items() if address < target <= end]
        if not below:
            return None
        known = below[0]
        for state in below[1:]:
            known = intersect(known, state)
        slots = tuple(key for key in written if key[:1] == "[")  # "[": every slot
        return {key: value for key, value in known.items() if key not in written
                and not (key[:1] == "[" and key.startswith(slots))}

    def after_jump_down(self, address: int) -> bool:
        """Whether the code before ``address`` (past alignment padding) jumps further
        down: the layout of a loop whose condition follows its body."""
        if not self.instructions:  # a function of unknown size: swept as decoded
            return False
        n = self.position - 1
        while n >= 0 and _is_padding(*self.instructions[n][2:]):
            n -= 1
        if n < 0:
            return False
        target = self.branch_target(*self.instructions[n][2:])
        return target is not None and target > address

    def loop_in(self, position: int, address: int) -> tuple[frozenset[str], int] | None:
        """The registers, and the stack slots (``[rsp+16]``; ``[`` for every slot,
        ``[rbp`` for every slot addressed through it), the loop starting at
        ``position`` (at ``address``) may write before it branches back (calls:
        every caller-saved register, no slot: a spill stays, as across any call),
        and the address of its last branch back; None when one of them is not
        known, or nothing branches back.

        The loop ends at the last branch back into it (a branch back from
        further down into code already inside counts too); a stretch that then
        leaves the function (an epilogue restoring registers, a tail call)
        never comes back, and what it writes does not count.
        """
        if self.backward is None:
            initials, branch_target = self.BRANCH_INITIALS, self.branch_target
            self.backward = [(n, target) for n, (at, _size, mnemonic, operands)
                             in enumerate(self.instructions) if mnemonic[0] in initials
                             and (target := branch_target(mnemonic, operands)) is not None
                             and target <= at]
        backs = [(n - position, target) for n, target in self.backward
                 if n >= position and target >= address]
        if not backs:
            return None
        instructions = self.instructions  # from ``position`` on: the loop and what follows
        last, grown = -1, True
        while grown:  # the loop's end, and every branch back into what it holds
            limit = instructions[position + last][0] if last >= 0 \
                else self.pending_above(address)
            grown = False
            for n, target in backs:
                if n > last and target < limit:
                    last, grown = n, True
        written: set[str] = set()
        stretch: set[str] = set()
        for _address, _size, mnemonic, operands in instructions[position : position + last + 1]:
            transfer = self.control_transfer(mnemonic, operands)
            if transfer is not None and transfer[0]:
                stretch |= self.CALLER_SAVED | self.CALL_WRITES
            elif transfer is None and mnemonic not in self.STOPS:
                registers = self.registers_set(mnemonic, operands)
                if registers is None:
                    return None
                stretch.update(registers)
                slots = self.stack_writes(mnemonic, operands)
                stretch.update(slots if slots is not None else ("[",))
            if self.leaves(mnemonic, operands):
                stretch = set()  # never comes back
            elif transfer is not None or self.branch_target(mnemonic, operands) is not None:
                written |= stretch
                stretch = set()
        return frozenset(written | stretch), instructions[position + last][0]

    def pending_above(self, address: int) -> int:
        """The first place below ``address`` that code above it branches to."""
        return min((target for target in self.pending if target > address), default=self.end)

    def leaves(self, mnemonic: str, operands: str) -> bool:
        """A return, or a jump out of the function (a tail call): nothing after it here
        runs next."""
        if mnemonic in self.STOPS:
            return True
        transfer = self.control_transfer(mnemonic, operands)
        return transfer is not None and not transfer[0] and transfer[1] is not None \
            and not self.start <= transfer[1] < self.end

    def branch(self, target: int) -> None:
        """A conditional or in-function branch: its target inherits the current state."""
        self.stretches.branch(target)
        if not self.start <= target < self.end:
            return
        if self.paths is not None:
            # Even from code no forward path reaches: what only it leads to is not
            # ruled out by the constants (``Paths.unreachable``).
            self.paths.branch(target)
        if self.unreached:
            return
        known = self.pending.get(target)
        self.pending[target] = dict(self.state) if known is None \
            else intersect(known, self.state)

    # -- constants: the path a known number selects ---------------------------------
    def number(self, register: str | None, found: int | None) -> None:
        """``register`` holds the number ``found`` (None: not known).  Outside a walk
        that decides, only what a call is passed matters: argument registers."""
        if register is not None and (self.paths is not None or register in self.argument_set):
            self.set(register, constant_value(found) if found is not None else None)
        else:
            self.set(register, None)
            if register is not None and found is not None:
                self.numbers[register] = found

    def compare(self, following: int, register: str | None, other: int | None,
                width: int) -> None:
        """A compare of ``register`` with the number ``other``: remembered, in a walk that
        decides, for the conditional branch right after it."""
        value = self.state.get(register or "") if other is not None else None
        if self.paths is None or value is None or value.constant is None:
            return
        assert other is not None
        self.flags = (following, value.constant, other, width, False)

    def expire_flags(self, address: int) -> None:
        """A compare of a known number whose flags the next instruction does not branch
        on (a conditional move, a set, a branch further on): not decided."""
        if self.flags is not None and self.flags[0] != address:
            if not self.flags[4]:
                self.summary.undecided += 1
            self.flags = None

    def decided(self, condition: str, following: int, target: int) -> bool | None:
        """Whether the conditional branch to ``target`` right after a compare of a known
        number is taken; None when not known (every path is kept)."""
        flags, self.flags = self.flags, None
        if flags is None or self.paths is None or flags[0] != self.paths.current:
            return None
        taken = condition_holds(condition, *flags[1:4])
        if taken is None:
            self.summary.undecided += 1
            return None
        self.summary.decided += 1
        self.paths.drop(following if taken else target)
        if not taken:  # the next branch may test the same flags (je, then jg)
            self.flags = (following, *flags[1:4], True)
        return taken

    def conditional(self, condition: str | None, following: int, target: int) -> bool:
        """A conditional branch: both ways, or the one the constants select.  False when
        the code after it is not reached from here."""
        taken = self.decided(condition, following, target) \
            if condition is not None and self.flags is not None else None
        guard = self.guard_set_behind(following, target) \
            if self.sized and self.instructions else None
        if guard is not None:
            self.guard_byte(guard[0])
        if taken is None and guard is not None and guard[1] == target \
                and self.detour(following, target):
            return True
        if taken is None and guard is None and target > following \
                and self.acquires_guard_at(target) and self.detour(following, target, True):
            return True
        if taken is None and condition is not None and self.never_taken(condition, following):
            self.stretches.never_taken(target)
            return True
        if taken is None or taken:
            self.branch(target)
        return taken is not True

    def compared_to_minus_one(self, register: str | None, following: int) -> None:
        """A compare of ``register`` with -1 that ends at ``following``: remembered when
        the register holds what an import that never returns -1 returned."""
        value = self.state.get(register) if register is not None else None
        if value is not None and value.returned_by in NEVER_MINUS_ONE:
            self.never_equal = following

    def tested_against_zero(self, register: str | None, following: int) -> None:
        """A test of ``register`` against zero that ends at ``following``: remembered
        when the register holds a number known not to be zero (what a function of
        this object always returns: LLVM's ``if (getNonFoldableAlwaysTrue()) return;``
        before the calls that force passes to link), or what an allocator just
        returned (``never_null_when_allocated``)."""
        value = self.state.get(register) if register is not None else None
        if value is not None and (value.constant or never_null_when_allocated(value)):
            self.never_equal = following

    def set_on_condition(self, register: str | None, equal: bool, at: int) -> None:
        """``setne al``/``sete al`` (aarch64 ``cset w0, ne``/``eq``) at ``at``: the
        register holds 1 or 0 when the compare just before is known never to find
        its operands equal (``never_equal``); unknown otherwise."""
        if register is None:
            return
        self.set(register, constant_value(0 if equal else 1) if self.never_equal == at
                 else None)

    def never_taken(self, condition: str, following: int) -> bool:
        """Whether the conditional branch on ``condition`` before ``following`` is never
        taken (``dying``): the branch taken when ``getenv``'s result equals -1 (a
        string or NULL, it never does), or when a number known not to be zero is
        (``tested_against_zero``), after the compare, with at most a few
        instructions that set no flags between (gcc -O2 on aarch64 puts an ``adrp``
        there)."""
        tested = self.never_equal
        if condition not in _EQUAL or tested is None or following <= tested:
            return False
        if following - tested in self.BRANCH_SIZES:
            return True
        between = self.instructions_at(tested, _FLAGS_KEPT_REACH + 1)
        ends = [n for n, instruction in enumerate(between)
                if instruction[0] + instruction[1] == following]
        return bool(ends) and all(instruction[2] in self.KEEPS_FLAGS
                                  for instruction in between[:ends[0]])

    def detour(self, following: int, target: int, acquiring: bool = False) -> bool:
        """A branch on a guard byte forward to a stretch laid out further down that
        sets the byte (``guard_set_behind``), runs straight and jumps back up into the
        code after the branch (gcc -flto's constructions of inline variables, moved
        past the return), or to such a stretch in the function's split-off part
        (``.cold``, outside its code): swept here, where it runs, and skipped when
        the sweep reaches it, so that what it builds comes before what the code
        after the branch reads of it.  True when it was; its end state meets the
        code it jumps back to.

        ``acquiring``: the stretch takes the guard with ``__cxa_guard_acquire``
        (``acquires_guard_at``), and may also branch back up where the acquisition
        finds the static built: a function-local static's construction, inlined
        into code that another's construction runs, is laid out below it, yet
        registers its destructor first."""
        if not self.sized or self.paths is not None or not self.instructions:
            return False
        found = self.detour_at(following, target, acquiring)
        if found is None:
            return False
        steps, end, rejoin = found
        kept = self.state
        self.state = dict(kept)
        for instruction in steps:
            self.step(*instruction)
        self.skipped[target] = end[0] + end[1]
        if rejoin == following:
            self.state = intersect(kept, self.state)
        else:  # the code it jumps back to is swept again with what it knows (``tails_again``)
            known = self.rejoined.get(rejoin)
            self.rejoined[rejoin] = self.state if known is None else intersect(known, self.state)
            self.state = kept
        return True

    def guard_variable(self, key: GuardKey) -> None:
        """The guard ``__cxa_guard_acquire`` takes (``guard_key``), by its data key."""
        found = self.index.data_key(key) if type(key) is int else key
        if found is not None:
            self.events.append((GUARD_VARIABLE, found, None, 0))

    def guard_byte(self, address: int) -> None:
        """The global at ``address`` (the branch's test) is a guard byte."""
        key = self.index.data_key(address)
        if key is not None:
            self.events.append((GUARD_BYTE, key, None, 0))

    def guard_set_behind(self, following: int, target: int) -> tuple[int, int] | None:
        """(the guard's address, where the code goes when it is zero) when the branch
        before ``following`` tests a global against zero and the way it goes when
        that is zero sets it to 1 within a few instructions, before anything
        branches: a guard and the construction behind it (an instruction set that
        does not say: None)."""
        return None

    def detour_at(self, following: int, target: int, back_branches: bool = False,
                  ) -> tuple[list[Instruction], Instruction, int] | None:
        """(its instructions before its jump back, that jump, where it jumps) of the
        detour at ``target``, or None.  ``back_branches``: it may also branch back up
        into the code it jumps back to.  It may branch further down to the
        construction of a function-local static (``acquires_guard_at``): an
        accessor inlined into the detour, whose own detour is swept in turn.

        A detour outside the function's code (its split-off part, ``.cold``, which
        gcc may lay out below it) jumps back into the function after the branch."""
        outside = self.index_of(target) is None
        if outside and self.start <= target < self.end:
            return None
        # Where it may jump back to: up into the code between the branch and the
        # detour, or, from outside, anywhere in the function after the branch.
        end = self.end if outside else target
        code = self.instructions_at(target, _DETOUR_LENGTH)
        for n, (_at, _size, mnemonic, operands) in enumerate(code):
            if mnemonic in self.STOPS:
                return None
            transfer = self.control_transfer(mnemonic, operands)
            if transfer is not None and not transfer[0]:  # a jump
                rejoin = transfer[1]
                return (code[:n], code[n], rejoin) if rejoin is not None \
                    and following <= rejoin < end else None
            branch = self.branch_target(mnemonic, operands)
            if branch is not None and not (back_branches and following <= branch < end) \
                    and not (branch > target and self.acquires_guard_at(branch)):
                return None  # a branch of its own: not a straight stretch
        return None

    def acquires_guard_at(self, target: int) -> bool:
        """Whether the code at ``target`` calls ``__cxa_guard_acquire`` within a few
        instructions, before any branch."""
        start = self.index_of(target)
        if start is None:
            return False
        for _at, _size, mnemonic, operands in self.instructions[start:start + _ACQUIRE_REACH]:
            transfer = self.control_transfer(mnemonic, operands)
            if transfer is not None:
                return transfer[0] and transfer[1] is not None \
                    and self.analyzer.code_target(transfer[1]).name == "__cxa_guard_acquire"
            if mnemonic in self.STOPS or self.branch_target(mnemonic, operands) is not None:
                return False
        return False

    # -- per instruction set ------------------------------------------------
    def other(self, address: int, size: int, mnemonic: str, operands: str) -> bool:
        """Interpret an instruction without a handler; False when it never falls through."""
        raise NotImplementedError

    @staticmethod
    def control_transfer(mnemonic: str, operands: str) -> tuple[bool, int | None] | None:
        """(is a call, target if direct) of a call or unconditional jump; None for the rest."""
        raise NotImplementedError

    @staticmethod
    def registers_set(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        """The general registers any other instruction may write; None when not known."""
        raise NotImplementedError

    @staticmethod
    def branch_target(mnemonic: str, operands: str) -> int | None:
        """Where a direct jump, conditional or not, goes; None for other instructions."""
        raise NotImplementedError

    @staticmethod
    def stack_writes(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        """The stack slots an instruction may write, as keys (``[rsp+16]``) or the
        prefix of every slot through one base (``[rbp``); None when it moves the
        stack, or writes where that is not known."""
        raise NotImplementedError

    # -- registers ------------------------------------------------------------
    def set(self, register: str | None, value: Value | None) -> None:
        if register is None:
            return
        if self.numbers:
            self.numbers.pop(register, None)
        if self.bits:
            self.bits.pop(register, None)
        if self.through:
            self.through.pop(register, None)
        if self.loaded_through:
            self.loaded_through.pop(register, None)
        if value is None:
            self.state.pop(register, None)
        else:
            self.state[register] = value
            if value.parameter is not None:
                self.handles(value.parameter)

    def handles(self, parameter: int) -> None:
        """The function's own code copies, spills or calls the parameter at ``parameter``
        (``FunctionSummary.parameters_handled``; the address of a by-value result, at
        a negative position, is no argument register's)."""
        if parameter >= 0:
            self.summary.parameters_handled |= 1 << parameter

    def load_from(self, register: str | None, slot: int) -> bool:
        """``register = *slot`` when ``slot`` is a GOT slot; False if it is not one."""
        entry = self.index.got_entry(slot)
        if entry is None:
            return False
        if entry.symbol is None:
            self.set(register, address_value(entry.address))
            return True
        self.set(register, got_value(entry))
        # Taking the address is not touching the object (and a weak reference
        # loaded to be tested against null is not even that).
        if not entry.is_function and not entry.weak_undefined:
            self.events.append((ADDRESS, entry.symbol, None, 0))
        return True

    @staticmethod
    def derived(value: Value | None) -> Value | None:
        """A pointer moved by an unknown amount: still inside the same object."""
        if value is None or value.page or (value.address is None and value.got is None
                                           and value.parameter is None
                                           and value.pointee is None):
            return None
        return value._replace(exact=False)

    # -- stack slots ------------------------------------------------------------
    # A register spilled to the stack (every argument, at -O0) keeps its value
    # there: the slot is a key "[base+offset]" of the state, next to the registers.
    def store_slot(self, key: str, value: Value | None) -> None:
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value
            self.stack_slots = True
            if value.parameter is not None:
                self.handles(value.parameter)

    def forget_slots(self, base: str) -> None:
        """The base register moved: slots addressed through it are other slots now."""
        if self.stack_slots:
            prefix = f"[{base}"
            self.state = {k: v for k, v in self.state.items() if not k.startswith(prefix)}
        if base == self.STACK_POINTER:
            self.stack_moved()

    # -- strings built on the stack -----------------------------------------------
    def stack_known(self) -> bool:
        """Whether anything is known of what lies on the stack (bytes, strings)."""
        return bool(self.stack_bytes or self.stack_strings)

    def forget_stack(self) -> None:
        """A store that may land anywhere on the stack: nothing known there stays."""
        self.stack_bytes.clear()
        self.stack_strings.clear()

    def stack_moved(self) -> None:
        """The stack pointer moved: offsets past it name other bytes now."""
        self.forget_stack()
        if any(value.stack is not None for value in self.state.values()):
            self.state = {k: v for k, v in self.state.items() if v.stack is None}

    def stored_on_stack(self, offset: int | None, width: int, stored: int | None) -> None:
        """A store of ``width`` bytes ``offset`` bytes past the stack pointer (None: a
        store somewhere the stack may be): ``stored``, a number, is kept; anything
        else makes what was known there unknown."""
        if offset is None or width <= 0:
            self.forget_stack()
            return
        known = self.stack_bytes
        if self.stack_strings:  # a store into a string built there changes it
            self.stack_strings = {at: key for at, key in self.stack_strings.items()
                                  if offset + width <= at or at + _STRING_SIZE <= offset}
        if stored is None:
            for at in range(offset, offset + width):
                known.pop(at, None)
        else:
            for at in range(offset, offset + width):
                known[at] = stored & 0xFF
                stored >>= 8

    def stack_string(self, offset: int) -> str | None:
        """The text of a ``std::string`` built in place ``offset`` bytes past the stack
        pointer, in libstdc++'s short-string layout: a pointer to its own buffer, 16
        bytes in, then the length (at most 15), then the bytes; None unless every
        byte is known and printable."""
        own = self.state.get(f"[{self.STACK_POINTER}{offset:+d}]")
        if own is None or own.stack != offset + 16:
            return None
        length = self.stack_bytes_at(offset + 8, 8)
        size = int.from_bytes(length, "little") if length is not None else 0
        text = self.stack_bytes_at(offset + 16, size) if 0 < size <= 15 else None
        return printable_text(text) if text is not None else None

    def stack_bytes_at(self, offset: int, count: int) -> bytes | None:
        """The ``count`` bytes ``offset`` past the stack pointer, if all are known."""
        known = self.stack_bytes
        places = range(offset, offset + count)
        return bytes(known[at] for at in places) if all(at in known for at in places) \
            else None

    # -- numbers known in part (``bits``) -------------------------------------------
    def forget_bits(self) -> None:
        """A call or a join: no bits known in registers or memory stay known."""
        self.bits.clear()
        self.memory_bits.clear()
        self.through.clear()

    def register_bits(self, register: str | None) -> Bits | None:
        """The bits known of the number in ``register``; None when none are."""
        if register is None:
            return None
        value = self.state.get(register)
        if value is not None and value.constant is not None:
            return exactly(value.constant)
        found = self.numbers.get(register)
        return exactly(found) if found is not None else self.bits.get(register)

    def set_bits(self, register: str | None, known: Bits | None) -> None:
        """``register`` now holds a number whose bits ``known`` are known: kept as a
        constant when all are, apart otherwise."""
        self.set(register, None)
        if register is None or known is None or not known[0]:
            return
        if known[0] == (1 << 64) - 1:
            self.number(register, known[1])
        else:
            self.bits[register] = known

    def exact_place(self, value: Value | None, offset: int) -> int | None:
        """The address ``value + offset`` names exactly in this object's memory (an
        object it defines, reached through its GOT slot, too)."""
        if value is None or value.page or value.stack is not None:
            return None
        address = named_address(value)
        return address + offset if address is not None else None

    def wrote_memory(self, value: Value | None, offset: int, width: int,
                     known: Bits | None = None) -> None:
        """A store of ``width`` bytes at ``value + offset`` (``value`` None: a pointer
        not known, anywhere but the stack), whose bits ``known`` are known (None:
        none): what is known of the bytes there is that."""
        if self.through and value is None:
            self.through.clear()  # perhaps into what an argument points to
        at = self.exact_place(value, offset)
        if at is None or width <= 0:
            if self.memory_bits and (value is None or value.stack is None):
                self.memory_bits.clear()
            return
        if known is not None:
            _store_bits(self.memory_bits, at, width, known)
        elif self.memory_bits:
            for place in range(at, at + width):
                self.memory_bits.pop(place, None)

    def memory_at(self, value: Value | None, offset: int, width: int,
                  through: str | None = None) -> Bits | None:
        """The bits known of the ``width`` bytes at ``value + offset``: stored there by
        this code, or, through the argument register ``through``, by the caller."""
        if through is not None and through in self.through:
            return _loaded_bits(self.through[through], offset, width)
        if self.quiet is not None and self.quiet_at(value, offset, width):
            return exactly(0, 8 * width)
        at = self.exact_place(value, offset)
        if at is None or not self.memory_bits:
            return None
        return _loaded_bits(self.memory_bits, at, width)

    def quiet_at(self, value: Value | None, offset: int, width: int = 1) -> bool:
        """Whether the ``width`` bytes at ``value + offset`` are ones no code run at load
        writes: zero, whatever runs first (so a read of them is no read to order, nor
        evidence that, in a file without symbols, the object below reaches them)."""
        at = self.global_place(value, offset)
        return at is not None and self.quiet is not None and self.quiet.holds(at, width)

    def global_place(self, value: Value | None, offset: int) -> int | None:
        """The address ``value + offset`` names exactly among this object's globals:
        ``exact_place``, and an adrp page plus the low bits its access adds."""
        if value is not None and value.page and value.address is not None:
            return value.address + offset
        return self.exact_place(value, offset)

    def memory_constants(self, arguments: list[Value | None]) -> Constants:
        """What the code stored in the objects its pointer arguments point to, as
        ``memory_constant`` entries: the bits of the 256 bytes from each pointer on."""
        found: list[tuple[int, int]] = []
        for position, value in enumerate(arguments):
            start = self.exact_place(value, 0)
            if start is None:
                continue
            words = sorted({(at - start) >> 3 for at in self.memory_bits
                            if 0 <= at - start < 8 * MEMORY_WORDS})
            found += [memory_constant(position, word, known) for word in words
                      if (known := _loaded_bits(self.memory_bits, start + 8 * word, 8))]
        return tuple(found)

    def tested_bits(self, following: int, known: Bits | None, amount: int,
                    width: int) -> None:
        """A test of a number whose bits ``known`` are known against ``amount``
        (``test``, ``tst``, ``tbz``): in a walk that decides, the flags of the result
        when every bit tested is known."""
        if self.paths is None or known is None:
            return
        result = selected(known, amount)
        if result is not None:
            self.flags = (following, result, 0, width, False)

    # -- memory ---------------------------------------------------------------
    def data(self, value: Value, offset: int = 0, anchor: bool = False,
             ) -> tuple[str, bool] | None:
        """(key, defined here) of the object at ``value + offset``, or None
        (``AddressIndex.data_key``; ``anchor``: the code takes it as a pointer)."""
        entry = value.got
        if entry is not None:
            if entry.is_function or entry.symbol is None:
                return None
            if entry.definition is None or not self.index.keys_by_address:
                return entry.symbol, entry.defined
            # This object's own, reached through the GOT.
            at = entry.definition + offset if value.exact else entry.definition
            anchor = anchor and at == entry.definition
        elif value.address is None:
            return None
        else:
            at = value.address + offset if value.exact else value.address
            anchor = anchor and at == value.address
        key = self.index.data_key(at, anchor)
        return (key, True) if key is not None else None

    def stamp(self, value: Value, offset: int, stored: Value | None) -> None:
        """A store of ``stored`` at ``value + offset``: noted when it is an address of
        read-only data (a vtable, a string literal) and the place is a global."""
        if stored is None or stored.address is None or not stored.exact or stored.page \
                or stored.got is not None or value.parameter is not None:
            return
        if not self.index.read_only_data(stored.address):
            return
        # Where a constructor stores a vtable or a name is most often where its object
        # starts: in a file without symbols, that place is taken as an object's start.
        found = self.data(value, offset, anchor=offset == 0)
        if found is not None and found[1]:
            self.events.append((STAMP, found[0], None, 0))

    def access(self, value: Value, offset: int, read: bool, write: bool,
               zero: bool = False, one: bool = False, width: int = 0) -> str | None:
        """A load or store at ``value + offset``; ``zero``: a store of zero, ``one``:
        of the number 1; ``width``: how many bytes one vector register's store writes
        (``WIDE_STORE`` and more).  The global's key, when it is one (``loaded``,
        ``stored``)."""
        if value.parameter is not None:
            subject: str | int = value.parameter
            defined = True
        elif value.pointee is not None:
            subject, defined = POINTEE + value.pointee, True
            if write and value.returned_by is not None:  # just allocated: built here
                self.events.append((WRITE, subject, None, FRESH_STORE))
                write = False
        else:
            found = self.data(value, offset)
            if found is None:
                return None
            subject, defined = found
            if offset and value.exact and not value.page and subject[0] == BARE:
                # A member reached from a pointer the code computed: that pointer is
                # where an object starts, in a file without symbols to say so.  An
                # aarch64 page (adrp) plus the load's low bits is no such pointer: the
                # page's start is where the 4 KiB happen to begin.
                base = self.data(value, anchor=True)
                if base is not None:
                    self.events.append((ADDRESS, base[0], None, 0))
        if read and not (self.quiet is not None and not write and self.quiet_at(value, offset)):
            self.events.append((READ, subject, None, 0))
        if write and defined:
            self.events.append((WRITE, subject, None,
                                ZERO_STORE if zero and self.zero_filled(value, offset)
                                else ONE_STORE if one
                                else width if width >= WIDE_STORE
                                else UPDATE_STORE if read else 0))
        return subject if type(subject) is str else None

    def loaded(self, register: str | None, global_key: str | None) -> None:
        """``register`` loaded whole from the global ``global_key``: a pointer, perhaps,
        to the object what the code does through it is charged to (``*key``)."""
        if register is not None and global_key is not None and global_key[0] != POINTEE:
            self.state[register] = pointee_value(global_key)

    def stored(self, register: str | None, global_key: str | None) -> None:
        """``register`` stored whole into the global ``global_key``: the register holds
        what that global points to now (an accessor returns the pointer it just
        stored), unless it is known otherwise."""
        if register is None or global_key is None or global_key[0] == POINTEE:
            return
        held = self.state.get(register)
        if held is not None and held.returned_by in ALLOCATORS:
            self.state[register] = held._replace(pointee=global_key)
        elif held is None or (held.address is None and held.got is None
                              and held.parameter is None and held.constant is None):
            self.state[register] = pointee_value(global_key)

    def zero_filled(self, value: Value, offset: int) -> bool:
        """Whether ``value + offset`` is known to lie in memory the loader zeroes (.bss),
        reached by its address or through the GOT slot of this object's definition (a
        copy relocation copies those zeros too)."""
        at = named_address(value)
        return at is not None and self.index.zero_initialized(at + offset)

    def stores_address(self, base: Value, offset: int, stored: Value | None) -> None:
        """A store of an address a little past the place stored to (``s._M_p =
        s._M_local_buf``, a list's header linked to itself): an object starts there,
        in a file without symbols to say so.

        Unless the code has just read that place: a push onto a list reads the head,
        links the new entry to it and stores the entry's address there, and the
        entry may lie right after the head or right before it (z3's registration
        lists).  The entry is then where an object starts, its address taken (one
        farther away is no member of the head's object anyway); a constructor
        linking its object to its own inside does not read the link first."""
        if stored is None or stored.address is None or not stored.exact \
                or base.address is None or not base.exact or base.got is not None:
            return
        at = base.address + offset
        # An entry far from its head is no member of the head's object anyway.
        if not -MEMBER_REACH < stored.address - at < MEMBER_REACH:
            return
        pushed = self.read_lately(at)
        if not pushed and stored.address <= at:
            return
        key = self.index.data_key(at, True)
        if key is None or key[0] != ANCHOR:
            return
        if pushed:
            entry = self.index.data_key(stored.address, True)
            if entry is not None:
                self.events.append((ADDRESS, entry, None, 0))
        else:
            self.events.append((ADDRESS, key, None, 0))

    def read_lately(self, at: int) -> bool:
        """Whether one of the last few events reads the bare address ``at`` (a file
        without symbols): only the ones a push onto a list makes between reading the
        head and replacing it (a long initializer pushes thousands of entries; its
        whole history is not searched each time)."""
        events = self.events
        key = None
        for n in range(len(events) - 1, max(len(events) - _PUSH_EVENTS, 0) - 1, -1):
            if events[n][0] == READ:
                key = key or f"{BARE}{at:#x}"
                if events[n][1] == key:
                    return True
        return False

    # -- calls ----------------------------------------------------------------
    def call(self, target: Value | None, following: int | None = None) -> None:
        """A call; ``following``: where the code goes on after it."""
        self.built = None  # until ``keyed_call`` finds this call builds a string
        if target is not None and target.pointee is not None:
            target = None  # a function pointer read from a global: not known
        state = self.state
        resolved = self.resolve(target) if target is not None else None
        arguments = list(map(state.get, self.ARGUMENTS[:self.arguments_taken(resolved)])) \
            if state else []
        result = state.get(self.RESULT_POINTER) if state and self.RESULT_POINTER else None
        if state:
            self.forget_clobbered(resolved)
        passed = any(arguments)  # a Value, a tuple of fields, is true
        # The constants it is passed may select its paths (``analyzer.specialised``).
        constants = tuple((position, value.constant) for position, value in enumerate(arguments)
                          if value is not None and value.constant is not None) \
            if passed else ()
        if passed and self.memory_bits and resolved is not None and resolved.follow is not None:
            constants += self.memory_constants(arguments)
        if resolved is not None and fatal_message(resolved.name, constants):
            # A failed check's message: the process ends once it is written, and
            # what the code does on the way there is no finding (``dying``).
            self.record_call(resolved)
            self.stretches.ends(DIES)
            return
        if resolved is not None and resolved.follow is not None:
            if self.index.unlikely(resolved.follow) or runs_only_contended(resolved.name):
                # Code gcc laid out as never expected to run (``elf.layout``), or a
                # lock's slow path known by its name: a slow or error path, which,
                # like a call that never returns, adds nothing.
                self.record_call(resolved)
                return
            self.result_of(resolved.follow, constants, following)
        if resolved is None:
            if target is None or target.parameter is not None:
                # Through a register we cannot resolve (a virtual call, a callback):
                # code that is not followed.
                self.summary.stop_here(StopReason.INDIRECT_CALL)
                self.indirect_calls.append(len(self.stretches.starts) - 1)  # its stretch
                if target is not None and target.parameter is not None:
                    self.handles(target.parameter)
                self.parameters_to_unknown_code(arguments)
            return
        self.record_call(resolved)
        name = resolved.name
        if resolved.external and (name in NEVER_MINUS_ONE or name in ALLOCATORS) \
                and self.RESULT is not None:
            self.state[self.RESULT] = Value(returned_by=name)
        if resolved.external and never_returns(name):
            # Only a name a stripped copy keeps: an import's (its own code, unnamed
            # there, would make the two differ).
            self.stretches.ends(DIES)
        if name == "__tls_get_addr" and arguments and arguments[0] is not None:
            self.thread_local(arguments[0])
        if name in ATEXIT_FUNCTIONS or (name is None and resolved.follow is not None
                                        and self.analyzer.registers_at_exit(resolved.follow)):
            self.register_atexit(name or "atexit", arguments + [None] * (2 - len(arguments)))
            return
        if name in HOOK_FUNCTIONS:
            arguments = self.hand_over(HOOK_FUNCTIONS[name], arguments)
            passed = any(arguments)
        if name in IOS_INIT_CONSTRUCTORS:
            self.summary.ios_init = True
        if name in GUARD_FUNCTIONS:
            guard = arguments[0] if arguments else None
            key = guard_key(guard) if guard is not None else None
            taken = GUARD_FUNCTIONS[name]
            if taken:
                self.guard_variable(key)
            later = self.built_later(following) if taken and following is not None else None
            if later is not None:
                self.guarded_from[later] = key
            else:
                self.events.append((GUARD, taken, key, 0))
        elif name is None and arguments and following is not None:
            self.guard_by_code(arguments[0], following)
        if passed:
            self.keyed_call(resolved, arguments)
        if passed or result is not None:
            self.pass_arguments([*enumerate(arguments), (RESULT_POSITION, result)], resolved,
                                name is not None and is_constructor(name))
        if resolved.follow is not None:
            self.summary.callees[function_key(resolved.follow, constants)] = None
            self.events.append((CALL, resolved.follow, constants or None, 0))

    def guard_by_code(self, argument: Value | None, following: int) -> None:
        """A function without a name passed a global's address: a copy of the C++
        runtime's ``__cxa_guard_acquire`` linked in (``-static-libstdc++``) when the
        code tested that byte before (``tested_before``) and branches on the call's
        result (``result_branch``); its release or abort when that guard is held."""
        if argument is None or not argument.exact or argument.page or argument.got is not None \
                or argument.address is None:
            return
        address = argument.address
        if address in self.guards_taken:
            self.guards_taken.discard(address)
            self.events.append((GUARD, False, address, 0))
            return
        if self.result_branch(following) is None or not self.tested_before(address):
            return
        self.guards_taken.add(address)
        self.guard_byte(address)
        later = self.built_later(following)
        if later is not None:
            self.guarded_from[later] = address
        else:
            self.events.append((GUARD, True, address, 0))

    def tested_before(self, address: int) -> bool:
        """Whether this function tests the guard at ``address`` itself, on the way taken
        when the static is built already (an instruction set that does not say: no)."""
        return False

    def arguments_taken(self, callee: Target | None) -> int | None:
        """How many argument registers the callee can read (None: all of them)."""
        if callee is None or not callee.name:
            return None
        position = FORMAT_POSITIONS.get(callee.name.partition("@")[0])
        if position is not None:
            return self.formatted_arguments(position)
        return argument_registers(callee.name, self.RESULT_POINTER is not None)

    def formatted_arguments(self, position: int) -> int | None:
        """How many arguments a call of the printf family passes, from its format (a
        string constant in the register at ``position``); None when not known."""
        value = self.state.get(self.ARGUMENTS[position]) if position < len(self.ARGUMENTS) \
            else None
        key = self.constant_key(value) if value is not None else None
        if key is None or not key.startswith("string:"):
            return None
        count = format_arguments(key[len("string:"):])
        return position + 1 + count if count is not None else None

    def result_of(self, function: int, constants: Constants = (),
                  site: int | None = None) -> None:
        """The result register after calling a function of this object that always
        returns one global's address (an accessor: ``T& registry() { static T r;
        return r; }``), so that what the caller does through it is seen.  Passed
        ``constants``, it returns what the path they select returns (``get(1)``).
        ``site``: where the code goes on after the call (None: a tail call, whose
        caller gets the result)."""
        returned = self.analyzer.returned_global(function, constants)
        if returned is not None and self.RESULT is not None:
            value = pointee_value(returned) if isinstance(returned, str) \
                else address_value(returned)
            self.set(self.RESULT, value)
            if site is not None:
                self.fetched(value, site)
            return
        number = self.analyzer.returned_constant(function) if not constants else None
        if number is not None and self.RESULT is not None:
            self.set(self.RESULT, constant_value(number))

    def fetched(self, value: Value, site: int) -> None:
        """An accessor's call, returning to ``site``, handed back ``value``: the global
        the code reaches through it is fetched (``FETCH``), one use of it starts."""
        if value.pointee is not None:
            key: str | None = POINTEE + value.pointee
        else:
            found = self.data(value, anchor=True)
            key = found[0] if found is not None else None
        if key is not None:
            self.events.append((FETCH, key, site, 0))

    def returns(self) -> None:
        """A return: what the result register holds, if it is a global's address, or the
        pointer a global holds."""
        self.stretches.ends(LIVES)
        self.summary.may_return = True
        value = self.state.get(self.RESULT) if self.RESULT is not None else None
        self.summary.note_constant(value.constant if value is not None else None)
        if value is not None and value.pointee is not None and value.exact:
            self.summary.note_return(value.pointee)
            return
        known = value is not None and value.exact and not value.page and value.got is None \
            and value.parameter is None and value.table is None and value.address
        self.summary.note_return(value.address if known and value is not None else None)

    def forget_clobbered(self, callee: Target | None) -> None:
        """Forget the caller-saved registers the callee may change.

        A call into this object's own code keeps those the callee provably
        leaves alone: gcc (-fipa-ra, on from -O1) keeps values in them across
        calls to functions whose bodies it has compiled.
        """
        saved = self.CALLER_SAVED
        if saved.isdisjoint(self.state):
            return
        written = self.analyzer.registers_written(callee) if callee is not None else None
        lost = saved if written is None else written | self.CALL_WRITES
        self.state = {r: v for r, v in self.state.items() if r not in lost}

    def parameters_to_unknown_code(self, arguments: list[Value | None]) -> None:
        """The parameters in argument registers at a call that is not followed are
        handed to it, taken to be read (``unfollowed_use``): with that, a parameter
        sweep says what the function does with each parameter although it makes such
        a call (``parameter_use``; those past the last it handles are dropped there).
        In an ordinary sweep no register holds a parameter."""
        for position, value in enumerate(arguments):
            if value is not None and value.parameter is not None:
                self.events.append((UNKNOWN_PASS, value.parameter, unfollowed_use(position),
                                    position))

    def pass_arguments(self, arguments: list[tuple[int, Value | None]], callee: Target,
                       constructor: bool) -> None:
        """A constructor writes its ``this``; what happens to any other pointer passed
        is what the callee does with that parameter (see ``summary.Collector``)."""
        for position, value in arguments:
            if value is None or value.page \
                    or (value.got is not None and value.got.weak_undefined):
                continue
            if value.parameter is not None:
                subject: str | int = value.parameter
                defined = True
            elif value.pointee is not None:
                subject, defined = POINTEE + value.pointee, True
            else:
                found = self.data(value, anchor=True)
                if found is None:
                    continue
                subject, defined = found
            if constructor and position == 0:
                if defined:
                    self.events.append((WRITE, subject, None, ONE_BYTE
                                        if callee.name in IOS_INIT_CONSTRUCTORS else 0))
            elif callee.follow is None:
                # The callee slot: what the function is known to do with it, if it is.
                self.events.append((UNKNOWN_PASS, subject, c_pointer_use(callee.name, position),
                                    position))
            else:
                self.events.append((PASS if defined else PASS_FOREIGN, subject, callee.follow,
                                    position))

    def keyed_call(self, callee: Target, arguments: list[Value | None]) -> None:
        """Constant keys passed (a string literal, a type_info): what a registration
        files its entry under, and a look-up asks for (``registrations``)."""
        function = callee.name or f"{callee.follow or 0:#x}"
        address = None if callee.external else callee.follow
        for position, value in enumerate(arguments):
            key = self.constant_key(value) if value is not None else None
            if key is None and value is not None and value.stack is not None:
                text = self.stack_string(value.stack)
                key = f"string:{text}" if text is not None \
                    else self.stack_strings.get(value.stack)
            if key is not None:
                self.events.append((KEYED, KeyedCall(function, key, position, address),
                                    None, 0))
        self.built = self.string_built(arguments)

    def string_built(self, arguments: list[Value | None]) -> tuple[int, str] | None:
        """(where on the stack, the key) of a string a call builds there from a literal:
        one passed the place, the literal's first byte and the byte past its last
        (libstdc++'s ``_M_construct(this, begin, end)``, which gcc calls where it does
        not build the string in place: many in one function, or long ones)."""
        if len(arguments) < 3:
            return None
        place, begin, end = arguments[:3]
        if place is None or begin is None or end is None or place.stack is None \
                or begin.address is None or end.address is None \
                or not (begin.exact and end.exact) or begin.page or end.page:
            return None
        key = self.index.constant_key(begin.address) or ""
        text = key.removeprefix("string:") if key.startswith("string:") else ""
        size = end.address - begin.address
        return (place.stack, f"string:{text[:size]}") if 0 < size <= len(text) else None

    def called(self) -> None:
        """After a call: what it may have stored on the stack, and what registers it
        may have changed, are no longer known; a string it built there from a
        literal (``string_built``) is, until the next call."""
        self.forget_stack()
        self.numbers.clear()
        if self.bits or self.memory_bits or self.through:
            self.forget_bits()
        if self.built is not None:
            self.stack_strings[self.built[0]] = self.built[1]
            self.built = None

    def constant_key(self, value: Value) -> str | None:
        if value.page or not value.exact:
            return None
        if value.got is not None:
            symbol = value.got.symbol
            return f"type:{symbol}" if symbol and symbol.startswith("_ZTI") else None
        return self.index.constant_key(value.address) if value.address else None

    def hand_over(self, positions: tuple[int, ...],
                  arguments: list[Value | None]) -> list[Value | None]:
        """Functions passed to run later (fork handlers, a thread's start): noted, and
        not taken for data; the other arguments are returned."""
        rest = list(arguments)
        for position in positions:
            value = arguments[position] if position < len(arguments) else None
            target = self.resolve(value) if value is not None else None
            if target is not None and target.follow is not None:
                self.events.append((HOOK, target.follow, None, 0))
            if position < len(rest):
                rest[position] = None
        return rest

    def thread_local(self, argument: Value) -> None:
        """``__tls_get_addr(&got_pair)``: the pair's relocation names the variable."""
        entry = self.index.got_entry(argument.address) if argument.address else None
        if entry is not None and entry.is_tls:
            self.access(got_value(entry), 0, read=True, write=False)

    def record_call(self, resolved: Target) -> None:
        # Code without a symbol is named by its address.
        name = resolved.name or f"{resolved.follow or 0:#x}"
        if resolved.external:
            self.summary.external_calls[name] = None
        else:
            self.summary.calls[name] = None

    def resolve(self, target: Value) -> Target | None:
        if target.got is not None:
            return self.through_got(target.got)
        if not target.address or target.page or not target.exact:
            return None  # unknown, or a null weak reference
        return self.analyzer.code_target(target.address)

    def through_got(self, entry: GotEntry) -> Target | None:
        if entry.is_tls:  # aarch64 TLS descriptor: a call that finds the variable
            self.access(got_value(entry), 0, read=True, write=False)
            return None
        return got_target(self.index, entry)

    def register_atexit(self, name: str, arguments: list[Value | None]) -> None:
        function, target = arguments[0], arguments[1] if name != "atexit" else None
        if name == "__cxa_atexit" and function is not None and function.parameter == 0 \
                and target is not None and target.constant == 0:
            self.summary.registers_argument = True  # libc's atexit, linked in
        destructor, code = None, None
        if function is not None:
            resolved = self.resolve(function)
            if resolved is not None:
                destructor, code = resolved.name, resolved.follow
        object_name = None
        if target is not None and not target.page:
            found = self.data(target, anchor=True)
            object_name = found[0] if found else None
        # atexit's functions are the program's own; gcc's cleanups of static arrays
        # (__tcf_N) are registered with __cxa_atexit and no object, yet destroy some.
        self.events.append((ATEXIT, AtExit(object_name, destructor, code, name == "atexit"),
                            None, 0))
        if object_name is not None:
            self.summary.registers_objects = True

    def traps(self) -> None:
        """A trap (``ud2``, ``brk``): the code ends here, and the process with it."""
        self.stretches.ends(DIES)

    def tail_call(self, target: Value | None) -> bool:
        """A jump out of the function (or through a register); never falls through."""
        self.stretches.ends(LIVES)
        if target is None or target.pointee is not None:
            self.summary.stop_here(StopReason.INDIRECT_JUMP)  # an indirect jump we cannot resolve
        elif target.address != 0:  # 0: a null weak reference, tested before the jump
            self.call(target)
        self.summary.note_constant(None)  # returns what another function returns
        self.summary.note_return(None)
        self.summary.may_return = True
        self.state = {}
        return False

    def jump(self, target: int) -> bool:
        inside = self.start <= target < self.end
        if inside and (self.sized or self.index.function_at(target) is None):
            self.branch(target)
            return False
        if self.sized and self.index.knows_functions and self.index.function_at(target) \
                is None and self.index.plt_entry(target) is None:
            # Into this function's split-off part (.cold): error paths, not followed.
            fails = self.tail_fails(target)
            self.stretches.ends(DIES if fails else LIVES)
            if not fails:
                self.summary.may_return = True
            return False
        if self.index.plt_entry(target) is None and self.tail_fails(target):
            # Into a split-off part that has a symbol or an unwind entry of its own
            # (``f.cold``): an error path, which returns nothing to this one's caller
            # and, like a call that never returns, contributes nothing.
            self.stretches.ends(DIES)
            self.state = {}
            return False
        return self.tail_call(address_value(target))

    def tail_fails(self, target: int) -> bool:
        """``fails_at``, asked once per target."""
        tails = self.analyzer.failing_tails
        fails = tails.get(target)
        if fails is None:
            fails = tails[target] = self.fails_at(target)
        return fails

    def fails_at(self, address: int) -> bool:
        """Whether the code at ``address`` runs straight (jumps followed) into a call that
        never returns, or a trap, before a return, a branch or a jump it cannot follow:
        a split-off error path's tail (build the exception, throw; or clean up, unwind)."""
        steps = 0
        while True:
            code = self.index.code_at(address, _STRAIGHT_LINE_BYTES)
            if code is None:
                return False
            # An error path's tail is a few instructions: decoded a few at a time.
            for _at, _size, mnemonic, operands in decode_in_chunks(
                    self.analyzer.disassembler, bytes(code), address, _TAIL_CHUNK):
                steps += 1
                if steps > _STRAIGHT_LINE:
                    return False
                if mnemonic in self.STOPS:
                    return "ret" not in mnemonic  # a trap ends it; a return does not
                transfer = self.control_transfer(mnemonic, operands)
                if transfer is None:
                    if self.branch_target(mnemonic, operands) is not None:
                        return False  # a conditional branch: one way may go on
                    continue
                is_call, target = transfer
                if target is None:
                    return False  # through a register
                if not is_call:
                    address = target  # a jump: go on reading there
                    break
                if never_returns(self.analyzer.code_target(target).name):
                    return True
            else:
                return False  # the code read ends


# Instructions that may come between a compare and its branch (``never_taken``).
_FLAGS_KEPT_REACH = 3
# Events a push onto a list makes from reading the head to replacing it (``read_lately``):
# the read, the entry's fields, perhaps its guard byte.
_PUSH_EVENTS = 8
# How long a detour may be (``detour``), and how far into it the guard is taken
# (``acquires_guard_at``: its address loaded into the argument register first).
_DETOUR_LENGTH = 48  # a std::make_shared inlined there takes some forty
_ACQUIRE_REACH = 4
# Tails swept again per function (``tails_again``), and how long each may be.
_TAILS_AGAIN = 4
_TAIL_LENGTH = 32
# How far ``fails_at`` reads: an error path's tail is short (thread_exit reads as far).
_STRAIGHT_LINE = 64
_STRAIGHT_LINE_BYTES = 1024
_TAIL_CHUNK = 8  # instructions decoded at a time there: most tails end within them


# The conditions of a branch taken when the two compared are equal (x86, aarch64).
_EQUAL = frozenset({"e", "z", "eq"})


def _store_bits(memory: dict[int, int], at: int, width: int, known: Bits) -> None:
    """The ``width`` bytes from ``at`` hold the bits ``known``: each byte's kept packed,
    ``mask << 8 | value`` (a byte none of whose bits are known is forgotten)."""
    mask, number = known
    for place in range(at, at + width):
        part = mask & 0xFF
        if part:
            memory[place] = part << 8 | (number & part)
        elif memory:
            memory.pop(place, None)
        mask >>= 8
        number >>= 8


def _loaded_bits(memory: dict[int, int], at: int, width: int) -> Bits | None:
    """The bits known of the ``width`` bytes from ``at`` (``_store_bits``), lowest
    first; None when none is."""
    mask = number = 0
    for byte in range(width):
        packed = memory.get(at + byte)
        if packed:
            mask |= (packed >> 8) << 8 * byte
            number |= (packed & 0xFF) << 8 * byte
    return (mask, number) if mask else None


def guard_key(value: Value) -> GuardKey:
    """What names a guard variable passed to ``__cxa_guard_*``: its symbol, reached
    through the GOT, or its address; None when neither is known."""
    if value.got is not None:
        return value.got.symbol
    return value.address if value.exact and not value.page else None


def _is_padding(mnemonic: str, operands: str) -> bool:
    """``nop`` (any length), ``xchg ax, ax``: what aligns the next branch target."""
    return mnemonic == "nop" or (mnemonic == "xchg" and operands == "ax, ax")


_LONGEST_INSTRUCTION = 15  # bytes: x86-64's limit (aarch64's are 4)


def decode_in_chunks(engine: Cs, code: bytes, start: int,
                     chunk: int = 32) -> Iterator[tuple[int, int, str, str]]:
    """Instructions decoded a few at a time, for a reader that may stop early.

    capstone decodes all it is given before yielding the first instruction, and is
    given no more than ``chunk`` instructions can span (not the rest of the code,
    copied again for each chunk).
    """
    offset = 0
    while offset < len(code):
        piece = code[offset : offset + chunk * _LONGEST_INSTRUCTION]
        decoded = list(engine.disasm_lite(piece, start + offset, chunk))
        if not decoded:
            return
        yield from decoded
        offset = decoded[-1][0] + decoded[-1][1] - start


def got_target(index: AddressIndex, entry: GotEntry) -> Target:
    """The function a call through a GOT slot (or a PLT stub using it) reaches."""
    if entry.symbol is not None:
        # An interposable call to a function defined here reaches that
        # definition unless another object preempts it: follow it.
        follow = entry.definition if entry.defined and entry.is_function else None
        return Target(entry.symbol, follow, True)
    name = None  # a slot holding an address of this object's own code
    if entry.address is not None:
        found = index.function_at(entry.address)
        name = found[0] if found else None
    return Target(name, entry.address, False)


# -- numbers ---------------------------------------------------------------------------
def number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def immediate(text: str) -> int | None:
    """A branch target or immediate operand written as a number (``number``, inlined:
    asked for every branch and move)."""
    if not text[:1].isdigit():
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None
