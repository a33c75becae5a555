"""x86-64: the instructions that move addresses, read and write memory, call and jump.

capstone's Intel syntax is read as text: ``lea rdi, [rip + 0x2e61]``, ``mov
rax, qword ptr [rip + 0x2d3a]`` (a GOT slot), ``call 0x10a0`` (a PLT stub).
A fixed-address executable may also hold data addresses as immediates and
absolute displacements.  Arguments are passed in rdi, rsi, rdx, rcx, r8, r9
(System V); spills go to ``[rbp - n]`` (-O0) or ``[rsp + n]``.

What is read from capstone, and relied on:

- from ``disasm_lite`` (no detail): the mnemonic, with its prefixes as
  words (``bnd jmp``, ``notrack jmp``, ``rep stosq``), and the operand
  string: operands separated by ``", "``, the destination first; register
  names in lower case; numbers as ``0x``-prefixed hexadecimal (decimal
  below 10); memory as ``<size> ptr [base + index*scale +/- disp]`` with a
  segment before the bracket (``fs:[rax]``), a rip-relative one as ``[rip
  + 0x...]`` relative to the next instruction; a direct branch target as a
  bare absolute address;
- from detail mode, only in ``memory_access`` (a few instructions per
  function): whether the memory operand (``X86_OP_MEM``) is read or
  written (``op.access``).

Detail mode for every instruction would replace the text with structured
operands, but it costs several times the whole walk (measured on
libtorch_cpu.so: the walk took 2.1 s of CPU, decoding the same code with
detail and reading its operands 6.2 s), so the text is read, and
``tests/test_effects_corpus.py`` pins both capstone's text for the forms
above and what this walker makes of it: a capstone whose printer changes
fails that test (``pyproject.toml`` caps capstone at the major release
the corpus was recorded with).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from elfpatch.analysis.effects.bits import (
    UNKNOWN,
    Bits,
    anded,
    exactly,
    ored,
    whole,
    zero_extended,
)
from elfpatch.analysis.effects.summary import GLOBAL, Constants
from elfpatch.analysis.effects.walk import (
    Analyzer,
    FlagTest,
    FunctionWalk,
    Value,
    address_value,
    constant_value,
    got_value,
    immediate,
    named_address,
    never_null,
    number,
)
from elfpatch.elf.constants import EM_X86_64
from elfpatch.errors import ElfpatchError

if TYPE_CHECKING:
    from capstone import Cs

MACHINE = EM_X86_64

def _x86_registers() -> dict[str, str]:
    families = [("rax", "eax", "ax", "al", "ah"), ("rbx", "ebx", "bx", "bl", "bh"),
                ("rcx", "ecx", "cx", "cl", "ch"), ("rdx", "edx", "dx", "dl", "dh"),
                ("rsi", "esi", "si", "sil"), ("rdi", "edi", "di", "dil"),
                ("rbp", "ebp", "bp", "bpl"), ("rsp", "esp", "sp", "spl")]
    families += [(f"r{n}", f"r{n}d", f"r{n}w", f"r{n}b") for n in range(8, 16)]
    return {name: names[0] for names in families for name in names}


_X86_FAMILY = _x86_registers()
_X86_QWORD = frozenset(_X86_FAMILY.values())  # the 64-bit names
# 64- and 32-bit names: writing them sets the whole register.
_X86_WIDE = frozenset(name for name in _X86_FAMILY
                      if (name.startswith("r") and not name.endswith(("w", "b")))
                      or name.startswith("e"))
_X86_CONDITIONAL = frozenset({"jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja", "js", "jns",
                              "jp", "jnp", "jl", "jge", "jle", "jg", "jcxz", "jecxz", "jrcxz",
                              "loop", "loope", "loopne"})
_X86_STOPS = frozenset({"ret", "retf", "bnd ret", "ud2", "hlt", "int3"})
# What a function's early return does on its way out: restore registers, set the result.
_X86_SHORT_EXIT = frozenset({"pop", "add", "sub", "lea", "mov", "xor", "leave", "nop",
                             "endbr64", "movzx", "movsx"})
_SHORT_EXIT = 12  # instructions
# From a nifty counter's read to its test: the increment and its store come between.
_COUNTER_TEST_REACH = 5
_X86_LOW_BYTE = {"eax": "al", "ebx": "bl", "ecx": "cl", "edx": "dl", "esi": "sil",
                 "edi": "dil", **{f"r{n}d": f"r{n}b" for n in range(8, 16)}}
_X86_NO_DESTINATION = frozenset({"cmp", "test", "push", "bt", "comiss", "comisd", "ucomiss",
                                 "ucomisd", "ptest", "nop", "endbr64", "prefetcht0",
                                 "prefetcht1", "prefetcht2", "prefetchnta", "prefetchw"})
# Instructions whose memory operand is no access: the long NOPs gcc pads loop heads
# with (``nop word ptr cs:[rax + rax]``, whatever the register holds) and prefetches.
_X86_HINTS = frozenset({"nop", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
                        "prefetchw"})
_X86_READS_MEMORY = frozenset({"cmp", "test", "movzx", "movsx", "movsxd", "push"})
# Moves, scalar and vector, whose destination is their first operand (the rest of
# those starting so are listed above: they only read memory).
_X86_MOVES = ("mov", "vmov")
# How many bytes a vector register's memory operand covers.
_X86_VECTOR_WIDTHS = {"xmmword": 16, "ymmword": 32, "zmmword": 64}
# Instructions that write registers they do not name (string ops, mul/div, cpuid…).
_X86_IMPLICIT = frozenset({"mul", "div", "idiv", "cdq", "cqo", "cwd", "cdqe", "cpuid",
                           "rdtsc", "rdtscp", "syscall", "xchg", "xadd", "cmpxchg",
                           "cmpxchg16b", "stosb", "stosw", "stosd", "stosq", "movsb",
                           "movsw", "movsq", "lodsb", "lodsq", "scasb", "cmpsb", "xgetbv"})
# lea r64, [rip + disp32]: how an accessor takes its object's address to return it.
_LEA_RIP = re.compile(rb"[\x48\x4c]\x8d[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]")
_GUARD_BYTE_LOAD = re.compile(rb"\x0f\xb6[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]|\x80\x3d")
_X86_OP_MEM = 3  # capstone.x86.X86_OP_MEM
_X86_COMPARES = frozenset({"cmp", "test"})
_X86_ARGUMENTS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")  # in the order they are passed
_X86_ARGUMENT_BITS = {name: 1 << _X86_ARGUMENTS.index(family)
                      for name, family in _X86_FAMILY.items() if family in _X86_ARGUMENTS}
_CS_AC_READ, _CS_AC_WRITE = 1, 2
# AND and OR with a number, and a bit set or cleared: the bits they fix are known
# (``bits``).  Each as an AND with a mask and an OR with a number.
_X86_BIT_OPERATIONS: dict[str, Callable[[int, int], tuple[int, int]]] = {
    "and": lambda amount, low: (amount, 0),
    "or": lambda amount, low: (low, amount),
    "bts": lambda bit, low: (low, 1 << bit),
    "btr": lambda bit, low: (low & ~(1 << bit), 0),
}


_X86_CALLS = frozenset({"call", "bnd call", "notrack call"})
_X86_JUMPS = frozenset({"jmp", "bnd jmp", "notrack jmp", "notrack bnd jmp"})
_X86_LOOPS = frozenset({"loop", "loope", "loopne"})  # conditional, and they decrement rcx
# Instructions that write no general register (beyond rsp and rbp, which calls preserve).
_X86_WRITES_NOTHING = (_X86_NO_DESTINATION | _X86_STOPS | (_X86_CONDITIONAL - _X86_LOOPS)
                       | {"leave", "pause", "lfence", "mfence", "sfence", "vzeroupper",
                          "vzeroall", "cld", "std", "clc", "stc", "cmc"})
# String operations (without rep) step rdi/rsi; capstone names their operands
# "byte ptr [rdi]"; SSE's movsd and cmpsd share two of the names.
_X86_STRING_OPERATIONS = frozenset(f"{name}{width}" for name in ("movs", "stos", "lods", "scas",
                                                                 "cmps", "ins", "outs")
                                   for width in "bwdq")
_X86_STRING_OPERAND = re.compile(r"\[[re][sd]i\]")


# How many instructions into the way taken when a guard byte is zero gcc sets it (it
# loads the arguments of the construction around the store).
_GUARD_SET_REACH = 6
# How many instructions that leave the flags alone may come between a flag's
# ``cmp`` and its branch (``flag_paths``).
_FLAG_TEST_REACH = 2
# Moves gcc -flto may put between a guard byte's compare and its branch.
_GUARD_TEST_REACH = 4
_KEEPS_FLAGS = frozenset({"lea", "mov", "movzx", "movsxd", "movabs"})


def _keeps_flags_and_memory(mnemonic: str, operands: str) -> bool:
    """Whether the instruction sets a register alone, the flags untouched."""
    return mnemonic in _KEEPS_FLAGS and "[" not in operands.partition(", ")[0]


def _rip_byte(at: int, size: int, operands: str) -> int | None:
    """The global byte ``byte ptr [rip + d]`` names in the operands of the instruction
    at ``at`` of ``size`` bytes."""
    start = operands.find(_RIP_BYTE)
    if start < 0:
        return None
    inside = operands[start + len(_RIP_BYTE):operands.index("]", start)]
    displacement = immediate(inside.strip())
    return at + size + displacement if displacement is not None else None


_RIP_BYTE = "byte ptr [rip + "


def _flag_byte(instruction: tuple[int, int, str, str], value: str) -> int | None:
    """The global byte that ``cmp``/``mov byte ptr [rip + d], value`` names."""
    at, size, mnemonic, operands = instruction
    if mnemonic not in ("cmp", "mov") or not operands.startswith(_RIP_BYTE) \
            or not operands.endswith(value):
        return None
    return _rip_byte(at, size, operands)


def _byte_read(instruction: tuple[int, int, str, str]) -> int | None:
    """The global byte ``movzx e.., byte ptr [rip + d]`` loads or ``cmp byte ptr
    [rip + d], 0`` tests."""
    if instruction[2] == "cmp":
        return _flag_byte(instruction, ", 0")
    at, size, mnemonic, operands = instruction
    return _rip_byte(at, size, operands) if mnemonic == "movzx" else None


def _on_frame_only(operands: str) -> bool:
    """Whether the memory the operands name, if any, is the stack frame or the thread's
    stack protector value."""
    return "[" not in operands or (bool(_FRAME_OPERAND.search(operands)) \
        and operands.count("[") == 1)


_FRAME_OPERAND = re.compile(r"(\[r[sb]p\b|fs:\[0x28\])")


class X86Walk(FunctionWalk):
    ARGUMENTS = _X86_ARGUMENTS
    STACK_POINTER = "rsp"
    argument_set = frozenset(ARGUMENTS)
    RESULT = "rax"
    CALLER_SAVED = frozenset({"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"})

    @staticmethod
    def control_transfer(mnemonic: str, operands: str) -> tuple[bool, int | None] | None:
        if mnemonic in _X86_CALLS or mnemonic in _X86_JUMPS:
            return mnemonic in _X86_CALLS, immediate(operands)
        return None

    @staticmethod
    def branch_target(mnemonic: str, operands: str) -> int | None:
        if mnemonic in _X86_CONDITIONAL or mnemonic in _X86_JUMPS:
            return immediate(operands)
        return None

    def tested_before(self, address: int) -> bool:
        """The byte read as ``movzx e.., byte ptr [rip + d]`` or compared by ``cmp byte
        ptr [rip + d], 0`` somewhere in the (sized) function."""
        return self.sized and any(_byte_read(instruction) == address
                                  for instruction in self.instructions)

    def result_branch(self, following: int) -> tuple[bool, int] | None:
        """``test eax, eax`` then ``je``/``jne``."""
        found = self.instructions_at(following, 2)
        if len(found) != 2 or found[0][2:] != ("test", "eax, eax") \
                or found[1][2] not in ("je", "jne"):
            return None
        target = immediate(found[1][3])
        return (found[1][2] == "jne", target) if target is not None else None

    def guard_set_behind(self, following: int, target: int) -> tuple[int, int] | None:
        """``cmp byte ptr [rip + d], 0``, ``je``/``jne``, and ``mov byte ptr [rip + e], 1``
        to the same byte on the way taken when it is zero.  gcc -flto may put moves
        between the compare and the branch (the previous initialization's result
        loaded and stored), which leave the flags as they are."""
        after = self.index_of(following)
        if after is None or after < 2 or self.instructions[after - 1][2] not in ("je", "jne"):
            return None
        compare = after - 2
        while compare > 0 and after - 2 - compare < _GUARD_TEST_REACH \
                and self.instructions[compare][2] in _KEEPS_FLAGS:
            compare -= 1
        tested = _flag_byte(self.instructions[compare], ", 0")
        through = None  # the register holding the guard's address, when tested through it
        if tested is None:
            tested, through = self.guard_through_register(self.instructions[compare])
        if tested is None:
            return None
        setting = f"byte ptr [{through}], 1"
        zero = target if self.instructions[after - 1][2] == "je" else following
        # The way taken when it is zero may lead into the split-off part (.cold).
        for instruction in self.instructions_at(zero, _GUARD_SET_REACH):
            if (_flag_byte(instruction, ", 1") == tested if through is None
                    else instruction[2] == "mov" and instruction[3] == setting):
                return tested, zero
            if instruction[2] in _X86_STOPS or self.branch_target(*instruction[2:]) is not None:
                return None
        return None

    def guard_through_register(self, compare: tuple[int, int, str, str],
                               ) -> tuple[int | None, str | None]:
        """``cmp byte ptr [rax], 0`` where ``rax`` holds a global's address, loaded from
        its GOT slot (a guard with default visibility in position-independent code,
        an inline variable's or a template static member's): (the guard's address,
        the register); (None, None) otherwise."""
        _at, _size, mnemonic, operands = compare
        if mnemonic != "cmp" or not operands.startswith("byte ptr [") \
                or not operands.endswith("], 0"):
            return None, None
        register = operands[len("byte ptr ["):-len("], 0")]
        value = self.state.get(_X86_FAMILY.get(register, "")) if register in _X86_QWORD \
            else None
        at = named_address(value) if value is not None and value.exact and not value.page \
            else None
        return (at, register) if at is not None else (None, None)

    def flag_paths(self, first: int) -> FlagTest | None:
        """``cmp byte ptr [flag], 0`` or ``movzx eax, byte ptr [flag]`` and ``test al,
        al``, then ``je``/``jne``: the ways taken when the flag is set and when not.
        After a ``cmp``, gcc may put a ``lea`` or a move into a register (neither
        sets the flags) before the branch."""
        read, *following = self.instructions_at(first, 1 + _FLAG_TEST_REACH) \
            or [(0, 0, "", "")]
        if not following:
            return None
        mnemonic, operands = read[2:]
        if mnemonic == "cmp" and operands.endswith(", 0"):
            branch = next((instruction for instruction in following
                           if not _keeps_flags_and_memory(*instruction[2:])), following[-1])
            pointer = operands.startswith("qword ptr")
        elif mnemonic in ("movzx", "mov") and len(following) >= 2 \
                and following[0][2] == "test":
            register = operands.partition(", ")[0]
            low = _X86_LOW_BYTE.get(register, register)
            if following[0][3] not in (f"{register}, {register}", f"{low}, {low}"):
                return None
            branch = following[1]
            pointer = register in _X86_QWORD and following[0][3] == f"{register}, {register}"
        else:
            return None
        at, size, jump, target_text = branch
        target = immediate(target_text)
        if target is None or jump not in ("je", "jne"):
            return None
        if jump == "je":
            return FlagTest(at + size, target, pointer)
        return FlagTest(target, at + size, pointer)

    def counter_tested(self, first: int) -> bool:
        """``lock xadd [count], eax`` or ``mov eax, [count]`` (then ``lea edx, [rax +
        1]; mov [count], edx``), then ``test eax, eax`` and ``jne`` to a return, or
        ``je`` past one."""
        at_first, *following = self.instructions_at(first, 1 + _COUNTER_TEST_REACH) \
            or [(0, 0, "", "")]
        mnemonic, operands = at_first[2:]
        destination, _, source = operands.partition(", ")
        register = source if mnemonic.endswith("xadd") else destination
        if not (mnemonic.endswith("xadd") or mnemonic == "mov") or register not in _X86_WIDE:
            return False
        for n, (_at, _size, test, tested) in enumerate(following[:-1]):
            if test != "test":
                continue
            if tested != f"{register}, {register}":
                return False
            at, size, jump, target_text = following[n + 1]
            target = immediate(target_text)
            if target is None:
                return False
            if jump == "jne":
                return self.returns_at_once(target)
            return jump == "je" and self.returns_at_once(at + size)
        return False

    def returns_at_once(self, address: int) -> bool:
        """The stack protector's check on the way (a frame slot against ``fs:[0x28]``,
        a branch into ``__stack_chk_fail``) is no effect."""
        for _at, _size, mnemonic, operands in self.instructions_at(address, _SHORT_EXIT):
            if mnemonic in ("ret", "bnd ret"):
                return True
            if mnemonic in _X86_CONDITIONAL:
                target = immediate(operands)
                if target is None or not self.tail_fails(target):
                    return False
            elif mnemonic not in _X86_SHORT_EXIT or not _on_frame_only(operands):
                return False
        return False

    @staticmethod
    def stack_writes(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        destination = operands.partition(", ")[0]
        if mnemonic in _X86_STACK_MOVERS or destination in ("rsp", "esp"):
            return None
        if destination in ("rbp", "ebp"):  # at -O2 an ordinary register
            return ("[rbp",)
        if "[rsp" not in destination and "[rbp" not in destination:
            return ()
        key = _stack_key(destination)  # the first operand: written, unless compared
        return (key,) if key is not None else None

    @staticmethod
    def registers_set(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        if mnemonic in _X86_WRITES_NOTHING:
            return ()
        if " " in mnemonic:  # prefixes: a rep-prefixed string operation moves rcx, rdi, rsi
            prefix, _, bare = mnemonic.rpartition(" ")
            return None if "rep" in prefix else X86Walk.registers_set(bare, operands)
        if mnemonic in _X86_LOOPS:
            return ("rcx",)
        # Implicit destinations (mul/div, cpuid, string operations, operand-less
        # instructions such as cdqe or lahf): what they write is not in the text.
        if mnemonic in _X86_IMPLICIT or not operands \
                or (mnemonic == "imul" and "," not in operands) \
                or (mnemonic in _X86_STRING_OPERATIONS and _X86_STRING_OPERAND.search(operands)):
            return None
        family = _X86_FAMILY.get(operands.partition(", ")[0])
        return (family,) if family is not None else ()

    def __init__(self, analyzer: Analyzer, start: int, code: memoryview,
                 sized: bool, parameters: bool = False, constants: Constants = (),
                 pruned: frozenset[int] = frozenset()) -> None:
        super().__init__(analyzer, start, code, sized, parameters, constants, pruned)
        # A fixed-address executable has addresses as immediates and displacements.
        self.absolute = analyzer.fixed_addresses

    def other(self, address: int, size: int, mnemonic: str, operands: str) -> bool:
        if mnemonic in _X86_HINTS:
            return True
        changed = self.bit_operation(mnemonic, operands, address + size) \
            if mnemonic in _X86_BIT_OPERATIONS else None
        if self.numbers:
            self.numbers.clear()  # only moves keep them
        if self.bits and changed is None and mnemonic not in _X86_COMPARES:
            self.bits.clear()  # only the operations that fix bits, and compares, keep them
        if mnemonic in _X86_STOPS:
            self.traps()  # a return has a handler of its own
            return False
        if mnemonic in _X86_COMPARES:
            register, _, other = operands.partition(", ")
            if mnemonic == "cmp" and other == "-1":
                self.compared_to_minus_one(_X86_FAMILY.get(register), address + size)
            elif (mnemonic == "test" and other == register) \
                    or (mnemonic == "cmp" and other == "0"):
                self.tested_against_zero(_X86_FAMILY.get(register), address + size)
            if self.paths is not None:
                self.compare_operands(mnemonic, operands, address + size)
            else:
                tested = operands.partition(", ")[0]
                self.summary.tests_arguments |= _X86_ARGUMENT_BITS.get(tested, 0)
                through = self.tested_place(tested, address + size) if "[" in tested \
                    else self.loaded_through.get(_X86_FAMILY.get(tested, ""))
                if through is not None:
                    self.summary.tests_through.add(through)
        elif mnemonic == "xor" and self.zeroes(operands):
            return True
        elif mnemonic in ("sete", "setne") and operands in _X86_FAMILY:
            self.set_on_condition(_X86_FAMILY[operands], mnemonic == "sete", address)
            return True
        if " " in mnemonic:  # prefixes: rep, lock, bnd, notrack
            prefix, _, bare = mnemonic.rpartition(" ")
            handler = self.HANDLERS.get(bare)
            falls = handler(self, address + size, operands) if handler is not None \
                else self.other(address, size, bare, operands)
            if "rep" in prefix:
                self.clobber()
            return falls
        if self.stack_slots:
            self.stack_effects(mnemonic, operands)
        if self.stack_known() or "rsp" in operands or mnemonic in _X86_STACK_MOVERS:
            self.stack_bytes_written(mnemonic, operands)
        if "[" in operands and (self.state or "rip" in operands or self.absolute or (
                (self.memory_bits or self.through) and "[" in operands.partition(", ")[0])):
            self.generic_memory(mnemonic, operands, address, size)
        if self.state and not (mnemonic in ("add", "sub") and self.offset(mnemonic, operands)):
            self.generic_registers(mnemonic, operands)
        if mnemonic == "movzx":
            self.loaded_from_memory(operands, address + size)
        if changed is not None:
            changed()
        return True

    def bit_operation(self, mnemonic: str, operands: str,
                      following: int) -> Callable[[], None] | None:
        """``and eax, 0xfc000000``, ``or``, ``bts rax, 0x20``, ``btr``, and the same on
        memory (``and word ptr [rip + x], 0x8000``): what to note once the instruction's
        other effects are (the bits it fixes, ``bits``); None when nothing is known."""
        destination, _, source = operands.partition(", ")
        amount = immediate(source)
        if amount is None:
            return None
        if "[" not in destination:
            register = _X86_FAMILY.get(destination)
            if register is None or destination in ("ah", "bh", "ch", "dh"):
                return None
            width = _x86_width(destination)
        else:
            width = 8 * _store_width(destination)
            located = self.memory(destination, following) if _exact_form(destination) else None
            if located is None or self.exact_place(located[0], located[1]) is None \
                    or width not in (8, 16, 32, 64):
                return None
        low = (1 << width) - 1
        cleared, raised = _X86_BIT_OPERATIONS[mnemonic](amount, low)

        def change(known: Bits) -> Bits:
            return ored(anded(known, cleared, width), raised, width)

        if "[" not in destination:
            before = self.register_bits(register)
            return lambda: self.set_bits(register, change(before or UNKNOWN))
        assert located is not None
        base, offset = located
        before = self.memory_at(base, offset, width // 8) or UNKNOWN
        return lambda: self.wrote_memory(base, offset, width // 8, change(before))

    def loaded_from_memory(self, operands: str, following: int) -> None:
        """``movzx eax, byte ptr [rdi + 0xb]``, ``mov eax, dword ptr [rdi + 8]``: in a
        plain walk, whether the register came through an argument (a test of it may
        be decided by what a caller stored there, or, loaded by a global's address,
        by what the loader left there); in one knowing what is stored there, or that
        the global is quiet at load, the bits it loaded."""
        if self.paths is None:
            destination, _, source = operands.partition(", ")
            through = self.tested_place(source, following)
            family = _X86_FAMILY.get(destination)
            if through is not None and family is not None:
                self.loaded_through[family] = through
        if self.through or self.quiet is not None:
            self.loaded_bits(operands, following)

    def tested_place(self, operand: str, following: int) -> tuple[int, int, int] | None:
        """The bytes a memory operand names, tested or loaded to be tested: through an
        argument register, (parameter, offset, width), or a global's by its address
        (``mov eax, dword ptr [rip + 0x2e42]``), (GLOBAL, address, width)."""
        if "[rip + 0x" not in operand:
            return _through_argument(operand)
        located = self.memory(operand, following)
        at = self.exact_place(*located) if located is not None else None
        return (GLOBAL, at, _store_width(operand) or 8) if at is not None else None

    def loaded_bits(self, operands: str, following: int) -> None:
        """``movzx eax, byte ptr [rdi + 0xb]`` (``mov eax, dword ptr …``), in a walk a
        caller passed bits to, or one knowing the globals quiet at load: the register
        holds the bits known of those bytes, the rest zero.  (Only there: what a walk's
        own stores left known is not loaded back, as a constructor seldom reads what
        it just wrote, and every load would pay.)"""
        destination, _, source = operands.partition(", ")
        width = _store_width(source)
        if destination not in _X86_WIDE or width not in (1, 2, 4, 8):
            return
        known = self.bits_through(source, following, width)
        if known is not None:
            self.set_bits(_X86_FAMILY[destination], zero_extended(known, 8 * width))

    def bits_through(self, operand: str, following: int, width: int) -> Bits | None:
        """The bits known of the ``width`` bytes a memory operand names."""
        family, offset, segment, _rip, index, _scale = _memory_operand(operand)
        if self.through and family in self.through and index is None and not segment \
                and offset is not None:
            return self.memory_at(None, offset, width, through=family)
        located = self.memory(operand, following) \
            if (self.memory_bits or self.quiet is not None) and _exact_form(operand) else None
        return self.memory_at(located[0], located[1], width) if located is not None else None

    def zeroes(self, operands: str) -> bool:
        """``xor edi, edi``: the register holds 0 (a constant a call may pass)."""
        destination, _, source = operands.partition(", ")
        if destination != source or destination not in _X86_WIDE:
            return False
        self.number(_X86_FAMILY[destination], 0)
        return True

    def compare_operands(self, mnemonic: str, operands: str, following: int) -> None:
        """``cmp edi, 2`` or ``test edi, edi`` (a compare with 0) of a known number; a
        test of bits known (``test byte ptr [rdi + 0xb], 0x40``, ``test al, 0x10``)."""
        destination, _, source = operands.partition(", ")
        amount = immediate(source)
        if "[" in destination or (mnemonic == "test" and amount is not None):
            self.compare_bits(mnemonic, destination, amount, following)
            return
        width = _x86_width(destination)
        # test sets the flags of a compare with 0 only when it tests a register with itself.
        other = immediate(source) if mnemonic == "cmp" else 0 if source == destination else None
        self.compare(following, _X86_FAMILY.get(destination), other, width)

    def compare_bits(self, mnemonic: str, destination: str, amount: int | None,
                     following: int) -> None:
        """A test or compare, with a number, of memory or of a register whose bits are
        known in part."""
        if amount is None:
            return
        if "[" in destination:
            width = _store_width(destination)
            known = self.bits_through(destination, following, width) if width else None
            width *= 8
        else:
            width = _x86_width(destination)
            known = self.register_bits(_X86_FAMILY.get(destination))
        if known is None:
            return
        if mnemonic == "test":
            self.tested_bits(following, known, amount, width)
            return
        number_there = whole(known, width)
        if number_there is not None:
            self.flags = (following, number_there, amount, width, False)

    def offset(self, mnemonic: str, operands: str) -> bool:
        """``add reg, imm`` / ``sub reg, imm`` (or a register) on a known address.

        A constant moves the address; an amount not known (an index) leaves a
        pointer somewhere inside the same object.  False if the register holds
        no known address.
        """
        destination, _, source = operands.partition(", ")
        family = _X86_FAMILY.get(destination)
        value = self.state.get(family) if family is not None and destination[0] == "r" else None
        if family is None or value is None:
            return False
        if value.table is not None:  # a jump table's entry plus the table: the case's code
            base = self.state.get(_X86_FAMILY.get(source, ""))
            found = mnemonic == "add" and base is not None and base.address == value.table
            self.set(family, Value(switch=value.table, case=value.case) if found else None)
            return True
        amount = number(source)
        if amount is not None and value.address is not None and value.exact:
            sign = 1 if mnemonic == "add" else -1
            self.state[family] = address_value(value.address + sign * amount)
        else:
            self.set(family, self.derived(value))
        return True

    def stack_effects(self, mnemonic: str, operands: str) -> None:
        """Keep the spilled values valid: forget slots the instruction moves or overwrites."""
        if mnemonic in _X86_STACK_MOVERS or operands.startswith(("rsp", "esp")):
            self.forget_slots("rsp")
            if mnemonic == "leave":
                self.forget_slots("rbp")
        if operands.startswith(("qword ptr [r", "dword ptr [r", "xmmword ptr [r")):
            key = self.stack_key(operands.partition(", ")[0])
            if key is not None:
                self.store_slot(key, None)

    def stack_bytes_written(self, mnemonic: str, operands: str) -> None:
        """Forget the bytes on the stack an instruction other than a move may write (a
        memory destination, a string instruction's) or moves away from."""
        destination = operands.partition(", ")[0]
        if mnemonic in _X86_STACK_MOVERS or destination in ("rsp", "esp"):
            self.stack_moved()
        elif mnemonic in _X86_IMPLICIT:
            self.forget_stack()
        elif "[" in destination:
            self.stored_on_stack(self.stack_place(destination), _store_width(destination), None)

    # -- control flow -----------------------------------------------------------
    def on_call(self, following: int, operands: str) -> bool:
        self.call(self.operand_target(operands, following), following)
        self.called()
        return True

    def on_jmp(self, following: int, operands: str) -> bool:
        target = immediate(operands)
        if target is not None:
            return self.jump(target)
        value = self.operand_target(operands, following)
        if value is not None and value.switch is not None:
            return self.jump_table(value.switch, value.case)
        return self.tail_call(value)

    def jump_table(self, table: int, case: int | None = None) -> bool:
        """``jmp rax`` to a case of a switch: each case continues with what is known here.

        gcc's position-independent tables hold 32-bit offsets from the table;
        the entries are read while they lead into this function.
        """
        targets = self.table_targets(table)
        if not targets:
            return self.tail_call(None)
        if case is not None and self.paths is not None:
            targets = self.selected_case(targets, case)
        for target in targets:
            self.branch(target)
        self.state = {}
        return False

    def selected_case(self, targets: list[int], case: int) -> list[int]:
        """The one case a known index selects (the others are ruled out), or every case
        when the index is past the entries read."""
        if not 0 <= case < len(targets):
            self.summary.undecided += 1
            return targets
        self.summary.decided += 1
        assert self.paths is not None
        for target in targets:
            if target != targets[case]:
                self.paths.drop(target)
        return [targets[case]]

    def table_targets(self, table: int) -> list[int]:
        if not self.sized:
            return []
        elf = self.analyzer.elf
        try:
            offset = elf.vaddr_to_offset(table, "jump table")
        except ElfpatchError:
            return []
        data = bytes(elf.view[offset : min(offset + 4 * _MAX_CASES, elf.size)])
        targets = []
        for (entry,) in struct.iter_unpack("<i", data[: len(data) - len(data) % 4]):
            if not self.start <= table + entry < self.end:
                break
            targets.append(table + entry)
        return targets

    def on_movsxd(self, following: int, operands: str) -> bool:
        """A load of a signed 32-bit value; from ``[table + index*4]``, a jump table's entry."""
        if not self.state and not self.absolute and "rip" not in operands:
            return True
        destination, _, source = operands.partition(", ")
        # The table's own address, whatever number the index holds (``index_value``).
        located = self.memory(source, following, False) if "[" in source else None
        value = None
        if located is not None:
            base, offset = located
            self.access(base, offset, read=True, write=False)
            if "*4]" in source and offset == 0 and base.address is not None and base.exact \
                    and base.got is None:
                value = Value(table=base.address, case=self.index_value(source))
                self.summary.tests_arguments = -1  # the index may be any argument
        self.set(_X86_FAMILY.get(destination), value)
        return True

    def index_value(self, source: str) -> int | None:
        """The known number in the index register of ``[table + index*4]``."""
        index = source[source.rfind(" ") + 1 : source.rfind("*")]
        value = self.state.get(_X86_FAMILY.get(index, ""))
        return value.constant if value is not None else None

    @staticmethod
    def may_return_address(code: bytes) -> bool:
        return _LEA_RIP.search(code) is not None

    @staticmethod
    def tests_guard_byte(code: bytes) -> bool:
        """``movzbl guard(%rip), %eax`` (any register), or ``cmpb $0, guard(%rip)``."""
        return _GUARD_BYTE_LOAD.search(code) is not None

    def on_stop(self, following: int, operands: str) -> bool:
        self.traps()
        return False

    def on_return(self, following: int, operands: str) -> bool:
        self.returns()
        return False

    def on_conditional(self, following: int, operands: str, condition: str | None = None,
                       ) -> bool:
        """``je 0x1234``: ``condition`` is ``e`` (None for loop and jrcxz)."""
        target = immediate(operands)
        if target is None:
            return True
        return self.conditional(condition, following, target)

    def operand_target(self, operands: str, following: int) -> Value | None:
        """Where ``call``/``jmp`` goes: an immediate, a register, or a GOT slot."""
        target = immediate(operands)
        if target is not None:
            return address_value(target)
        if "[" not in operands:
            return self.state.get(_X86_FAMILY.get(operands, ""))
        slot = self.effective(operands, following)
        if slot is None or slot.address is None:
            return None
        entry = self.index.got_entry(slot.address)
        if entry is None:
            return None
        return got_value(entry) if entry.symbol is not None else address_value(entry.address)

    # -- addresses ----------------------------------------------------------------
    def on_lea(self, following: int, operands: str) -> bool:
        destination, _, source = operands.partition(", ")
        register = _X86_FAMILY.get(destination)
        if register == "rsp":
            self.forget_slots("rsp")
        if register is not None:
            value = self.effective(source, following) if destination in _X86_WIDE else None
            if value is None and destination in _X86_QWORD:
                offset = self.stack_place(source)
                value = Value(stack=offset) if offset is not None else None
            self.set(register, value)
        return True

    def effective(self, operand: str, following: int) -> Value | None:
        """The address a memory operand designates, as far as it is known."""
        located = self.memory(operand, following)
        if located is None:
            return None
        base, offset = located
        if base.parameter is not None or base.pointee is not None:
            return base
        if base.got is not None and base.exact and offset and self.index.keys_by_address \
                and (own := named_address(base)) is not None:
            return address_value(own + offset)  # keyed by address: moved a known amount
        if base.got is not None or not base.exact:
            return base if offset == 0 else self.derived(base)
        if base.address is None:
            return None
        return address_value(base.address + offset)

    def memory(self, operand: str, following: int,
               indexed: bool = True) -> tuple[Value, int] | None:
        """(base value, displacement) of a memory operand whose base is known; with
        ``indexed``, a known number in the index register moves it (``indexed``)."""
        open_at = operand.find("[")
        inner = operand[open_at + 1 : operand.find("]", open_at)]
        if inner.startswith("rip + 0x") and operand[open_at - 1 : open_at] != ":":
            displacement = number(inner[6:])  # the usual form
            if displacement is not None:
                return address_value(following + displacement), 0
        family, offset, segment, from_rip, index, scale = _memory_operand(operand)
        base: Value | None = None
        if family is not None:
            base = self.state.get(family)
            if indexed and index is not None and offset is not None and base is not None:
                base, offset = self.indexed(base, offset, index, scale)
            if base is None or base.constant is not None:  # a number is no object's address
                return None
        if offset is None:
            return None
        if segment:  # fs:[reg]: reg holds a thread-local offset
            return (base, offset) if base is not None and base.got is not None else None
        if base is not None:
            return base, offset
        if from_rip:
            return address_value(following + offset), 0
        # An absolute address, perhaps indexed: only a fixed-address executable has them.
        return (address_value(offset), 0) if self.absolute else None

    def indexed(self, base: Value, offset: int, index: str,
                scale: int) -> tuple[Value, int]:
        """``[base + index*scale + offset]`` where the index register holds a known
        number, or holds the address and the base the number: the address and the
        offset that number makes.  gcc's medium and large code models reach large
        objects (``.ldata``, ``.lbss``) as the GOT's address plus a 64-bit offset
        (``movabs rdx, sym@GOTOFF``; ``mov [rax + rdx + 8], rsi``): cuFFT's tables.
        A base that is no exact address (a parameter, a GOT slot's value) keeps the
        number in its offset; an index not known stays as it was: somewhere in the
        object at ``base``."""
        number_at = self.state.get(index)
        if number_at is not None and number_at.constant is not None \
                and base.constant is None:
            moved = number_at.constant * scale
        elif base.constant is not None and scale == 1 and number_at is not None \
                and number_at.constant is None:
            moved, base = base.constant, number_at
        else:
            return base, offset
        if base.address is None or not base.exact or base.got is not None:
            return base, offset + moved
        return address_value((base.address + moved + offset) & _ADDRESS_MASK), 0

    # -- moves ----------------------------------------------------------------------
    def on_movabs(self, following: int, operands: str) -> bool:
        """``movabs reg, imm64``: the number is kept whatever the register (only argument
        registers keep numbers otherwise): it is a 64-bit offset from the GOT's address
        to a large object (``indexed``)."""
        destination, _, source = operands.partition(", ")
        found = immediate(source)
        if found is None or destination not in _X86_QWORD:
            return self.on_mov(following, operands)
        self.set(_X86_FAMILY[destination], constant_value(found))
        return True

    def on_mov(self, following: int, operands: str) -> bool:
        if not self.state and not self.absolute and "rip" not in operands:
            if operands[-1:] != "]":  # a number the code may pass to a call
                self.constant_move(operands)
                if (self.memory_bits or self.through) and "[" in operands \
                        and self.stack_place(operands.partition(", ")[0]) is None:
                    self.wrote_memory(None, 0, 0)  # through a pointer not known
            elif self.numbers:  # a load
                self.numbers.pop(_X86_FAMILY.get(operands.partition(", ")[0], ""), None)
            if self.bits:
                self.bits.pop(_X86_FAMILY.get(operands.partition(", ")[0], ""), None)
            if operands[-1:] == "]":
                self.loaded_from_memory(operands, following)
            return True  # nothing known is read, nothing known is overwritten
        destination, _, source = operands.partition(", ")
        if "[" in destination:
            key = self.stack_key(destination)
            if key is not None:  # a spill: the slot keeps the register's value
                # A slot through rbp, unless it holds an address on the stack, may be
                # anywhere there: every byte known is forgotten.
                self.stored_on_stack(self.stack_place(destination), _store_width(destination),
                                     self.number_stored(source))
                self.store_slot(key, self.state.get(_X86_FAMILY.get(source, ""))
                                if source in _X86_QWORD else None)
                if (self.memory_bits or self.through) and self.stack_place(destination) is None:
                    self.wrote_memory(None, 0, 0)  # rbp, an ordinary register at -O2
                return True
            located = self.memory(destination, following)
            if located is not None and located[0].stack is not None:
                self.stored_on_stack(located[0].stack + located[1], _store_width(destination),
                                     self.number_stored(source))
            elif self.stack_known() and (located is None or located[0].address is None):
                self.forget_stack()  # through a pointer that may be to the stack
            if self.memory_bits or self.through or located is not None:
                self.stored_bits(located, destination, source)
            if located is not None:
                stored = self.state.get(_X86_FAMILY.get(source, ""))
                key = self.access(located[0], located[1], read=False, write=True,
                                  zero=source == "0", one=source == "1" or (
                                      stored is not None and stored.constant == 1)
                                  or (source in _X86_QWORD and never_null(stored))
                                  or (self.absolute and destination.startswith("qword")
                                      and never_null(self.source_value(source))))
                if source in _X86_QWORD:
                    stored = self.state.get(_X86_FAMILY[source])
                    self.stamp(located[0], located[1], stored)
                    self.stores_address(located[0], located[1], stored)
                    if located[0].parameter is None:
                        self.stored(_X86_FAMILY[source], key)
        elif "[" in source:
            self.load(destination, source, following)
            self.loaded_from_memory(operands, following)
        else:
            family = _X86_FAMILY.get(destination)
            if family == "rsp":
                self.forget_slots("rsp")
            value = self.source_value(source) if destination in _X86_WIDE else None
            if value is not None and value.constant is not None:
                self.number(family, value.constant)
            else:
                self.set(family, value)
        return True

    def stored_bits(self, located: tuple[Value, int] | None, destination: str,
                    source: str) -> None:
        """A move into memory: the bits known of what it stores are known there."""
        family = _X86_FAMILY.get(source)
        width = _store_width(destination)
        if family is not None:
            known = self.register_bits(family)
        else:
            found = immediate(source)
            known = exactly(found, 8 * width) if found is not None and width else None
        if known is None and not (self.memory_bits or self.through):
            return  # nothing known to keep or to forget
        if located is None or not _exact_form(destination):
            self.wrote_memory(None, 0, width)
        else:
            self.wrote_memory(located[0], located[1], width, known)

    def constant_move(self, operands: str) -> None:
        """``mov edi, 2``: a number in a register; ``mov rbx, rsp``: an address on
        the stack; ``mov dword ptr [rsp + 16], 0x6c6c6568``: bytes on the stack."""
        destination, _, source = operands.partition(", ")
        number_moved = immediate(source)
        family = _X86_FAMILY.get(destination)
        if family is None:
            if destination.endswith("]"):
                self.stored_on_stack(self.stack_place(destination), _store_width(destination),
                                     self.number_stored(source))
        elif number_moved is not None and destination in _X86_WIDE:
            self.number(family, number_moved)
        elif source == "rsp" and destination in _X86_QWORD:
            self.set(family, Value(stack=0))
        elif self.numbers:
            self.numbers.pop(family, None)

    def number_stored(self, source: str) -> int | None:
        """The number a store writes: an immediate, or a register known to hold one."""
        found = immediate(source)
        if found is not None:
            return found
        family = _X86_FAMILY.get(source, "")
        value = self.state.get(family)
        return value.constant if value is not None else self.numbers.get(family)

    def load(self, destination: str, source: str, following: int) -> None:
        register = _X86_FAMILY.get(destination)
        key = self.stack_key(source) if self.stack_slots else None
        if key is not None:  # a reload of a spilled value
            self.set(register, self.state.get(key) if destination in _X86_QWORD else None)
            return
        # The base is read before the destination is overwritten: mov rax, [rax + 8].
        located = self.memory(source, following)
        self.set(register, None)
        if located is None:
            return
        base, offset = located
        if destination in _X86_WIDE and base.address is not None and base.got is None \
                and self.load_from(register, base.address + offset):
            return
        key = self.access(base, offset, read=True, write=False)
        if destination in _X86_QWORD and base.parameter is None:
            self.loaded(register, key)

    def source_value(self, source: str) -> Value | None:
        if source == "rsp":
            return Value(stack=0)
        family = _X86_FAMILY.get(source)
        if family is not None:
            value = self.state.get(family)
            if value is not None and value.constant is not None and source not in _X86_QWORD:
                return constant_value(value.constant & 0xFFFF_FFFF)  # mov edi, eax
            return value
        # Only a fixed-address executable has addresses as immediates, and
        # only numbers inside its image are addresses (not counts or flags).
        found = immediate(source)
        if found is None:
            return None
        if not self.absolute or not self.analyzer.in_image(found):
            return constant_value(found)
        return address_value(found)

    def stack_key(self, operand: str) -> str | None:
        """The stack slot a memory operand names, unless its base holds a known address
        other than one on the stack (at -O2 rbp is an ordinary register)."""
        key = _stack_key(operand)
        if key is None:
            return None
        held = self.state.get(key[1:4])
        return key if held is None or held.stack is not None else None

    def stack_place(self, operand: str) -> int | None:
        """How far past rsp a memory operand lies: through rsp, or through rbp holding an
        address on the stack; None for any other memory."""
        key = _stack_key(operand)
        if key is None:
            return None
        if key.startswith("[rsp"):
            return int(key[4:-1])
        held = self.state.get(key[1:4])
        return held.stack + int(key[4:-1]) if held is not None and held.stack is not None \
            else None

    # -- everything else --------------------------------------------------------------
    def generic_memory(self, mnemonic: str, operands: str, address: int, size: int) -> None:
        for position, operand in enumerate(operands.split(", ")):
            if "[" in operand:
                located = self.memory(operand, address + size)
                knowing = bool(self.memory_bits or self.through) \
                    and self.stack_place(operand) is None
                if located is None and not knowing:
                    continue
                read, write = self.memory_access(mnemonic, address, size, position)
                if located is not None:
                    self.access(located[0], located[1], read, write,
                                width=_X86_VECTOR_WIDTHS.get(operand.partition(" ")[0], 0))
                if knowing and write:
                    # What it writes is not known: nothing stays known of those bytes.
                    exact = located if located is not None and _exact_form(operand) else None
                    self.wrote_memory(exact[0] if exact else None, exact[1] if exact else 0,
                                      _store_width(operand) or 64)

    def generic_registers(self, mnemonic: str, operands: str) -> None:
        """Forget what the instruction's destination register held."""
        if mnemonic not in _X86_NO_DESTINATION:
            self.set(_X86_FAMILY.get(operands.partition(",")[0]), None)
        if mnemonic in _X86_IMPLICIT:
            for operand in operands.split(", "):
                self.set(_X86_FAMILY.get(operand), None)
            self.clobber()

    def clobber(self) -> None:
        for register in self.CALLER_SAVED:
            self.state.pop(register, None)

    def memory_access(self, mnemonic: str, address: int, size: int,
                      position: int = 0) -> tuple[bool, bool]:
        """(read, write) of the memory operand at ``position``, from capstone's operand
        access flags, but for moves: a move writes its first operand and reads the
        other (capstone 5 marks many vector stores as reads: ``movups``, ``movq``,
        ``vmovdqu [rsi], ymm0``, and gcc zeroes objects with them)."""
        if mnemonic in _X86_READS_MEMORY:
            return True, False
        if mnemonic.startswith(_X86_MOVES):
            return position > 0, position == 0
        offset = address - self.start
        code = bytes(self.code[offset : offset + size])
        detailed = self.analyzer.detailed
        return _remembered(_ACCESSES, code, lambda encoding: _memory_access(detailed, encoding))


# Operands repeat (``qword ptr [rbp - 0x18]``, ``qword ptr [rbx + 8]``) across every
# function swept, and so do encodings (``add qword ptr [rax + 8], 1``): what their
# text says, or how an encoding accesses memory, is read once.  Plain dicts filled up
# to a bound: an operand not seen before costs one look-up more, where an LRU cache's
# bookkeeping would double its cost.
_OPERANDS_KEPT = 1 << 16
K = TypeVar("K")
V = TypeVar("V")


def _remembered(table: dict[K, V], key: K, read: Callable[[K], V]) -> V:
    """``read(key)``, kept in ``table`` while it holds fewer than ``_OPERANDS_KEPT``."""
    if key in table:
        return table[key]
    found = read(key)
    if len(table) < _OPERANDS_KEPT:
        table[key] = found
    return found


def _memory_access(detailed: Cs, code: bytes) -> tuple[bool, bool]:
    """(read, write) of the memory operand of the one instruction ``code`` encodes;
    decoding one in detail costs more than sweeping a dozen.  Where it lies does not
    change how it accesses memory (the address decoded at is 0)."""
    for instruction in detailed.disasm(code, 0, 1):
        for operand in instruction.operands:
            if operand.type == _X86_OP_MEM and operand.access:
                return (bool(operand.access & _CS_AC_READ),
                        bool(operand.access & _CS_AC_WRITE))
    return True, False


_MAX_CASES = 4096  # entries of one jump table read at most
_X86_STACK_MOVERS = frozenset({"push", "pop", "pushfq", "popfq", "leave", "enter"})


def _exact_form(operand: str) -> bool:
    """Whether a memory operand names one place, its base and displacement (no index
    register, whose number the walk may not know: ``X86Walk.indexed`` keeps the base
    then)."""
    # rip takes no index; and its operands, each displacement apart, are the most.
    return "[rip + " in operand or _memory_operand(operand)[4] is None


def _through_argument(operand: str) -> tuple[int, int, int] | None:
    """(parameter, offset, width) of the bytes a memory operand names through an
    argument register (``byte ptr [rdi + 0xb]``, tested or loaded to be): what a
    caller stored there may decide a test."""
    inner = operand[operand.find("[") + 1 :]
    if inner[: inner.find(" ")] not in _X86_ARGUMENTS and inner[:-1] not in _X86_ARGUMENTS:
        return None  # most are not (rip, rsp, a register that is no argument's)
    family, offset, segment, _rip, index, _scale = _memory_operand(operand)
    if family not in _X86_ARGUMENTS or offset is None or segment or index is not None:
        return None
    return _X86_ARGUMENTS.index(family), offset, _store_width(operand) or 8


def _x86_width(register: str) -> int:
    """The width in bits of a register name (rdi 64, edi/r8d 32, di/r8w 16, dil/al 8)."""
    if register in _X86_QWORD:
        return 64
    if register.startswith("e") or (register.startswith("r") and register.endswith("d")):
        return 32
    if register.endswith("w") or (len(register) == 2 and register[-1] in "xip"):
        return 16
    return 8


def _conditional(condition: str | None) -> Callable[[X86Walk, int, str], bool]:
    def handler(walk: X86Walk, following: int, operands: str) -> bool:
        return walk.on_conditional(following, operands, condition)
    return handler


# (base register's family, displacement, segment prefixed, rip-relative, index register's
# family, scale)
_MemoryOperand = tuple[str | None, int | None, bool, bool, str | None, int]
_ADDRESS_MASK = (1 << 64) - 1
# Keyed by the encoding alone: the detailed engine decoding it is x86-64's, whichever
# analyzer made it (keying by the engine too kept every analyzer's engine alive).
_ACCESSES: dict[bytes, tuple[bool, bool]] = {}
_MEMORY_OPERANDS: dict[str, _MemoryOperand] = {}
_STACK_KEYS: dict[str, str | None] = {}


def _memory_operand(operand: str) -> _MemoryOperand:
    """(the base register's family, the displacement, whether a segment prefixes it,
    whether the base is rip) of a memory operand (``X86Walk.memory``)."""
    return _remembered(_MEMORY_OPERANDS, operand, _read_memory_operand)


def _read_memory_operand(operand: str) -> _MemoryOperand:
    open_at = operand.find("[")
    inner = operand[open_at + 1 : operand.find("]", open_at)]
    first = inner.partition(" ")[0]
    index, scale = _index_register(inner)
    return (_X86_FAMILY.get(first), _displacement(inner), ":" in operand[:open_at],
            first == "rip", index, scale)


def _index_register(inner: str) -> tuple[str | None, int]:
    """The index register's family and its scale in ``rax + rdx*8 + 0x10`` (capstone
    writes the base first); (None, 1) when there is none."""
    for token in inner.split(" ")[1:]:
        register, _, scale = token.partition("*")
        family = _X86_FAMILY.get(register)
        if family is not None:
            return family, int(scale) if scale.isdigit() else 1
    return None, 1


_STORE_WIDTHS = {"byte": 1, "word": 2, "dword": 4, "qword": 8, "xmmword": 16,
                 "ymmword": 32, "zmmword": 64}


def _store_width(operand: str) -> int:
    """How many bytes a memory operand names (``dword ptr [rsp + 8]``: 4); 0 if not said."""
    return _STORE_WIDTHS.get(operand.partition(" ptr ")[0], 0) if " ptr " in operand else 0


def _stack_key(operand: str) -> str | None:
    """``qword ptr [rbp - 0x18]`` -> ``[rbp-24]``: a stack slot, or None for other memory."""
    if "[rsp" not in operand and "[rbp" not in operand:
        return None
    return _remembered(_STACK_KEYS, operand, _read_stack_key)


def _read_stack_key(operand: str) -> str | None:
    open_at = operand.find("[")
    inner = operand[open_at + 1 : operand.find("]", open_at)]
    base, _, rest = inner.partition(" ")
    if base not in ("rbp", "rsp") or open_at < 0 or ":" in operand[:open_at]:
        return None
    if not rest:
        return f"[{base}+0]"
    sign, _, amount = rest.partition(" ")
    offset = number(amount) if sign in ("+", "-") else None
    if offset is None:
        return None
    return f"[{base}{offset if sign == '+' else -offset:+d}]"


def _displacement(inner: str) -> int | None:
    """The constant part of ``rip + 0x10`` / ``rax + rbx*8 - 8`` / ``0x404040``."""
    offset, sign = 0, 1
    for token in inner.split(" "):
        if token == "+":
            sign = 1
        elif token == "-":
            sign = -1
        elif token[:1].isdigit() and "*" not in token:
            amount = number(token)
            if amount is None:
                return None
            offset += sign * amount
    return offset


X86Walk.BRANCH_SIZES = frozenset({2, 6})  # je rel8, je rel32
X86Walk.KEEPS_FLAGS = frozenset({"mov", "movabs", "movzx", "movsx", "movsxd", "lea", "nop"})
X86Walk.BRANCH_INITIALS = "jlbn"  # jmp, jcc, loop, bnd jmp, notrack jmp
X86Walk.STOPS = _X86_STOPS
X86Walk.HANDLERS = {
    "call": X86Walk.on_call, "bnd call": X86Walk.on_call, "notrack call": X86Walk.on_call,
    "jmp": X86Walk.on_jmp, "bnd jmp": X86Walk.on_jmp, "notrack jmp": X86Walk.on_jmp,
    "notrack bnd jmp": X86Walk.on_jmp,
    "lea": X86Walk.on_lea, "mov": X86Walk.on_mov, "movabs": X86Walk.on_movabs,
    "movsxd": X86Walk.on_movsxd,
    **{mnemonic: _conditional(None if mnemonic in _X86_LOOPS or mnemonic.endswith("cxz")
                              else mnemonic[1:]) for mnemonic in _X86_CONDITIONAL},
    **dict.fromkeys(_X86_STOPS, X86Walk.on_stop),
    **dict.fromkeys(("ret", "bnd ret"), X86Walk.on_return),
}




WALK = X86Walk
