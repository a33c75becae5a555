"""What an initializer does that matters, read from its machine code.

An initializer is ordinary code: it constructs globals, reads others, calls
into this object and into other libraries, and registers exit-time
destructors with ``__cxa_atexit(dtor, object, &__dso_handle)``.  This module
disassembles it (capstone; x86-64 and aarch64) and follows direct calls to
functions this object defines, a few levels deep, to report:

- the globals it writes (stores to them, or passes them as ``this`` to a
  constructor) and the globals it reads (loads, or passes to another call),
  named by the data symbol whose extent contains the address;
- the functions it calls, in this object and through the PLT/GOT;
- each destructor registration: which object, which destructor;
- whether it constructs ``std::ios_base::Init`` (its TU includes <iostream>).

The analysis is a linear sweep per function that tracks, within straight
line code and across forward branches, which registers hold a known
address: ``lea reg, [rip+X]``, ``adrp``+``add``, an immediate, a GOT load
(``mov reg, [rip+slot]``, ``adrp``+``ldr``) or a copy of one of those.
What it cannot follow (an indirect jump, a budget) makes the result
``complete=False``; calls through registers it cannot resolve (virtual
calls, function pointers) are not followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from elfpatch.demangle import demangle
from elfpatch.elf.addresses import EM_AARCH64, EM_X86_64, AddressIndex, GotEntry
from elfpatch.elf.constants import ET_EXEC, PT_LOAD
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError, UnsupportedElfError

if TYPE_CHECKING:
    from capstone import Cs

# Functions whose first argument is a destructor and (but for atexit) second its object.
ATEXIT_FUNCTIONS = frozenset({"__cxa_atexit", "atexit", "__cxa_thread_atexit_impl",
                              "__cxa_thread_atexit"})
IOS_INIT_CONSTRUCTORS = frozenset({"_ZNSt8ios_base4InitC1Ev", "_ZNSt8ios_base4InitC2Ev"})

# Bytes disassembled at most per function: a known size is cut there, an
# unknown one (no symbol) is swept until it returns or jumps away.
MAX_FUNCTION_BYTES = 1 << 20
MAX_UNSIZED_BYTES = 1 << 16
# Which registers a callee may change is worked out for functions up to this
# size, following their own calls this deep; beyond, every caller-saved one.
MAX_WRITES_BYTES = 1 << 14
MAX_WRITES_DEPTH = 3


@dataclass(frozen=True)
class AtExit:
    """One exit-time registration (__cxa_atexit, atexit, __cxa_thread_atexit_impl)."""

    object: str | None  # symbol of the object whose destructor is registered
    destructor: str | None  # symbol of the function registered


@dataclass(frozen=True)
class Effects:
    writes: tuple[str, ...]  # globals defined here that the code writes or constructs
    reads: tuple[str, ...]  # globals (here, or another object's through the GOT) it reads
    calls: tuple[str, ...]  # functions of this object it calls directly (followed);
    #                         code without a symbol appears as its address ("0x1234")
    external_calls: tuple[str, ...]  # functions called through the PLT/GOT
    atexit: tuple[AtExit, ...]
    constructs_ios_init: bool  # calls std::ios_base::Init::Init() (the TU has <iostream>)
    complete: bool  # False when a budget or an unknown indirect jump stopped the analysis


UNKNOWN_EFFECTS = Effects((), (), (), (), (), False, False)


def initializer_effects(elf: ElfFile, address: int, *, max_depth: int = 4,
                        max_functions: int = 64) -> Effects:
    """The effects of the initializer at ``address`` (see ``EffectsAnalyzer`` for many)."""
    return EffectsAnalyzer(elf).effects(address, max_depth=max_depth,
                                        max_functions=max_functions)


# -- constructor names ---------------------------------------------------------
_CONSTRUCTOR_MARK = re.compile(r"C[123I]")
_MANGLED_CONSTRUCTOR = re.compile(r"C[123](?:B\d+\w+?)?E")
_TEMPLATE_OR_TAG = re.compile(r"<.*>|\[abi:[^\]]*\]")


def is_constructor(symbol: str) -> bool:
    """An Itanium C++ constructor (complete, base or allocating; inheriting too)."""
    if not symbol.startswith("_ZN") or not _CONSTRUCTOR_MARK.search(symbol):
        return False
    return _constructor_name(symbol)


_constructor_cache: dict[str, bool] = {}


def _constructor_name(symbol: str) -> bool:
    known = _constructor_cache.get(symbol)
    if known is None:
        text = demangle(symbol)
        if text == symbol:  # no demangler: the mangled marker is the best we have
            known = bool(_MANGLED_CONSTRUCTOR.search(symbol))
        else:
            path = _qualified_path(text)
            known = len(path) >= 2 and _bare(path[-1]) == _bare(path[-2]) != ""
        _constructor_cache[symbol] = known
    return known


def _qualified_path(demangled: str) -> list[str]:
    """``a::B<x>::B`` of ``a::B<x>::B(int) const``: the name before the parameters, split."""
    text = demangled.replace("(anonymous namespace)", "{anonymous}")
    depth, parts, start = 0, [], 0
    for position, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif depth == 0 and char == ":" and text.startswith("::", position):
            parts.append(text[start:position])
            start = position + 2
        elif depth == 0 and char == "(":
            return [*parts, text[start:position]] if start <= position else parts
    return []


def _bare(component: str) -> str:
    return _TEMPLATE_OR_TAG.sub("", component).strip()


# -- what one function does ------------------------------------------------------
@dataclass
class _Summary:
    """Effects of one function, without those of the functions it calls."""

    writes: dict[str, None] = field(default_factory=dict)
    reads: dict[str, None] = field(default_factory=dict)
    calls: dict[str, None] = field(default_factory=dict)
    external_calls: dict[str, None] = field(default_factory=dict)
    atexit: dict[AtExit, None] = field(default_factory=dict)
    ios_init: bool = False
    complete: bool = True
    callees: dict[int, None] = field(default_factory=dict)  # functions to follow

    def merge(self, other: _Summary) -> None:
        self.writes.update(other.writes)
        self.reads.update(other.reads)
        self.calls.update(other.calls)
        self.external_calls.update(other.external_calls)
        self.atexit.update(other.atexit)
        self.ios_init = self.ios_init or other.ios_init
        self.complete = self.complete and other.complete

    def effects(self) -> Effects:
        return Effects(tuple(self.writes), tuple(self.reads), tuple(self.calls),
                       tuple(self.external_calls), tuple(self.atexit), self.ios_init,
                       self.complete)


class _Value(NamedTuple):
    """What a register is known to hold."""

    address: int | None = None  # an address: lea/adr, adrp+add, an immediate
    got: GotEntry | None = None  # the address of got.symbol, loaded from its GOT slot
    page: bool = False  # an adrp page whose low 12 bits are still to be added


_State = dict[str, _Value]


def _intersect(a: _State, b: _State) -> _State:
    return {reg: value for reg, value in a.items() if b.get(reg) == value}


class _Target(NamedTuple):
    name: str | None
    follow: int | None  # address of this object's code to follow
    external: bool  # called through the PLT/GOT


class _FunctionWalk:
    """One linear sweep over one function; subclasses decode one instruction set."""

    ARGUMENTS: tuple[str, ...] = ()
    CALLER_SAVED: frozenset[str] = frozenset()
    CALL_WRITES: frozenset[str] = frozenset()  # registers the call instruction itself sets
    # mnemonic -> handler(walk, address of the next instruction, operands)
    HANDLERS: ClassVar[dict[str, Callable[[Any, int, str], bool]]] = {}

    def __init__(self, analyzer: EffectsAnalyzer, start: int, code: memoryview,
                 sized: bool) -> None:
        self.analyzer, self.index = analyzer, analyzer.index
        self.start, self.code, self.sized = start, code, sized
        self.end = start + len(code)
        self.summary = _Summary()
        self.state: _State = {}
        self.pending: dict[int, _State] = {}  # forward branch target -> state on arrival
        self.got_loaded: dict[str, None] = {}
        self.got_used: set[str] = set()

    # -- the sweep --------------------------------------------------------
    def run(self) -> _Summary:
        # One pass: a loop head gets the state it has on entry, so what is
        # reported holds on the first iteration; forward branches merge.
        reached, falls, pending, sized = self.start, True, self.pending, self.sized
        handlers, other = self.HANDLERS, self.other
        for address, size, mnemonic, operands in self.decode():
            if not falls or address in pending:
                self.enter(address, falls)
            handler = handlers.get(mnemonic)
            if handler is not None:
                falls = handler(self, address + size, operands)
            else:
                falls = other(address, size, mnemonic, operands)
            reached = address + size
            if not sized and not falls and not any(t > address for t in pending):
                break
        else:
            if sized and reached < self.end:  # undecodable bytes
                self.summary.complete = False
        self.finish()
        return self.summary

    def decode(self) -> Iterator[tuple[int, int, str, str]]:
        """The instructions, decoded at once when the size is known, else in chunks."""
        engine, code = self.analyzer.disassembler, bytes(self.code)
        if self.sized:
            return engine.disasm_lite(code, self.start)
        return decode_in_chunks(engine, code, self.start)

    def enter(self, address: int, falls: bool) -> None:
        """The register state on arrival: fallthrough merged with forward branches."""
        incoming = self.pending.pop(address, None)
        if not falls:
            self.state = incoming or {}
        elif incoming is not None:
            self.state = _intersect(self.state, incoming)

    def branch(self, target: int) -> None:
        """A conditional or in-function branch: its target inherits the current state."""
        if not self.start <= target < self.end:
            return
        known = self.pending.get(target)
        self.pending[target] = dict(self.state) if known is None \
            else _intersect(known, self.state)

    def finish(self) -> None:
        for symbol in self.got_loaded:
            if symbol not in self.got_used:
                self.summary.reads[symbol] = None

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

    # -- registers ------------------------------------------------------------
    def set(self, register: str | None, value: _Value | None) -> None:
        if register is None:
            return
        if value is None:
            self.state.pop(register, None)
        else:
            self.state[register] = value

    def load_from(self, register: str | None, slot: int) -> bool:
        """``register = *slot`` when ``slot`` is a GOT slot; False if it is not one."""
        entry = self.index.got_entry(slot)
        if entry is None:
            return False
        if entry.symbol is None:
            self.set(register, _Value(address=entry.address))
            return True
        self.set(register, _Value(got=entry))
        # A weak reference loaded only to be tested against null is not a read.
        if not entry.is_function and not entry.weak_undefined:
            self.got_loaded[entry.symbol] = None
        return True

    # -- memory ---------------------------------------------------------------
    def data(self, value: _Value, offset: int = 0) -> tuple[str, bool] | None:
        """(symbol, defined here) of the data at ``value + offset``, or None."""
        entry = value.got
        if entry is not None:
            self.got_used.add(entry.symbol or "")
            return None if entry.is_function or entry.symbol is None \
                else (entry.symbol, entry.defined)
        if value.address is None:
            return None
        name = self.index.data_symbol(value.address + offset)
        return (name, True) if name is not None else None

    def access(self, value: _Value, offset: int, read: bool, write: bool) -> None:
        found = self.data(value, offset)
        if found is None:
            return
        name, defined = found
        if read:
            self.summary.reads[name] = None
        if write and defined:
            self.summary.writes[name] = None

    # -- calls ----------------------------------------------------------------
    def call(self, target: _Value | None) -> None:
        state = self.state
        arguments = [state.get(register) for register in self.ARGUMENTS] if state else []
        resolved = self.resolve(target) if target is not None else None
        if state:
            self.forget_clobbered(resolved)
        if resolved is None:
            return  # a call through a register we cannot resolve: not followed
        if resolved.external and resolved.name:
            self.got_used.add(resolved.name)
        self.record_call(resolved)
        name = resolved.name
        if name == "__tls_get_addr" and arguments and arguments[0] is not None:
            self.thread_local(arguments[0])
        if name in ATEXIT_FUNCTIONS:
            self.register_atexit(name, arguments + [None] * (2 - len(arguments)))
            return
        if name in IOS_INIT_CONSTRUCTORS:
            self.summary.ios_init = True
        if any(arguments):
            self.pass_arguments(arguments, name is not None and is_constructor(name))
        if resolved.follow is not None:
            self.summary.callees[resolved.follow] = None

    def forget_clobbered(self, callee: _Target | None) -> None:
        """Forget the caller-saved registers the callee may change.

        A call into this object's own code keeps those the callee provably
        leaves alone: gcc (-fipa-ra, on from -O1) keeps values in them across
        calls to functions whose bodies it has compiled.
        """
        saved = self.CALLER_SAVED
        if not any(register in saved for register in self.state):
            return
        written = self.analyzer.registers_written(callee) if callee is not None else None
        lost = saved if written is None else written | self.CALL_WRITES
        self.state = {r: v for r, v in self.state.items() if r not in lost}

    def pass_arguments(self, arguments: list[_Value | None], constructor: bool) -> None:
        """A constructor writes its ``this``; any other pointer passed is read."""
        for position, value in enumerate(arguments):
            if value is not None and not value.page \
                    and not (value.got is not None and value.got.weak_undefined):
                this = constructor and position == 0
                self.access(value, 0, read=not this, write=this)

    def thread_local(self, argument: _Value) -> None:
        """``__tls_get_addr(&got_pair)``: the pair's relocation names the variable."""
        entry = self.index.got_entry(argument.address) if argument.address else None
        if entry is not None and entry.is_tls:
            self.access(_Value(got=entry), 0, read=True, write=False)

    def record_call(self, resolved: _Target) -> None:
        # Code without a symbol is named by its address.
        name = resolved.name or f"{resolved.follow or 0:#x}"
        if resolved.external:
            self.summary.external_calls[name] = None
        else:
            self.summary.calls[name] = None

    def resolve(self, target: _Value) -> _Target | None:
        if target.got is not None:
            return self.through_got(target.got)
        if not target.address or target.page:  # unknown, or a null weak reference
            return None
        return self.analyzer.code_target(target.address)

    def through_got(self, entry: GotEntry) -> _Target | None:
        if entry.symbol is not None:
            self.got_used.add(entry.symbol)
        if entry.is_tls:  # aarch64 TLS descriptor: a call that finds the variable
            self.access(_Value(got=entry), 0, read=True, write=False)
            return None
        return _got_target(self.index, entry)

    def register_atexit(self, name: str, arguments: list[_Value | None]) -> None:
        function, target = arguments[0], arguments[1] if name != "atexit" else None
        destructor = None
        if function is not None:
            resolved = self.resolve(function)
            destructor = resolved.name if resolved is not None else None
        object_name = None
        if target is not None and not target.page:
            found = self.data(target)
            object_name = found[0] if found else None
        self.summary.atexit[AtExit(object_name, destructor)] = None

    def tail_call(self, target: _Value | None) -> bool:
        """A jump out of the function (or through a register); never falls through."""
        if target is None:
            self.summary.complete = False  # an indirect jump we cannot resolve
        elif target.address != 0:  # 0: a null weak reference, tested before the jump
            self.call(target)
        self.state = {}
        return False

    def jump(self, target: int) -> bool:
        inside = self.start <= target < self.end
        if inside and (self.sized or self.index.function_at(target) is None):
            self.branch(target)
            return False
        if self.sized and self.index.has_local_symbols and self.index.function_at(target) \
                is None and self.index.plt_entry(target) is None:
            return False  # into this function's split-off part (.cold): error paths
        return self.tail_call(_Value(address=target))


def decode_in_chunks(engine: Cs, code: bytes, start: int,
                     chunk: int = 32) -> Iterator[tuple[int, int, str, str]]:
    """Instructions decoded a few at a time, for a reader that may stop early.

    capstone decodes all it is given before yielding the first instruction.
    """
    offset = 0
    while offset < len(code):
        decoded = list(engine.disasm_lite(code[offset:], start + offset, chunk))
        if not decoded:
            return
        yield from decoded
        offset = decoded[-1][0] + decoded[-1][1] - start


def _got_target(index: AddressIndex, entry: GotEntry) -> _Target:
    """The function a call through a GOT slot (or a PLT stub using it) reaches."""
    if entry.symbol is not None:
        # An interposable call to a function defined here reaches that
        # definition unless another object preempts it: follow it.
        follow = entry.definition if entry.defined and entry.is_function else None
        return _Target(entry.symbol, follow, True)
    name = None  # a slot holding an address of this object's own code
    if entry.address is not None:
        found = index.function_at(entry.address)
        name = found[0] if found else None
    return _Target(name, entry.address, False)


# -- x86-64 --------------------------------------------------------------------------
def _x86_registers() -> dict[str, str]:
    families = [("rax", "eax", "ax", "al", "ah"), ("rbx", "ebx", "bx", "bl", "bh"),
                ("rcx", "ecx", "cx", "cl", "ch"), ("rdx", "edx", "dx", "dl", "dh"),
                ("rsi", "esi", "si", "sil"), ("rdi", "edi", "di", "dil"),
                ("rbp", "ebp", "bp", "bpl"), ("rsp", "esp", "sp", "spl")]
    families += [(f"r{n}", f"r{n}d", f"r{n}w", f"r{n}b") for n in range(8, 16)]
    return {name: names[0] for names in families for name in names}


_X86_FAMILY = _x86_registers()
# 64- and 32-bit names: writing them sets the whole register.
_X86_WIDE = frozenset(name for name in _X86_FAMILY
                      if (name.startswith("r") and not name.endswith(("w", "b")))
                      or name.startswith("e"))
_X86_CONDITIONAL = frozenset({"jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja", "js", "jns",
                              "jp", "jnp", "jl", "jge", "jle", "jg", "jcxz", "jecxz", "jrcxz",
                              "loop", "loope", "loopne"})
_X86_STOPS = frozenset({"ret", "retf", "bnd ret", "ud2", "hlt", "int3"})
_X86_NO_DESTINATION = frozenset({"cmp", "test", "push", "bt", "comiss", "comisd", "ucomiss",
                                 "ucomisd", "ptest", "nop", "endbr64", "prefetcht0",
                                 "prefetcht1", "prefetcht2", "prefetchnta", "prefetchw"})
_X86_READS_MEMORY = frozenset({"cmp", "test", "movzx", "movsx", "movsxd", "push"})
# Instructions that write registers they do not name (string ops, mul/div, cpuid…).
_X86_IMPLICIT = frozenset({"mul", "div", "idiv", "cdq", "cqo", "cwd", "cdqe", "cpuid",
                           "rdtsc", "rdtscp", "syscall", "xchg", "xadd", "cmpxchg",
                           "cmpxchg16b", "stosb", "stosw", "stosd", "stosq", "movsb",
                           "movsw", "movsq", "lodsb", "lodsq", "scasb", "cmpsb", "xgetbv"})
_X86_OP_MEM = 3  # capstone.x86.X86_OP_MEM
_CS_AC_READ, _CS_AC_WRITE = 1, 2


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


class _X86Walk(_FunctionWalk):
    ARGUMENTS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
    CALLER_SAVED = frozenset({"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"})

    @staticmethod
    def control_transfer(mnemonic: str, operands: str) -> tuple[bool, int | None] | None:
        if mnemonic in _X86_CALLS or mnemonic in _X86_JUMPS:
            return mnemonic in _X86_CALLS, _immediate(operands)
        return None

    @staticmethod
    def registers_set(mnemonic: str, operands: str) -> tuple[str, ...] | None:
        if mnemonic in _X86_WRITES_NOTHING:
            return ()
        if " " in mnemonic:  # prefixes: a rep-prefixed string operation moves rcx, rdi, rsi
            prefix, _, bare = mnemonic.rpartition(" ")
            return None if "rep" in prefix else _X86Walk.registers_set(bare, operands)
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

    def __init__(self, analyzer: EffectsAnalyzer, start: int, code: memoryview,
                 sized: bool) -> None:
        super().__init__(analyzer, start, code, sized)
        # A fixed-address executable has addresses as immediates and displacements.
        self.absolute = analyzer.fixed_addresses

    def other(self, address: int, size: int, mnemonic: str, operands: str) -> bool:
        if mnemonic in _X86_STOPS:
            return False
        if " " in mnemonic:  # prefixes: rep, lock, bnd, notrack
            prefix, _, bare = mnemonic.rpartition(" ")
            handler = self.HANDLERS.get(bare)
            falls = handler(self, address + size, operands) if handler is not None \
                else self.other(address, size, bare, operands)
            if "rep" in prefix:
                self.clobber()
            return falls
        if "[" in operands and (self.state or "rip" in operands or self.absolute):
            self.generic_memory(mnemonic, operands, address, size)
        if self.state and not (mnemonic in ("add", "sub") and self.offset(mnemonic, operands)):
            self.generic_registers(mnemonic, operands)
        return True

    def offset(self, mnemonic: str, operands: str) -> bool:
        """``add reg, imm`` / ``sub reg, imm`` on a known address; False if it is not one."""
        destination, _, source = operands.partition(", ")
        family = _X86_FAMILY.get(destination)
        value = self.state.get(family) if family is not None and destination[0] == "r" else None
        number = _number(source) if value is not None and value.address is not None else None
        if family is None or value is None or value.address is None or number is None:
            return False
        sign = 1 if mnemonic == "add" else -1
        self.state[family] = _Value(address=value.address + sign * number)
        return True

    # -- control flow -----------------------------------------------------------
    def on_call(self, following: int, operands: str) -> bool:
        self.call(self.operand_target(operands, following))
        return True

    def on_jmp(self, following: int, operands: str) -> bool:
        target = _immediate(operands)
        if target is not None:
            return self.jump(target)
        return self.tail_call(self.operand_target(operands, following))

    def on_stop(self, following: int, operands: str) -> bool:
        return False

    def on_conditional(self, following: int, operands: str) -> bool:
        target = _immediate(operands)
        if target is not None:
            self.branch(target)
        return True

    def operand_target(self, operands: str, following: int) -> _Value | None:
        """Where ``call``/``jmp`` goes: an immediate, a register, or a GOT slot."""
        target = _immediate(operands)
        if target is not None:
            return _Value(address=target)
        if "[" not in operands:
            return self.state.get(_X86_FAMILY.get(operands, ""))
        slot = self.effective(operands, following)
        if slot is None or slot.address is None:
            return None
        entry = self.index.got_entry(slot.address)
        if entry is None:
            return None
        return _Value(got=entry) if entry.symbol is not None else _Value(address=entry.address)

    # -- addresses ----------------------------------------------------------------
    def on_lea(self, following: int, operands: str) -> bool:
        destination, _, source = operands.partition(", ")
        register = _X86_FAMILY.get(destination)
        if register is not None:
            self.set(register, self.effective(source, following)
                     if destination in _X86_WIDE else None)
        return True

    def effective(self, operand: str, following: int) -> _Value | None:
        """The address a memory operand designates, as far as it is known."""
        located = self.memory(operand, following)
        if located is None:
            return None
        base, offset = located
        if base.got is not None:
            return base if offset == 0 else None
        if base.address is None:
            return None
        return _Value(address=base.address + offset)

    def memory(self, operand: str, following: int) -> tuple[_Value, int] | None:
        """(base value, displacement) of a memory operand whose base is known."""
        open_at = operand.find("[")
        inner = operand[open_at + 1 : operand.find("]", open_at)]
        if inner.startswith("rip + 0x") and operand[open_at - 1 : open_at] != ":":
            number = _number(inner[6:])  # the usual form
            if number is not None:
                return _Value(address=following + number), 0
        first = inner.partition(" ")[0]
        base: _Value | None = None
        if first in _X86_FAMILY:
            base = self.state.get(_X86_FAMILY[first])
            if base is None:
                return None
        offset = _displacement(inner)
        if offset is None:
            return None
        if ":" in operand[:open_at]:  # fs:[reg]: reg holds a thread-local offset
            return (base, offset) if base is not None and base.got is not None else None
        if base is not None:
            return base, offset
        if first == "rip":
            return _Value(address=following + offset), 0
        # An absolute address, perhaps indexed: only a fixed-address executable has them.
        return (_Value(address=offset), 0) if self.absolute else None

    # -- moves ----------------------------------------------------------------------
    def on_mov(self, following: int, operands: str) -> bool:
        if not self.state and not self.absolute and "rip" not in operands:
            return True  # nothing known is read, nothing known is overwritten
        destination, _, source = operands.partition(", ")
        if "[" in destination:
            located = self.memory(destination, following)
            if located is not None:
                self.access(located[0], located[1], read=False, write=True)
        elif "[" in source:
            self.load(destination, source, following)
        else:
            self.set(_X86_FAMILY.get(destination),
                     self.source_value(source) if destination in _X86_WIDE else None)
        return True

    def load(self, destination: str, source: str, following: int) -> None:
        register = _X86_FAMILY.get(destination)
        self.set(register, None)
        located = self.memory(source, following)
        if located is None:
            return
        base, offset = located
        if destination in _X86_WIDE and base.address is not None and base.got is None \
                and self.load_from(register, base.address + offset):
            return
        self.access(base, offset, read=True, write=False)

    def source_value(self, source: str) -> _Value | None:
        family = _X86_FAMILY.get(source)
        if family is not None:
            return self.state.get(family)
        # Only a fixed-address executable has addresses as immediates, and
        # only numbers inside its image are addresses (not counts or flags).
        number = _immediate(source) if self.absolute else None
        if number is None or not self.analyzer.in_image(number):
            return None
        return _Value(address=number)

    # -- everything else --------------------------------------------------------------
    def generic_memory(self, mnemonic: str, operands: str, address: int, size: int) -> None:
        for operand in operands.split(", "):
            if "[" in operand:
                located = self.memory(operand, address + size)
                if located is not None:
                    read, write = self.memory_access(mnemonic, address, size)
                    self.access(located[0], located[1], read, write)

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

    def memory_access(self, mnemonic: str, address: int, size: int) -> tuple[bool, bool]:
        """(read, write) of the memory operand, from capstone's operand access flags."""
        if mnemonic in _X86_READS_MEMORY:
            return True, False
        offset = address - self.start
        code = bytes(self.code[offset : offset + size])
        for instruction in self.analyzer.detailed.disasm(code, address, 1):
            for operand in instruction.operands:
                if operand.type == _X86_OP_MEM and operand.access:
                    return (bool(operand.access & _CS_AC_READ),
                            bool(operand.access & _CS_AC_WRITE))
        return True, False


def _displacement(inner: str) -> int | None:
    """The constant part of ``rip + 0x10`` / ``rax + rbx*8 - 8`` / ``0x404040``."""
    offset, sign = 0, 1
    for token in inner.split(" "):
        if token == "+":
            sign = 1
        elif token == "-":
            sign = -1
        elif token[:1].isdigit() and "*" not in token:
            number = _number(token)
            if number is None:
                return None
            offset += sign * number
    return offset


_X86Walk.HANDLERS = {
    "call": _X86Walk.on_call, "bnd call": _X86Walk.on_call, "notrack call": _X86Walk.on_call,
    "jmp": _X86Walk.on_jmp, "bnd jmp": _X86Walk.on_jmp, "notrack jmp": _X86Walk.on_jmp,
    "notrack bnd jmp": _X86Walk.on_jmp,
    "lea": _X86Walk.on_lea, "mov": _X86Walk.on_mov, "movabs": _X86Walk.on_mov,
    **dict.fromkeys(_X86_CONDITIONAL, _X86Walk.on_conditional),
    **dict.fromkeys(_X86_STOPS, _X86Walk.on_stop),
}


# -- aarch64 ---------------------------------------------------------------------------
_A64_MEMORY = re.compile(r"\[(\w+)(?:, ([^\]]+))?\](!?)(, #?(-?\w+))?")
_A64_CONDITIONAL = frozenset({"cbz", "cbnz", "tbz", "tbnz"} | {
    f"b.{cc}" for cc in ("eq", "ne", "hs", "cs", "lo", "cc", "mi", "pl", "vs", "vc", "hi", "ls",
                         "ge", "lt", "gt", "le", "al", "nv")})
_A64_STOPS = frozenset({"ret", "retaa", "retab", "brk", "udf", "hlt"})
_A64_NO_DESTINATION = frozenset({"cmp", "cmn", "tst", "ccmp", "ccmn", "fcmp", "fcmpe",
                                 "fccmp", "msr", "nop", "hint", "bti", "dmb", "dsb", "isb",
                                 "paciasp", "autiasp", "pacibsp", "autibsp", "prfm", "sys",
                                 "dc", "ic", "tlbi", "yield", "sev", "wfe", "wfi"})
_A64_READ_WRITE = ("ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax",
                   "ldumin", "swp", "cas")
_A64_TRANSFER = ("ld", "st", "sw", "ca")


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


class _Arm64Walk(_FunctionWalk):
    ARGUMENTS = ("x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7")
    CALLER_SAVED = frozenset([f"x{n}" for n in range(19)] + ["x30"])
    CALL_WRITES = frozenset({"x30"})  # bl/blr put the return address in the link register

    @staticmethod
    def control_transfer(mnemonic: str, operands: str) -> tuple[bool, int | None] | None:
        if mnemonic in _A64_CALLS or mnemonic in _A64_JUMPS:
            return mnemonic in _A64_CALLS, _immediate(operands.lstrip("#"))
        return None

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
        if mnemonic in _A64_STOPS:
            return False
        if mnemonic in _A64_CONDITIONAL:
            target = _immediate(operands.rpartition("#")[2])
            if target is not None:
                self.branch(target)
        elif "[" in operands and mnemonic.startswith(_A64_TRANSFER):
            self.transfer(mnemonic, operands)
        elif self.state and mnemonic not in _A64_NO_DESTINATION:
            self.set(_a64_register(operands.partition(",")[0]), None)
        return True

    # -- control flow -----------------------------------------------------------
    def on_bl(self, following: int, operands: str) -> bool:
        target = _immediate(operands.lstrip("#"))
        self.call(_Value(address=target) if target is not None else None)
        return True

    def on_blr(self, following: int, operands: str) -> bool:
        self.call(self.state.get(_a64_register(operands) or ""))
        return True

    def on_b(self, following: int, operands: str) -> bool:
        target = _immediate(operands.lstrip("#"))
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
        number = _immediate(source.lstrip("#"))
        self.set(_a64_register(destination),
                 _Value(address=number, page=page) if number is not None else None)
        return True

    def on_add(self, following: int, operands: str) -> bool:
        if not self.state:
            return True
        parts = operands.split(", ")
        base = self.state.get(_a64_register(parts[1]) or "") if len(parts) > 2 else None
        number = _immediate(parts[2].lstrip("#")) if base is not None else None
        if len(parts) == 4 and parts[3] == "lsl #12" and number is not None:
            number <<= 12
        elif len(parts) != 3:
            number = None
        value = None
        if base is not None and base.address is not None and number is not None:
            value = _Value(address=base.address + number)
        self.set(_a64_register(parts[0]), value)
        return True

    def on_mov(self, following: int, operands: str) -> bool:
        if self.state:
            destination, _, source = operands.partition(", ")
            value = self.state.get(_a64_register(source) or "") if source[:1] == "x" else None
            self.set(_a64_register(destination), value)
        return True

    # -- loads and stores -------------------------------------------------------
    def transfer(self, mnemonic: str, operands: str) -> None:
        """A load or store: its memory access, and the registers it writes."""
        match = _A64_MEMORY.search(operands)
        if match is None:
            return
        base_register = _a64_register(match.group(1))
        base = self.state.get(base_register or "")
        registers = [_a64_register(r) for r in operands[: match.start()].rstrip(", ").split(", ")]
        read_write = mnemonic.startswith(_A64_READ_WRITE)
        loads = mnemonic.startswith("ld") or read_write
        if base is not None:
            offset = _immediate((match.group(2) or "0").lstrip("#"))
            self.located(mnemonic, operands, base, offset, registers, loads, read_write)
        elif loads:
            self.kill(registers)
        if mnemonic.startswith(("stx", "stlx")):
            self.kill(registers[:1])  # the status register
        if match.group(3) or match.group(4):  # pre/post-index writeback
            self.set(base_register, None)

    def located(self, mnemonic: str, operands: str, base: _Value, offset: int | None,
                registers: list[str | None], loads: bool, read_write: bool) -> None:
        """A transfer whose base register holds a known address."""
        if offset is None and base.page:
            self.kill(registers if loads else [])
            return
        if loads and not read_write and len(registers) == 1 and operands.startswith("x") \
                and base.address is not None and offset is not None \
                and self.load_from(registers[0], base.address + offset):
            return
        self.access(base, offset or 0, read=loads, write=mnemonic.startswith("st") or read_write)
        if loads:
            self.kill(registers)

    def kill(self, registers: list[str | None]) -> None:
        for register in registers:
            self.set(register, None)


_Arm64Walk.HANDLERS = {
    "bl": _Arm64Walk.on_bl, "blr": _Arm64Walk.on_blr, "b": _Arm64Walk.on_b,
    "br": _Arm64Walk.on_br, "adrp": _Arm64Walk.on_adrp, "adr": _Arm64Walk.on_adr,
    "add": _Arm64Walk.on_add, "mov": _Arm64Walk.on_mov,
}


# -- numbers ---------------------------------------------------------------------------
def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _immediate(text: str) -> int | None:
    """A branch target or immediate operand written as a number."""
    return _number(text) if text[:1].isdigit() else None


# -- the analyzer ------------------------------------------------------------------------
_WALKS: dict[int, type[_FunctionWalk]] = {EM_X86_64: _X86Walk, EM_AARCH64: _Arm64Walk}


class EffectsAnalyzer:
    """Effects of any number of initializers of one object; indexes are built once."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self.index = AddressIndex(elf)
        machine = elf.header.machine
        supported = elf.header.elf_class == 64 and elf.header.little_endian
        self._walk = _WALKS.get(machine) if supported else None
        self._summaries: dict[int, _Summary] = {}
        self._targets: dict[int, _Target] = {}
        self._written: dict[int, frozenset[str] | None] = {}
        self._decode_error: type[Exception] = ElfpatchError  # capstone's, once imported
        # ET_EXEC: code may hold data addresses as immediates (mov esi, OFFSET obj).
        self.fixed_addresses = elf.header.type == ET_EXEC
        loads = [s for s in elf.segments if s.type == PT_LOAD]
        self._image = (min((s.vaddr for s in loads), default=0),
                       max((s.vaddr + s.memsz for s in loads), default=0))

    def in_image(self, address: int) -> bool:
        """Whether ``address`` falls inside the object's loaded image."""
        return self._image[0] <= address < self._image[1]

    @property
    def supported(self) -> bool:
        return self._walk is not None

    @cached_property
    def disassembler(self) -> Cs:
        return self._capstone(detail=False)

    @cached_property
    def detailed(self) -> Cs:
        return self._capstone(detail=True)

    def _capstone(self, detail: bool) -> Cs:
        try:
            import capstone
        except ImportError:
            raise UnsupportedElfError(self.elf.name, "capstone is not installed",
                                      hint="pip install capstone") from None
        if self.elf.header.machine == EM_X86_64:
            engine = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        else:
            engine = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
        engine.detail = detail
        self._decode_error = capstone.CsError
        return engine

    def effects(self, address: int, *, max_depth: int = 4, max_functions: int = 64) -> Effects:
        """What the function at ``address`` and the functions it calls do."""
        if self._walk is None:
            return UNKNOWN_EFFECTS
        self.index.prepare()  # a corrupt table is reported, not mistaken for odd code
        total = _Summary()
        seen, frontier, analysed = {address}, [address], 0
        for _depth in range(max_depth + 1):
            following: list[int] = []
            for function in frontier:
                if analysed == max_functions:
                    total.complete = False
                    return total.effects()
                summary = self.summary(function)
                analysed += 1
                total.merge(summary)
                following += [c for c in summary.callees if c not in seen]
                seen.update(summary.callees)
            frontier = following
            if not frontier:
                break
        else:
            total.complete = False  # callees deeper than max_depth were left out
        return total.effects()

    @property
    def functions_followed(self) -> tuple[int, ...]:
        """Entry addresses of the functions whose machine code has been read so far."""
        return tuple(self._summaries)

    def code_target(self, address: int) -> _Target:
        """The function a direct call to ``address`` reaches (cached)."""
        known = self._targets.get(address)
        if known is None:
            found = self.index.function_at(address)
            stub = self.index.plt_entry(address) if found is None else None
            if found is not None:
                known = _Target(found[0], address, False)
            elif stub is not None:
                known = _got_target(self.index, stub)
            else:
                known = _Target(None, address, False)
            self._targets[address] = known
        return known

    def registers_written(self, callee: _Target) -> frozenset[str] | None:
        """The caller-saved registers a call to ``callee`` may change; None when unknown.

        Known only for this object's own code, read whole: a call through the
        PLT or GOT may reach another object (and the lazy-binding resolver).
        """
        return self._written_by(callee, 0)

    def _written_by(self, callee: _Target, depth: int) -> frozenset[str] | None:
        address = callee.follow
        if callee.external or address is None:
            return None
        if address in self._written:
            return self._written[address]
        if depth > MAX_WRITES_DEPTH:
            return None
        self._written[address] = None  # a recursive call meets "unknown"
        written = self._written[address] = self._sweep_writes(address, depth)
        return written

    def _sweep_writes(self, address: int, depth: int) -> frozenset[str] | None:
        """Every register one function (and what it calls) may write, or None."""
        assert self._walk is not None
        walk, engine = self._walk, self.disassembler
        found = self.index.function_at(address)
        size = found[1] if found else 0
        code = self.index.code_at(address, size) if 0 < size <= MAX_WRITES_BYTES else None
        if code is None or len(code) < size:
            return None
        written: set[str] = set()
        reached = address
        try:
            # Most sweeps stop early, at a call through the PLT: decode a little at a time.
            for at, length, mnemonic, operands in decode_in_chunks(engine, bytes(code), address):
                reached = at + length
                transfer = walk.control_transfer(mnemonic, operands)
                if transfer is None:
                    registers = walk.registers_set(mnemonic, operands)
                    if registers is None:
                        return None
                    written.update(registers)
                    continue
                is_call, target = transfer
                if not is_call and target is not None and address <= target < address + size:
                    continue  # a branch inside the function
                inner = self._written_by(self.code_target(target), depth + 1) \
                    if target is not None else None
                if inner is None:
                    return None
                written |= inner | (walk.CALL_WRITES if is_call else frozenset())
        except (ElfpatchError, self._decode_error):
            return None
        if reached < address + size:  # bytes that do not decode
            return None
        return frozenset(written) & walk.CALLER_SAVED

    def summary(self, address: int) -> _Summary:
        """The effects of the one function at ``address`` (cached)."""
        known = self._summaries.get(address)
        if known is None:
            known = self._summaries[address] = self._analyse(address)
        return known

    def _analyse(self, address: int) -> _Summary:
        assert self._walk is not None
        found = self.index.function_at(address)
        size = found[1] if found else 0
        limit = min(size, MAX_FUNCTION_BYTES) if size else MAX_UNSIZED_BYTES
        code = self.index.code_at(address, limit)
        if code is None or (size and len(code) < min(size, MAX_FUNCTION_BYTES)):
            return _Summary(complete=False)
        try:
            summary = self._walk(self, address, code, sized=bool(size)).run()
        except (ElfpatchError, self._decode_error):  # code that does not decode
            return _Summary(complete=False)
        if size > MAX_FUNCTION_BYTES:
            summary.complete = False
        return summary
