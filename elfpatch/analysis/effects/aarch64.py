"""aarch64: the instructions that move addresses, read and write memory, call and jump.

capstone's text is read: ``adrp x0, #0x4000`` + ``add x0, x0, #0x10`` (an
address), ``adrp`` + ``ldr x0, [x0, #0xfd8]`` (a GOT slot), ``bl #0x6c0`` (a
call), loads and stores with pre- and post-index writeback.  Arguments are
passed in x0-x7 (AAPCS64); spills go to ``[sp, #n]`` or ``[x29, #n]``.

What is read from capstone (``disasm_lite``, no detail mode), and relied on:
the mnemonic (conditions as ``b.eq``); the operand string, operands
separated by ``", "``, the destination (or the registers transferred)
first; registers as ``x0``/``w0``, ``sp``, ``xzr``/``wzr`` (``fp``/``lr``
are accepted too); immediates and branch targets as ``#0x...`` (``#`` and
decimal below 10), an ``adrp`` target as the page's absolute address;
memory as ``[base]``, ``[base, #off]``, ``[base, reg{, extend}]``, with
``!`` after the bracket for pre-index and ``, #off`` after it for
post-index writeback; ``add``'s shifted immediate as ``, lsl #12``.

Detail mode (structured operands) costs several times the walk itself
(see ``x86_64``), so the text is read; ``tests/test_effects_corpus.py``
pins capstone's text for these forms and what this walker makes of it.
"""

from __future__ import annotations

import re

from elfpatch.analysis.effects.bits import (
    UNKNOWN,
    Bits,
    anded,
    exactly,
    inserted,
    ored,
    selected,
    whole,
    zero_extended,
)
from elfpatch.analysis.effects.summary import GLOBAL, READ
from elfpatch.analysis.effects.walk import (
    FlagTest,
    FunctionWalk,
    Value,
    immediate,
    named_address,
    never_null,
    never_null_when_allocated,
)
from elfpatch.elf.constants import EM_AARCH64

MACHINE = EM_AARCH64

_A64_MEMORY = re.compile(r"\[(\w+)(?:, ([^\]]+))?\](!?)(, #?(-?\w+))?")
_A64_CONDITIONAL = frozenset({"cbz", "cbnz", "tbz", "tbnz"} | {
    f"b.{cc}" for cc in ("eq", "ne", "hs", "cs", "lo", "cc", "mi", "pl", "vs", "vc", "hi", "ls",
                         "ge", "lt", "gt", "le", "al", "nv")})
_A64_STOPS = frozenset({"ret", "retaa", "retab", "brk", "udf", "hlt"})
# What a function's early return does on its way out: restore registers, set the result.
_A64_SHORT_EXIT = frozenset({"ldp", "ldr", "mov", "movz", "add", "sub", "nop", "autiasp",
                             "hint", "subs", "cmp", "eor", "adrp"})
_A64_LOADS = frozenset({"ldr", "ldur"})  # a load anywhere: no effect on the way out
_A64_FRAME = re.compile(r"\[(sp|x29)\b")
_SHORT_EXIT = 12  # instructions
_FLAG_TEST_REACH = 4  # instructions from a flag's load to its test (``flag_paths``)
# A nifty counter's update, to its test (``counter_tested``): an exclusive pair and its retry.
_COUNTER_TEST_REACH = 5
_A64_COUNT_LOADS = frozenset({"ldr", "ldar", "ldxr", "ldaxr"})
_DISPATCH_REACH = 24  # instructions of an outline atomic helper (``capability_dispatch``)
_A64_NO_DESTINATION = frozenset({"cmp", "cmn", "tst", "ccmp", "ccmn", "fcmp", "fcmpe",
                                 "fccmp", "msr", "nop", "hint", "bti", "dmb", "dsb", "isb",
                                 "paciasp", "autiasp", "pacibsp", "autibsp", "prfm", "sys",
                                 "dc", "ic", "tlbi", "yield", "sev", "wfe", "wfi"})
_A64_READ_WRITE = ("ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax",
                   "ldumin", "swp", "cas")
_A64_TRANSFER = ("ld", "st", "sw", "ca")
_A64_ARGUMENT_NUMBERS = frozenset("01234567")  # x0-x7, w0-w7 (after the x or w)
# How many bytes a transfer moves per register: by its mnemonic, else its register's.
_A64_NARROW = {"strb": 1, "sturb": 1, "strh": 2, "sturh": 2, "ldrb": 1, "ldurb": 1,
               "ldrh": 2, "ldurh": 2}
_A64_WIDTHS = {"x": 8, "w": 4, "q": 16, "d": 8, "s": 4, "h": 2, "b": 1}
# Loads that zero-extend what they read into a register (a literal's bytes moved on).
_A64_PLAIN_LOADS = frozenset({"ldr", "ldur", "ldrb", "ldurb", "ldrh", "ldurh"})
# Those whose result's bits are known where their operands' are (``bits``).
_A64_BIT_OPERATIONS = frozenset({"and", "orr", "bfi", "bfc"})
_A64_KEEPS_BITS = _A64_BIT_OPERATIONS | _A64_NO_DESTINATION | _A64_CONDITIONAL


# A guard's test: a load of the word or byte (``ldr x1, [x2, #0x10]``), then ``tbz w1, #0``
# (or ``cbz``) to where it is zero; its set: ``mov x3, #1`` and a store of x3 there.
_A64_GUARD_LOAD = re.compile(r"ld(?:a?r|a?rb) [wx](\d+), \[(x\d+)(?:, #(0x[0-9a-f]+|\d+))?\]$")
_A64_GUARD_STORE = re.compile(r"st(?:l?r|l?rb) [wx](\d+), \[(x\d+)(?:, #(0x[0-9a-f]+|\d+))?\]$")
_A64_ONE = re.compile(r"mov [wx](\d+), #1$")
_GUARD_LOOKBACK = 6  # instructions between the guard's load and the branch on it
_GUARD_SET_REACH = 8  # instructions into the way taken when it is zero


def _zero_test(mnemonic: str, operands: str) -> tuple[str, int, bool] | None:
    """(the register tested, where the branch goes, whether it goes there when the
    register is zero) of ``cbz``/``cbnz w1, …`` and ``tbz``/``tbnz w1, #0, …``."""
    if mnemonic not in ("cbz", "cbnz", "tbz", "tbnz"):
        return None
    tested, _, rest = operands.partition(", ")
    if mnemonic[0] == "t":
        bit, _, rest = rest.partition(", ")
        if bit != "#0":
            return None
    target = immediate(rest.lstrip("#"))
    return (tested, target, mnemonic in ("cbz", "tbz")) if target is not None else None


def _stores_zero(operands: str) -> bool:
    """``str wzr, [x0]``, ``stp xzr, xzr, [x1, #8]``: only the zero register is stored."""
    stored = operands[: operands.find("[")].rstrip(", ").split(", ")
    return all(register in ("wzr", "xzr") for register in stored)


def _offset(text: str) -> int | None:
    """A memory operand's immediate offset, negative ones too (``ldur x3, [x19, #-0x10]``:
    a loop that destroys an array from its end reads below the address past it)."""
    if text[:1] == "-":
        found = immediate(text[1:])
        return -found if found is not None else None
    return immediate(text)


def _transfer_width(mnemonic: str, register: str) -> int:
    """How many bytes a load or store moves for one register (``strh w1``: 2, ``stp x2``:
    8 each); 0 where that is not known."""
    return _A64_NARROW.get(mnemonic) or _A64_WIDTHS.get(register[:1], 0)


def _a64_register(name: str) -> str | None:
    """x0/w0 -> x0; fp/lr -> x29/x30; sp, zr and vector registers are not tracked."""
    if name in ("fp", "lr"):
        return "x29" if name == "fp" else "x30"
    if len(name) >= 2 and name[0] in "xw" and name[1:].isdigit():
        return "x" + name[1:]
    return None


_A64_CALLS = frozenset({"bl", "blr"})
_A64_JUMPS = frozenset({"b", "br"})
_A64_WRITES_NOTHING = _A64_NO_DESTINATION | _A64_STOPS | _A64_CONDITIONAL
_A64_SYSTEM_CALLS = frozenset({"svc", "hvc", "smc"})
_A64_FRAME_REGISTERS = frozenset({"sp", "x29", "fp"})
_A64_PLAIN_TRANSFERS = frozenset({"str", "stur", "stp", "ldr", "ldur", "ldp"})
# Those moving one whole register (a pointer) to or from memory; ``ldar`` is how a
# pointer built on first use is read after its guard.
_A64_WHOLE_TRANSFERS = frozenset({"str", "stur", "ldr", "ldur", "ldar", "stlr"})


class Arm64Walk(FunctionWalk):
    ARGUMENTS = ("x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7")
    argument_set = frozenset(ARGUMENTS)
    RESULT_POINTER = "x8"  # a by-value result is built where x8 points
    RESULT = "x0"
    CALLER_SAVED = frozenset([f"x{n}" for n in range(19)] + ["x30"])
    CALL_WRITES = frozenset({"x30"})  # bl/blr put the return address in the link register

    @staticmethod
    def control_transfer(mnemonic: str, operands: str) -> tuple[bool, int | None] | None:
        if mnemonic in _A64_CALLS or mnemonic in _A64_JUMPS:
            return mnemonic in _A64_CALLS, immediate(operands.lstrip("#"))
        return None

    @staticmethod
    def may_return_address(code: bytes) -> bool:
        """An ``adrp``: how an accessor starts building its object's address."""
        words = memoryview(code)[: len(code) // 4 * 4].cast("I")
        return any(word & 0x9F000000 == 0x90000000 for word in words)

    @staticmethod
    def tests_guard_byte(code: bytes) -> bool:
        """An ``ldarb``: how a guard is read before it is tested."""
        words = memoryview(code)[: len(code) // 4 * 4].cast("I")
        return any(word & 0xFFFFFC00 == 0x08DFFC00 for word in words)

    @staticmethod
    def branch_target(mnemonic: str, operands: str) -> int | None:
        if mnemonic in _A64_CONDITIONAL or mnemonic == "b":
            return immediate(operands.rpartition("#")[2])
        return None

    def result_branch(self, following: int) -> tuple[bool, int] | None:
        """``cbz w0``/``cbnz w0``."""
        found = self.instructions_at(following, 1)
        if not found or found[0][2] not in ("cbz", "cbnz") or not found[0][3].startswith("w0, "):
            return None
        target = immediate(found[0][3][4:].lstrip("#"))
        return (found[0][2] == "cbnz", target) if target is not None else None

    def tested_before(self, address: int) -> bool:
        """The guard read earlier in this function's sweep (``ldar x1, [x0]``)."""
        key = self.index.data_key(address)
        return key is not None and any(event[0] == READ and event[1] == key
                                       for event in self.events)

    def guard_set_behind(self, following: int, target: int) -> tuple[int, int] | None:
        """``ldr x1, [x2, #0x10]`` (or ``ldrb``, ``ldar``) a few instructions before
        ``tbz w1, #0`` (``cbz``, ``tbnz``, ``cbnz``), and ``mov x3, #1`` then ``str x3,
        [x2, #0x10]`` on the way taken when it is zero, x2 unchanged."""
        after = self.index_of(following)
        if after is None or after < 2:
            return None
        branch = _zero_test(*self.instructions[after - 1][2:])
        if branch is None:
            return None
        loaded = self._guard_load(after - 1, branch[0][1:])
        base = self.state.get(loaded[0]) if loaded is not None else None
        # An adrp page plus the load's offset is an address as exact as adrp and add
        # make; a guard's address loaded from its GOT slot is one with default
        # visibility in position-independent code (an inline variable's, a template
        # static member's), set through the same register.
        if loaded is None or base is None or not base.exact:
            return None
        at = named_address(base)
        zero = target if branch[2] else following
        start = self.index_of(zero)
        if at is None or start is None or not self._sets_one(start, loaded):
            return None
        return at + loaded[1], zero

    def _guard_load(self, branch: int, tested: str) -> tuple[str, int] | None:
        """(base register, offset) of the load into register number ``tested`` within the
        few instructions before the one at index ``branch``, the base unchanged since."""
        written: set[str] = set()
        for at in range(branch - 1, max(branch - _GUARD_LOOKBACK, 0) - 1, -1):
            mnemonic, operands = self.instructions[at][2:]
            destination = operands.partition(", ")[0]
            if destination[1:] == tested and destination[:1] in "wx":
                found = _A64_GUARD_LOAD.match(f"{mnemonic} {operands}")
                if found is None or found.group(2) in written:
                    return None
                return found.group(2), immediate(found.group(3) or "0") or 0
            if mnemonic in _A64_STOPS or self.control_transfer(mnemonic, operands):
                return None
            if not mnemonic.startswith("st"):
                written.add(_a64_register(destination) or destination)
        return None

    def _sets_one(self, start: int, loaded: tuple[str, int]) -> bool:
        """Whether the instructions from index ``start`` store 1 where ``loaded`` says,
        before anything branches or changes the base register."""
        ones: set[str] = set()
        for _at, _size, mnemonic, operands in self.instructions[start:start + _GUARD_SET_REACH]:
            text = f"{mnemonic} {operands}"
            stored = _A64_GUARD_STORE.match(text)
            if stored is not None and stored.group(1) in ones and stored.group(2) == loaded[0] \
                    and (immediate(stored.group(3) or "0") or 0) == loaded[1]:
                return True
            if mnemonic in _A64_STOPS or self.branch_target(mnemonic, operands) is not None:
                return False
            one = _A64_ONE.match(text)
            if one is not None:
                ones.add(one.group(1))
            elif not mnemonic.startswith("st") and \
                    _a64_register(operands.partition(", ")[0]) == loaded[0]:
                return False
        return False

    def capability_dispatch(self) -> bool:
        """libgcc's outline atomics (``__aarch64_ldadd4_acq_rel`` and the like, in what
        gcc 10 and later build for aarch64 without ``-march`` naming LSE): ``ldrb w16,
        [x16, #…]`` (the flag), ``cbz w16`` to an exclusive pair's loop, else one LSE
        instruction; both on ``[x1]``, both returning, no call.  Unnamed once
        stripped."""
        found = self.instructions_at(self.start, _DISPATCH_REACH)
        mnemonics = [mnemonic for _at, _size, mnemonic, _operands in found]
        load = next((n for n, m in enumerate(mnemonics) if m not in ("adrp", "bti", "hint")),
                    None)
        if load is None or load + 1 >= len(found) or mnemonics[load] != "ldrb" \
                or not found[load][3].startswith("w16, [x16") \
                or mnemonics[load + 1] not in ("cbz", "cbnz") \
                or not found[load + 1][3].startswith("w16, "):
            return False
        on_argument = [mnemonic for _at, _size, mnemonic, operands in found
                       if operands.endswith("[x1]")]
        return any(m.startswith(_A64_READ_WRITE) for m in on_argument) \
            and any(m.startswith(("ldxr", "ldaxr", "ldxp", "ldaxp")) for m in on_argument) \
            and not any(m in _A64_CALLS for m in mnemonics)

    def counter_tested(self, first: int) -> bool:
        """The count read whole into a register (``ldr w0, [x1]``, then ``add w2, w0, #1;
        str w2, [x1]``; an exclusive pair, ``ldaxr w0, [x1]`` … ``stlxr w3, w2, [x1]``,
        whose retry on the status register is passed over) or exchanged and added
        (``ldaddal w3, w0, [x1]``), then ``cbnz w0`` to a return, or ``cbz w0`` past
        one: libstdc++'s ``ios_base::Init`` on aarch64."""
        found = self.instructions_at(first, 1 + _COUNTER_TEST_REACH)
        if not found:
            return False
        mnemonic, operands = found[0][2:]
        listed = operands.partition("[")[0].rstrip(", ").split(", ")
        if mnemonic in _A64_COUNT_LOADS:
            count = _a64_register(listed[0])
        elif mnemonic.startswith("ldadd") and len(listed) == 2:
            count = _a64_register(listed[1])
        else:
            return False
        for at, size, mnemonic, operands in found[1:]:
            # A count's test is of all its bits (cbz), a flag's of one (tbz, #0).
            branch = _zero_test(mnemonic, operands) if mnemonic[0] == "c" else None
            if branch is not None and _a64_register(branch[0]) == count:
                _tested, target, when_zero = branch
                return self.returns_at_once(at + size if when_zero else target)
            written = self.registers_set(mnemonic, operands)
            if written is None or count in written or (
                    branch is None and self.branch_target(mnemonic, operands) is not None):
                return False
        return False

    def flag_paths(self, first: int) -> FlagTest | None:
        """``ldrb w1, [x0, #48]`` then ``cbnz w1, …`` (``cbz``, ``tbnz w1, #0``,
        ``tbz``): the ways taken when the flag is set and when not.  A few instructions that
        neither branch nor write the flag's register may come between (gcc puts the
        stack protector's set-up there)."""
        found = self.instructions_at(first, 1 + _FLAG_TEST_REACH)
        if len(found) < 2 or not found[0][2].startswith("ldr"):
            return None
        flag = found[0][3].partition(", ")[0]
        for at, size, mnemonic, operands in found[1:]:
            branch = _zero_test(mnemonic, operands)
            if branch is not None:
                if branch[0] != flag:
                    return None
                pointer = mnemonic in ("cbz", "cbnz") and flag.startswith("x")
                if branch[2]:
                    return FlagTest(at + size, branch[1], pointer)
                return FlagTest(branch[1], at + size, pointer)
            written = self.registers_set(mnemonic, operands)
            if mnemonic in _A64_CONDITIONAL or mnemonic in _A64_STOPS \
                    or mnemonic in _A64_CALLS or mnemonic in _A64_JUMPS or written is None \
                    or _a64_register(flag) in written:
                return None
        return None

    def returns_at_once(self, address: int) -> bool:
        """The stack protector's check on the way (the guard loaded through its GOT
        slot, compared with the frame's copy, a branch into ``__stack_chk_fail``) is
        no effect: loads write no memory."""
        for _at, _size, mnemonic, operands in self.instructions_at(address, _SHORT_EXIT):
            if mnemonic in ("ret", "retaa", "retab"):
                return True
            if mnemonic in _A64_CONDITIONAL:
                target = self.branch_target(mnemonic, operands)
                if target is None or not self.tail_fails(target):
                    return False
            elif mnemonic not in _A64_SHORT_EXIT or ("[" in operands
                                                     and mnemonic not in _A64_LOADS
                                                     and not _A64_FRAME.search(operands)):
                return False
        return False

    @staticmethod
    def stack_writes(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        destination = operands.partition(", ")[0]
        if destination in ("sp", "wsp"):
            return None
        if destination in ("x29", "fp"):
            return ("[x29",)
        match = _A64_MEMORY.search(operands) if mnemonic.startswith(_A64_TRANSFER) else None
        if match is None or match.group(1) not in _A64_FRAME_REGISTERS:
            return ()
        base = "sp" if match.group(1) == "sp" else "x29"
        offset = immediate((match.group(2) or "0").lstrip("#"))
        if match.group(3) or match.group(4) or offset is None:  # writeback, or an index
            return None
        if not mnemonic.startswith("st"):
            return ()
        stored = operands[: match.start()].rstrip(", ").split(", ")
        return tuple(f"[{base}{offset + 8 * n:+d}]" for n in range(len(stored)))

    @staticmethod
    def registers_set(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        if mnemonic in _A64_WRITES_NOTHING:
            return ()
        if not operands or mnemonic in _A64_SYSTEM_CALLS:
            return None
        match = _A64_MEMORY.search(operands) if mnemonic.startswith(_A64_TRANSFER) else None
        if match is None:
            first = _a64_register(operands.partition(",")[0])
            return (first,) if first is not None else ()
        listed = [_a64_register(r) for r in operands[: match.start()].rstrip(", ").split(", ")]
        if mnemonic.startswith("ld") or mnemonic.startswith(_A64_READ_WRITE):
            written = listed
        else:  # a store writes only its exclusive status register
            written = listed[:1] if mnemonic.startswith(("stx", "stlx")) else []
        if match.group(3) or match.group(4):  # pre/post-index writeback
            written.append(_a64_register(match.group(1)))
        return tuple(r for r in written if r is not None)

    def other(self, address: int, size: int, mnemonic: str, operands: str) -> bool:
        if self.numbers and not mnemonic.startswith(_A64_TRANSFER):
            if mnemonic == "movk":
                self.move_keeping(operands)
                return True
            self.numbers.clear()  # only moves, loads and stores keep them
        if self.bits and mnemonic not in _A64_KEEPS_BITS and not mnemonic.startswith(_A64_TRANSFER):
            self.bits.clear()  # loads and stores keep them, and what tests or fixes bits
        if mnemonic in _A64_STOPS:
            if mnemonic.startswith("ret"):
                self.returns()
            else:
                self.traps()
            return False
        if mnemonic in _A64_CONDITIONAL:
            if mnemonic[0] != "b":  # cbz w0, …: a compare of w0 with 0
                self.tests(operands.partition(", ")[0])
            target = immediate(operands.rpartition("#")[2])
            if target is not None:
                condition = self.condition_of(mnemonic, operands)
                if self.paths is None and mnemonic in ("cbz", "tbz") \
                        and self.never_zero(mnemonic, operands):
                    self.never_equal, condition = address, "eq"  # never taken
                return self.conditional(condition, address + size, target)
        elif mnemonic == "cmp":
            register, _, other = operands.partition(", ")
            if self.paths is not None:
                self.compare(address + size, _a64_register(register),
                             immediate(other.lstrip("#")), 32 if register[:1] == "w" else 64)
            else:
                self.tests(register)
                if immediate(other.lstrip("#")) == 0:
                    self.tested_against_zero(_a64_register(register), address + size)
        elif mnemonic == "tst" and self.paths is not None:
            register, _, mask = operands.partition(", ")
            amount = immediate(mask.lstrip("#"))
            if amount is not None:
                self.tested_bits(address + size, self.register_bits(_a64_register(register)),
                                 amount, 32 if register[:1] == "w" else 64)
        elif mnemonic == "tst":  # tst w0, #0xff: a bool's test
            register, _, mask = operands.partition(", ")
            self.tests_loaded(register)
            value = self.state.get(_a64_register(register) or "")
            bits = immediate(mask.lstrip("#"))
            if value is not None and value.constant is not None and bits is not None \
                    and value.constant & bits:
                self.never_equal = address + size
        elif mnemonic == "cset" and operands.endswith((", ne", ", eq")):
            register, _, condition = operands.partition(", ")
            self.set_on_condition(_a64_register(register), condition == "eq", address)
        elif mnemonic == "cmn":  # cmn x0, #1: a compare with -1
            register, _, other = operands.partition(", ")
            if immediate(other.lstrip("#")) == 1:
                self.compared_to_minus_one(_a64_register(register), address + size)
        elif "[" in operands and mnemonic.startswith(_A64_TRANSFER):
            self.transfer(mnemonic, operands)
        elif mnemonic in _A64_BIT_OPERATIONS:
            self.bit_operation(mnemonic, operands)
        elif mnemonic not in _A64_NO_DESTINATION:
            destination = operands.partition(",")[0]
            self.moves_frame(destination)
            if self.state:
                self.set(_a64_register(destination), None)
        return True

    def bit_operation(self, mnemonic: str, operands: str) -> None:
        """``and x2, x2, #0xfc000000``, ``orr``, ``bfi w1, w2, #4, #1``, ``bfc w1, #4,
        #1``: the bits they fix are known (``bits``)."""
        parts = operands.split(", ")
        destination = parts[0]
        self.moves_frame(destination)
        register = _a64_register(destination)
        width = 32 if destination[:1] == "w" else 64
        numbers = [immediate(part.lstrip("#")) for part in parts[1:] if part[:1] == "#"]
        if None in numbers or len(numbers) != (1 if mnemonic in ("and", "orr") else 2) \
                or len(parts) != (2 if mnemonic == "bfc" else 3) + len(numbers) - 1:
            self.set(register, None)
            return
        amounts = [number for number in numbers if number is not None]
        if mnemonic in ("and", "orr"):
            before = self.register_bits(_a64_register(parts[1])) or UNKNOWN
            change = anded if mnemonic == "and" else ored
            self.set_bits(register, change(before, amounts[0], width))
            return
        # bfi puts the low bits of a register in place, bfc zeros.
        field = self.register_bits(_a64_register(parts[1])) if mnemonic == "bfi" \
            else exactly(0)
        old = self.register_bits(register) or UNKNOWN
        self.set_bits(register, inserted(old, field or UNKNOWN, amounts[0], amounts[1], width))

    def never_zero(self, mnemonic: str, operands: str) -> bool:
        """Whether ``cbz w0, …`` (or ``tbz w0, #0, …``), taken when w0 (its bit) is zero,
        tests a register that holds a number known not to be (``tested_against_zero``)."""
        register, _, rest = operands.partition(", ")
        value = self.state.get(_a64_register(register) or "")
        if value is None:
            return False
        if mnemonic == "cbz" and register[:1] == "x" and never_null_when_allocated(value):
            return True
        if value.constant is None:
            return False
        if mnemonic == "cbz":
            return value.constant != 0
        bit = immediate(rest.partition(", ")[0].lstrip("#"))
        return bit is not None and bool(value.constant >> bit & 1)

    def tests(self, register: str) -> None:
        """The function compares ``register``: an argument's, if it is x0-x7, or one
        loaded through an argument's."""
        if register[:1] in "xw" and register[1:] in _A64_ARGUMENT_NUMBERS:
            self.summary.tests_arguments |= 1 << int(register[1:])
        self.tests_loaded(register)

    def tests_loaded(self, register: str) -> None:
        """The function tests ``register``: bytes loaded through an argument's, if it
        holds them (``FunctionSummary.tests_through``)."""
        through = self.loaded_through.get(_a64_register(register) or "") \
            if self.loaded_through else None
        if through is not None:
            self.summary.tests_through.add(through)

    def condition_of(self, mnemonic: str, operands: str) -> str | None:
        """``b.eq`` -> ``eq`` (in any walk: a branch never taken is known in each,
        ``never_taken``); ``cbz w0`` tests w0 against 0 (``eq``), ``cbnz`` (``ne``), in
        a walk that decides; None for what is not decided (tbz, tbnz)."""
        if mnemonic.startswith("b."):
            return mnemonic[2:]
        if self.paths is None:
            return None
        register, _, rest = operands.partition(", ")
        known = self.register_bits(_a64_register(register))
        if known is None:
            return None
        width = 32 if register[:1] == "w" else 64
        if mnemonic in ("tbz", "tbnz"):  # tbz w0, #4, …: taken when that bit is zero
            bit = immediate(rest.partition(", ")[0].lstrip("#"))
            result = selected(known, 1 << bit) if bit is not None else None
        else:
            result = whole(known, width)
        if result is None:
            return None
        self.flags = (self.paths.current, result, 0, width, False)
        return "eq" if mnemonic in ("cbz", "tbz") else "ne"

    # -- control flow -----------------------------------------------------------
    def on_bl(self, following: int, operands: str) -> bool:
        target = immediate(operands.lstrip("#"))
        self.call(Value(address=target) if target is not None else None, following)
        self.called()
        return True

    def on_blr(self, following: int, operands: str) -> bool:
        self.call(self.state.get(_a64_register(operands) or ""))
        self.called()
        return True

    def on_b(self, following: int, operands: str) -> bool:
        target = immediate(operands.lstrip("#"))
        return self.jump(target) if target is not None else self.tail_call(None)

    def on_br(self, following: int, operands: str) -> bool:
        return self.tail_call(self.state.get(_a64_register(operands) or ""))

    # -- addresses ----------------------------------------------------------------
    def on_adrp(self, following: int, operands: str) -> bool:
        return self.address_of(operands, page=True)

    def on_adr(self, following: int, operands: str) -> bool:
        return self.address_of(operands, page=False)

    def address_of(self, operands: str, page: bool) -> bool:
        destination, _, source = operands.partition(", ")
        number = immediate(source.lstrip("#"))
        self.set(_a64_register(destination),
                 Value(address=number, page=page) if number is not None else None)
        return True

    def on_add(self, following: int, operands: str) -> bool:
        parts = operands.split(", ")
        self.moves_frame(parts[0])
        if len(parts) == 3 and parts[1] == "sp" and parts[0][:1] == "x" \
                and parts[0] != "x29":  # an address on the stack (not the frame pointer)
            amount = immediate(parts[2].lstrip("#"))
            self.set(_a64_register(parts[0]), Value(stack=amount) if amount is not None
                     else None)
            return True
        if not self.state:
            if self.numbers:
                self.numbers.pop(_a64_register(parts[0]) or "", None)
            if self.bits:
                self.bits.pop(_a64_register(parts[0]) or "", None)
            return True
        base = self.state.get(_a64_register(parts[1]) or "") if len(parts) > 2 else None
        amount = immediate(parts[2].lstrip("#")) if base is not None else None
        if len(parts) == 4 and parts[3] == "lsl #12" and amount is not None:
            amount <<= 12
        elif len(parts) != 3:
            amount = None
        value = None
        if base is not None and base.address is not None and base.exact and amount is not None:
            value = Value(address=base.address + amount)
        elif base is not None and base.got is not None and base.exact and amount is not None \
                and self.index.keys_by_address and (own := named_address(base)) is not None:
            value = Value(address=own + amount)  # keyed by address: moved a known amount
        elif base is not None and (amount is not None or parts[2][:1] in "xw"):
            # A register index, or a constant on a GOT address or a parameter:
            # still a pointer into the same object.
            value = self.derived(base)
        self.set(_a64_register(parts[0]), value)
        return True

    def on_mov(self, following: int, operands: str) -> bool:
        destination, _, source = operands.partition(", ")
        self.moves_frame(destination)
        if source[:1] == "#" or source in ("wzr", "xzr"):  # a number a call may pass
            self.number(_a64_register(destination),
                        immediate(source.lstrip("#")) if source[:1] == "#" else 0)
        elif source == "sp" and destination[:1] == "x" and destination != "x29":
            self.set(_a64_register(destination), Value(stack=0))
        elif self.state or self.numbers or self.bits:
            value = self.state.get(_a64_register(source) or "")
            number = self.register_number(source)
            if number is not None:
                self.number(_a64_register(destination), number)
            else:  # a 32-bit copy of an address is no address
                self.set(_a64_register(destination), value if source[:1] == "x" else None)
                known = self.bits.get(_a64_register(source) or "")
                if known is not None and source[:1] == destination[:1] == "x":
                    self.bits[_a64_register(destination) or ""] = known
        return True

    def move_keeping(self, operands: str) -> None:
        """``movk w1, #0x6372, lsl #16``: 16 bits of a register's number replaced."""
        parts = operands.split(", ")
        register = _a64_register(parts[0])
        bits = immediate(parts[1].lstrip("#")) if len(parts) > 1 else None
        shift = immediate(parts[2].removeprefix("lsl #")) if len(parts) > 2 else 0
        found = self.register_number(parts[0])
        self.set(register, None)
        if found is not None and bits is not None and shift is not None:
            self.number(register, found & ~(0xFFFF << shift) | bits << shift)

    def register_number(self, name: str) -> int | None:
        """The number a register (``x3``, ``w3``, ``wzr``) holds, if known."""
        if name in ("wzr", "xzr"):
            return 0
        register = _a64_register(name) or ""
        value = self.state.get(register)
        found = value.constant if value is not None and value.constant is not None \
            else self.numbers.get(register)
        return found & 0xFFFF_FFFF if found is not None and name[:1] == "w" else found

    def stored_registers(self, mnemonic: str, names: list[str], offset: int | None) -> None:
        """A store of the registers ``names`` at ``offset`` past sp, one after the other
        (None: somewhere the stack may be)."""
        if mnemonic.startswith(("stx", "stlx")):  # the first register is the status
            names = names[1:]
        for position, name in enumerate(names):
            width = _transfer_width(mnemonic, name)
            self.stored_on_stack(offset + position * width if offset is not None else None,
                                 width, self.register_number(name))

    def moves_frame(self, destination: str) -> None:
        """sp or the frame pointer changes: the slots addressed through it are others now."""
        if destination == "sp":
            self.forget_slots("sp")
        elif destination in ("x29", "fp"):
            self.forget_slots("x29")

    # -- loads and stores -------------------------------------------------------
    def transfer(self, mnemonic: str, operands: str) -> None:
        """A load or store: its memory access, and the registers it writes."""
        match = _A64_MEMORY.search(operands)
        if match is None:
            return
        base_register = _a64_register(match.group(1))
        base = self.state.get(base_register or "")
        if base is not None and base.constant is not None:  # a number is no object's address
            base = None
        names = operands[: match.start()].rstrip(", ").split(", ")
        registers = [_a64_register(r) for r in names]
        if base is None and match.group(1) in _A64_FRAME_REGISTERS:
            if (self.memory_bits or self.through) and match.group(1) != "sp" \
                    and not mnemonic.startswith("ld"):
                self.wrote_memory(None, 0, 0)  # x29 may be an ordinary register
            self.stack_transfer(mnemonic, match, names, registers)
            return
        read_write = mnemonic.startswith(_A64_READ_WRITE)
        loads = mnemonic.startswith("ld") or read_write
        offset = _offset((match.group(2) or "0").lstrip("#"))
        place = base.stack + offset if base is not None and base.stack is not None \
            and offset is not None else None
        if not loads and (self.stack_known() or place is not None):
            # Through a pointer that may be to the stack (``place`` None): anywhere.
            self.stored_registers(mnemonic, names, place)
        loaded = None
        if loads and not read_write:
            # A load gives bits only in a walk a caller passed them to (as on x86-64), or
            # one that knows the globals quiet at load.
            knowing = (bool(self.through) and base is None) \
                or (self.quiet is not None and base is not None)
        else:
            knowing = bool(self.memory_bits or self.through) or base is not None
        if knowing:
            if offset is not None and not (match.group(3) or match.group(4)):
                # Worked out before the load overwrites its base (``ldrh w0, [x0, #10]``).
                loaded = self.transfer_bits(mnemonic, names, base, match.group(1), offset,
                                            loads, read_write)
            elif not loads or read_write:
                self.wrote_memory(None, 0, 0)  # an index, a writeback: not known exactly
        if base is not None:
            self.located(mnemonic, operands, base, offset, registers, loads, read_write)
        elif loads:
            self.kill(registers)
        if loaded is not None:
            self.set_bits(*loaded)
        if mnemonic.startswith(("stx", "stlx")):
            self.kill(registers[:1])  # the status register
        if match.group(3) or match.group(4):  # pre/post-index writeback
            self.set(base_register, None)
        if loads and self.paths is None and offset is not None:
            # Once the load has written the registers (which forgets what they held).
            self.loaded_to_test(mnemonic, match.group(1), base, offset, names, registers)

    def loaded_to_test(self, mnemonic: str, base_name: str, base: Value | None, offset: int,
                       names: list[str], registers: list[str | None]) -> None:
        """A plain walk's load: the bytes each register comes from, in case the code
        tests it (``tests_loaded``): through an argument register (``ldrh w8, [x0,
        #10]``), or a global's, by its address (``adrp x1, flag``; ``ldr w1, [x1,
        #0x48]``)."""
        at = self.global_place(base, offset) if base is not None else None
        if at is not None:
            tested, start = GLOBAL, at
        elif base_name[:1] == "x" and base_name[1:] in _A64_ARGUMENT_NUMBERS:
            tested, start = int(base_name[1:]), offset
        else:
            return
        for position, (name, register) in enumerate(zip(names, registers, strict=True)):
            width = _transfer_width(mnemonic, name)
            if register is not None:
                self.loaded_through[register] = (tested, start + position * width, width)

    def transfer_bits(self, mnemonic: str, names: list[str], base: Value | None,
                      base_name: str, offset: int, loads: bool,
                      read_write: bool) -> tuple[str | None, Bits] | None:
        """What a load or store does to the bits known of memory (``bits``): a load of
        bytes known gives their bits (``ldrh w0, [x0, #10]``, zero-extended), returned
        as (register, bits) for after the load; a store leaves what it stores known
        there."""
        if mnemonic.startswith(("stx", "stlx")):
            names = names[1:]
        for position, name in enumerate(names):
            width = _transfer_width(mnemonic, name)
            at = offset + position * width
            if loads and not read_write and mnemonic in _A64_PLAIN_LOADS and len(names) == 1:
                known = self.memory_at(base, at, width, through=None if base is not None
                                       else _a64_register(base_name))
                if known is None:
                    return None
                return _a64_register(name), zero_extended(known, 8 * width)
            if not loads or read_write:
                # What an atomic read-modify-write leaves there is not known.
                stored = None if read_write else exactly(0) if name in ("wzr", "xzr") \
                    else self.register_bits(_a64_register(name))
                self.wrote_memory(base, at, width, stored)
        return None

    def located(self, mnemonic: str, operands: str, base: Value, offset: int | None,
                registers: list[str | None], loads: bool, read_write: bool) -> None:
        """A transfer whose base register holds a known address."""
        if offset is None and base.page:
            self.kill(registers if loads else [])
            return
        if loads and not read_write and len(registers) == 1 and operands.startswith("x") \
                and base.address is not None and offset is not None \
                and self.load_from(registers[0], base.address + offset):
            return
        stores = mnemonic.startswith("st")
        stored = self.state.get(registers[0] or "") if stores and len(registers) == 1 else None
        key = self.access(base, offset or 0, read=loads, write=stores or read_write,
                          zero=stores and not read_write and _stores_zero(operands),
                          one=not read_write and stored is not None and (
                              stored.constant == 1
                              or (operands.startswith("x") and never_null(stored))),
                          # q registers: 16 bytes each, 32 for a pair
                          width=16 * len(registers) if operands.startswith("q") else 0)
        whole = mnemonic in _A64_WHOLE_TRANSFERS and operands.startswith("x") \
            and len(registers) == 1 and base.parameter is None
        if mnemonic in ("str", "stur") and registers and operands.startswith("x"):
            self.stamp(base, offset or 0, self.state.get(registers[0] or ""))
            if whole:
                self.stored(registers[0], key)
        if mnemonic in ("str", "stur", "stp") and operands.startswith("x"):
            for position, register in enumerate(registers):  # stp: at +0 and +8
                self.stores_address(base, (offset or 0) + 8 * position,
                                    self.state.get(register or ""))
        if loads:
            self.kill(registers)
            if whole and not read_write:
                self.loaded(registers[0], key)
            if mnemonic in _A64_PLAIN_LOADS and len(registers) == 1 and registers[0] \
                    and base.address is not None and base.exact and offset is not None:
                self.load_number(registers[0], base.address + offset,
                                 _transfer_width(mnemonic, operands))

    def load_number(self, register: str, address: int, width: int) -> None:
        """A load of bytes nothing writes (a literal's, to be stored on the stack)."""
        found = self.index.constant_number(address, width)
        if found is not None:
            self.numbers[register] = found

    def stack_transfer(self, mnemonic: str, match: re.Match[str], names: list[str],
                       registers: list[str | None]) -> None:
        """A spill to, or a reload from, ``[sp, #n]`` / ``[x29, #n]``."""
        base = "sp" if match.group(1) == "sp" else "x29"
        stores = mnemonic.startswith("st")
        offset = immediate((match.group(2) or "0").lstrip("#"))
        if stores and (base == "sp" or self.stack_known()):
            self.stored_registers(mnemonic, names, offset if base == "sp" and not (
                match.group(3) or match.group(4)) else None)
        if match.group(3) or match.group(4) or offset is None:  # writeback, or an index
            self.forget_slots(base)
            if not stores:
                self.kill(registers)
            return
        # Only whole 64-bit registers (x0, not w0) keep an address.
        whole = mnemonic in _A64_PLAIN_TRANSFERS and names[0].startswith("x")
        for position, register in enumerate(registers):
            key = f"[{base}{offset + 8 * position:+d}]"
            if stores:
                self.store_slot(key, self.state.get(register or "") if whole else None)
            else:
                self.set(register, self.state.get(key) if whole else None)
        if mnemonic.startswith(("stx", "stlx")):
            self.kill(registers[:1])  # the status register

    def kill(self, registers: list[str | None]) -> None:
        for register in registers:
            self.set(register, None)


Arm64Walk.BRANCH_SIZES = frozenset({4})
Arm64Walk.KEEPS_FLAGS = frozenset({"adrp", "adr", "add", "sub", "mov", "movz", "movk", "ldr",
                                   "ldur", "ldp", "str", "stur", "stp", "orr", "fmov"})
Arm64Walk.BRANCH_INITIALS = "bct"  # b, b.cc, cbz, cbnz, tbz, tbnz
Arm64Walk.STOPS = _A64_STOPS
Arm64Walk.HANDLERS = {
    "bl": Arm64Walk.on_bl, "blr": Arm64Walk.on_blr, "b": Arm64Walk.on_b,
    "br": Arm64Walk.on_br, "adrp": Arm64Walk.on_adrp, "adr": Arm64Walk.on_adr,
    "add": Arm64Walk.on_add, "mov": Arm64Walk.on_mov,
}


WALK = Arm64Walk
