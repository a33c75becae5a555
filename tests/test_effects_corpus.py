"""The machine-code walkers' reading of capstone, pinned on a corpus of real code.

The walkers (``elfpatch/analysis/effects/x86_64.py``, ``aarch64.py``)
interpret capstone's text: the mnemonic and the operand string of each
instruction (``lea rdi, [rip + 0x2e61]``, ``ldr x0, [x0, #0xfd8]``).  A
capstone release that prints an operand differently would change what they
find without any error, so this corpus pins both halves:

- ``CORPUS``: initializers g++ -O2 -fPIC compiled from ``SNIPPETS`` (x86-64
  and aarch64), plus a few hand-assembled forms.  Each row holds the
  function's bytes, capstone's decode of every instruction as the walker
  receives it (mnemonic and operand string, with the walker's reading of the
  instruction: the registers it sets, the call or jump it is), what the
  walker was told about the addresses it asked for (data symbols, GOT slots,
  PLT stubs, jump tables), and the events the walker derived.
  ``test_decode_is_pinned`` fails on any change of capstone's output for
  those bytes; ``test_walker_reading_is_pinned`` replays the walk against the
  recorded answers and fails when the walker's interpretation changes (a
  question about an address the row does not record is such a change).
- ``test_compiled_snippet``: the same snippets compiled here, now, and
  analysed whole, checked for what their source says they do, so that the
  corpus cannot drift from what the compilers emit.

After an intended change (a new capstone, a walker that reads more), run
``python tests/test_effects_corpus.py`` to print the rows afresh from g++'s
output, and review the difference before replacing ``CORPUS``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from elfpatch.analysis.effects import AtExit, EffectsAnalyzer
from elfpatch.analysis.effects.addresses import GotEntry
from elfpatch.analysis.effects.summary import (
    ADDRESS,
    ATEXIT,
    CALL,
    GUARD,
    GUARD_VARIABLE,
    HOOK,
    PASS,
    PASS_FOREIGN,
    READ,
    UNKNOWN_PASS,
    UNSEEN,
    WRITE,
    FunctionSummary,
)
from elfpatch.analysis.effects.walk import FunctionWalk
from elfpatch.elf.constants import EM_AARCH64, EM_X86_64, ET_DYN

MACHINES = {"x86_64": EM_X86_64, "aarch64": EM_AARCH64}
COMPILERS = {"x86_64": "g++", "aarch64": "aarch64-linux-gnu-g++"}
FLAGS = ("-O2", "-fPIC")

# One translation unit each, one dynamic initializer each: the addressing
# forms the walkers rely on.
SNIPPETS = {
    # A call through the PLT, its result stored to a global through its GOT
    # slot (interposable) and to a hidden one directly (rip-relative, adrp+str).
    "store": ('int compute();\nint exported = compute();\n'
              '__attribute__((visibility("hidden"))) int hidden_value = compute() + 1;\n'),
    # lea/adrp+add of an object and of its destructor, __cxa_atexit through the
    # PLT, stores of immediates (the short string written in place).
    "string": '#include <string>\nstd::string s("x");\n',
    # std::ios_base::Init constructed, its destructor registered.
    "iostream": '#include <iostream>\nvoid hello() { std::cout << "hi\\n"; }\n',
    # A function-local static of an inline function: __cxa_guard_acquire/release.
    "guard": ('int compute();\n'
              'inline int& instance() { static int value = compute(); return value; }\n'
              'int first = instance();\n'),
    # atexit(function) through the PLT.
    "atexit": ('#include <cstdlib>\nstatic void bye() { asm volatile(""); }\n'
               'int registered = std::atexit(bye);\n'),
    # A call through a function pointer loaded from a global.
    "indirect": 'extern int (*volatile hook)();\nint hooked = hook();\n',
    # Thread-locals: general dynamic (__tls_get_addr; aarch64 TLS descriptors)
    # and initial exec (fs: on x86-64, tpidr_el0 on aarch64).
    "tls": ('extern __thread int tv;\n'
            'extern __thread int ie __attribute__((tls_model("initial-exec")));\n'
            'int copy_tv = tv + 1;\nint copy_ie = ie + 2;\n'),
    # A switch: on x86-64 a jump table (lea + movsxd + add + jmp rax); aarch64's g++
    # makes a chain of compares for these eight cases.
    "switch": ('void f0(); void f1(); void f2(); void f3(); void f4(); void f5();\n'
               'void f6(); void f7();\nextern volatile int selector;\n'
               'static int pick() {\n  switch (selector) {\n'
               '    case 0: f0(); return 10; case 1: f1(); return 21; case 2: f2(); return 32;\n'
               '    case 3: f3(); return 43; case 4: f4(); return 54; case 5: f5(); return 65;\n'
               '    case 6: f6(); return 76; case 7: f7(); return 87;\n  }\n  return 0;\n}\n'
               'int picked = pick();\n'),
}


@dataclass(frozen=True)
class Row:
    """One function of the corpus: bytes, capstone's decode, the walker's reading."""

    name: str
    machine: str
    start: int
    code: str  # hex
    decode: tuple[str, ...]  # "mnemonic op_str ; the walker's reading", per instruction
    # What the walker asked about addresses, and was told:
    data: dict[int, str | None] = field(default_factory=dict)  # data symbol containing
    got: dict[int, tuple | None] = field(default_factory=dict)  # GotEntry fields
    plt: dict[int, tuple | None] = field(default_factory=dict)  # GotEntry of a stub
    functions: dict[int, tuple[str | None, int] | None] = field(default_factory=dict)
    tables: dict[int, str] = field(default_factory=dict)  # jump table entries, hex
    effect: tuple[str, ...] = ()
    # Other code the walker reads, by address, hex: a split-off part (f.cold) whose
    # straight run it checks for a call that never returns.
    tails: dict[int, str] = field(default_factory=dict)


# -- reading a row back ---------------------------------------------------------------
class Unrecorded(AssertionError):
    """The walker asked about an address the row does not record: its reading changed."""


class ReplayIndex:
    """``AddressIndex`` answering from a row: every question must have been recorded."""

    has_local_symbols = knows_functions = True
    keys_by_address = False

    def __init__(self, row: Row) -> None:
        self.row = row
        self.code = bytes.fromhex(row.code)

    def _answer(self, table: dict, key: int, what: str) -> Any:
        if key not in table:
            raise Unrecorded(f"{self.row.name}: the walker asked for the {what} at {key:#x}, "
                             "which the corpus does not record")
        return table[key]

    def prepare(self) -> None:
        pass

    def data_symbol(self, address: int) -> str | None:
        return self._answer(self.row.data, address, "data symbol")

    def data_key(self, address: int, anchor: bool = False) -> str | None:
        """The corpus pins objects by name: a row's file has .symtab, and the name
        stands for the object (``AddressIndex.data_key`` keys it by address)."""
        return self.data_symbol(address)

    def got_entry(self, slot: int) -> GotEntry | None:
        fields = self._answer(self.row.got, slot, "GOT slot")
        return GotEntry(*fields) if fields is not None else None

    def plt_entry(self, stub: int) -> GotEntry | None:
        fields = self._answer(self.row.plt, stub, "PLT stub")
        return GotEntry(*fields) if fields is not None else None

    def unlikely(self, address: int) -> bool:
        """The corpus pins how the walker reads code, not where the linker put it."""
        return False

    def function_at(self, address: int) -> tuple[str | None, int] | None:
        if address == self.row.start:
            return "corpus", len(self.code)
        found = self._answer(self.row.functions, address, "function")
        return tuple(found) if found is not None else None

    def constant_key(self, address: int) -> str | None:
        return None  # the rows pin no registry keys (tests/test_inits_registries.py does)

    def constant_number(self, address: int, width: int) -> int | None:
        return None  # nor the bytes of literals (tests/test_effects_stack_keys.py does)

    def read_only_data(self, address: int) -> bool:
        return False  # nor stores of read-only addresses

    def zero_initialized(self, address: int) -> bool:
        return False  # nor .bss: a store of zero is a store like any other

    def code_at(self, address: int, limit: int) -> memoryview | None:
        offset = address - self.row.start
        if address in self.row.tails:
            return memoryview(bytes.fromhex(self.row.tails[address]))[:limit]
        if not 0 <= offset < len(self.code):
            raise Unrecorded(f"{self.row.name}: the walker read code at {address:#x}")
        return memoryview(self.code)[offset : offset + limit]


class ReplayElf:
    """The little of an ELF file the walkers read besides the index: jump tables."""

    def __init__(self, row: Row) -> None:
        self.name = row.name
        self.header = SimpleNamespace(machine=MACHINES[row.machine], elf_class=64,
                                      little_endian=True, type=ET_DYN)
        self.segments: list[Any] = []
        self.offsets, blob = {}, b""
        for address, entries in row.tables.items():
            self.offsets[address] = len(blob)
            blob += bytes.fromhex(entries)
        self.view, self.size = memoryview(blob), len(blob)

    def vaddr_to_offset(self, vaddr: int, what: str) -> int:
        if vaddr not in self.offsets:
            raise Unrecorded(f"{self.name}: the walker read the {what} at {vaddr:#x}")
        return self.offsets[vaddr]


class CorpusAnalyzer(EffectsAnalyzer):
    """One function swept on its own: callees are neither followed nor asked what they
    write (every caller-saved register is taken as lost across a call)."""

    def __init__(self, elf: Any, index: Any) -> None:
        super().__init__(elf)
        self.index = index

    def registers_written(self, callee: Any) -> frozenset[str] | None:
        return None

    def returned_global(self, function: int, constants: tuple = ()) -> int | str | None:
        return None

    def returned_constant(self, function: int) -> int | None:
        return None

    def registers_at_exit(self, function: int) -> bool:
        return False


def replay(row: Row) -> FunctionSummary:
    analyzer = CorpusAnalyzer(ReplayElf(row), ReplayIndex(row))
    return analyzer.summary(row.start)


# -- what is pinned ---------------------------------------------------------------------
def walk_of(machine: str) -> type[FunctionWalk]:
    return importlib.import_module(f"elfpatch.analysis.effects.{machine}").WALK


def decoded(machine: str, start: int, code: bytes) -> Iterator[tuple[int, int, str, str]]:
    """What the walkers consume: capstone's (address, size, mnemonic, op_str), from the
    engine the analyzer sets up."""
    analyzer = EffectsAnalyzer(ReplayElf(Row("decode", machine, start, code.hex(), ())))
    return analyzer.disassembler.disasm_lite(code, start)


def reading(walk: type[FunctionWalk], mnemonic: str, operands: str) -> str:
    """The walker's reading of one instruction alone: the call or jump it is, or the
    general registers it may write ("?": not known, so all of them)."""
    transfer = walk.control_transfer(mnemonic, operands)
    if transfer is not None:
        is_call, target = transfer
        return f"{'call' if is_call else 'jump'} {hex(target) if target is not None else '?'}"
    written = walk.registers_set(mnemonic, operands)
    return "sets ?" if written is None else "sets " + ",".join(written) if written else ""


def decode_lines(machine: str, start: int, code: bytes) -> tuple[str, ...]:
    walk = walk_of(machine)
    lines = []
    for _address, _size, mnemonic, operands in decoded(machine, start, code):
        text = f"{mnemonic} {operands}".rstrip()
        meaning = reading(walk, mnemonic, operands)
        lines.append(f"{text} ; {meaning}" if meaning else text)
    return tuple(lines)


def rendered(summary: FunctionSummary) -> tuple[str, ...]:
    """The walker's findings for one function, as text."""
    lines = []
    for kind, subject, callee, position in summary.events:
        if kind == ATEXIT:
            assert isinstance(subject, AtExit)
            lines.append(f"atexit {subject.object} {subject.destructor}")
        elif kind in (PASS, PASS_FOREIGN, UNKNOWN_PASS):
            where = hex(callee) if callee is not None else "code not followed"
            lines.append(f"{_KINDS[kind]} {subject} to {where} as {position}")
        elif kind in (CALL, HOOK):
            lines.append(f"{_KINDS[kind]} {subject:#x}")
        elif kind == GUARD:
            lines.append("guard taken" if subject else "guard given back")
        elif kind == UNSEEN:
            lines.append(f"not followed from here: {subject}")
        else:
            lines.append(f"{_KINDS[kind]} {subject}")
    lines += [f"calls {name}" for name in summary.calls]
    lines += [f"calls external {name}" for name in summary.external_calls]
    lines += [f"stopped: {reason}" for reason in summary.stopped]
    return (*lines, *(["constructs ios_base::Init"] if summary.ios_init else []))


_KINDS = {READ: "read", WRITE: "write", ADDRESS: "address", PASS: "pass",
          PASS_FOREIGN: "pass foreign", UNKNOWN_PASS: "pass", CALL: "follow",
          HOOK: "hook", GUARD_VARIABLE: "guard variable"}


# -- the corpus (printed by `python tests/test_effects_corpus.py`) -------------------------
CORPUS: tuple[Row, ...] = (
    Row('x86_64-hand-stores', 'x86_64', 0x1000,
        (
            'f30f1efac705f23f00002a00000048893df33f00008305e43f000001f30f1105e43f0000803dd53f'
            '000000488d05ce3f0000c740040700000064488b142500000000488b3db74f0000ff15b14f00003e'
            'ffe0'
        ),
        (
            'endbr64',
            'mov dword ptr [rip + 0x3ff2], 0x2a',
            'mov qword ptr [rip + 0x3ff3], rdi',
            'add dword ptr [rip + 0x3fe4], 1',
            'movss dword ptr [rip + 0x3fe4], xmm0',
            'cmp byte ptr [rip + 0x3fd5], 0',
            'lea rax, [rip + 0x3fce] ; sets rax',
            'mov dword ptr [rax + 4], 7',
            'mov rdx, qword ptr fs:[0] ; sets rdx',
            'mov rdi, qword ptr [rip + 0x4fb7] ; sets rdi',
            'call qword ptr [rip + 0x4fb1] ; call ?',
            'notrack jmp rax ; jump ?',
        ),
        data={
            0x5000: 'g',
            0x5008: 'h',
            0x5004: 'g',
        },
        got={
            0x6000: ('puts', None, False, 2, False, None),
        },
        effect=(
            'write g',
            'write h',
            'read g',
            'write g',
            'write h',
            'read g',
            'write g',
            'not followed from here: indirect jump',
            'calls external puts',
            'stopped: indirect jump',
        )),
    Row('x86_64-hand-spill', 'x86_64', 0x1000,
        (
            '488d35f93f0000488975e8488b7de8488d15f23f0000ff15e44f0000f2ff25e54f0000'
        ),
        (
            'lea rsi, [rip + 0x3ff9] ; sets rsi',
            'mov qword ptr [rbp - 0x18], rsi',
            'mov rdi, qword ptr [rbp - 0x18] ; sets rdi',
            'lea rdx, [rip + 0x3ff2] ; sets rdx',
            'call qword ptr [rip + 0x4fe4] ; call ?',
            'bnd jmp qword ptr [rip + 0x4fe5] ; jump ?',
        ),
        data={
            0x5000: 'g',
            0x5008: 'h',
        },
        got={
            0x6000: ('puts', None, False, 2, False, None),
            0x6008: ('abort', None, False, 2, False, None),
        },
        effect=(
            'pass g to code not followed as 0',
            'pass g to code not followed as 1',
            'pass h to code not followed as 2',
            'calls external puts',
            'calls external abort',
        )),
    Row('x86_64-hand-vector', 'x86_64', 0x1000,
        (
            '488d35f93f0000660fefc00f1106c5fe7f06f30f7e0dee3f0000c3'
        ),
        (
            'lea rsi, [rip + 0x3ff9] ; sets rsi',
            'pxor xmm0, xmm0',
            'movups xmmword ptr [rsi], xmm0',
            'vmovdqu ymmword ptr [rsi], ymm0',
            'movq xmm1, qword ptr [rip + 0x3fee]',
            'ret',
        ),
        data={
            0x5000: 'g',
            0x5008: 'h',
        },
        effect=(
            'write g',
            'write g',
            'read h',
        )),
    Row('x86_64-hand-tail', 'x86_64', 0x1000,
        (
            '53488b05f83f00004885c0741b4839f874184889c3488b004885c0740b4839f875f0488b07488903'
            '5bc3488d1dcf3f0000ebef'
        ),
        (
            'push rbx',
            'mov rax, qword ptr [rip + 0x3ff8] ; sets rax',
            'test rax, rax',
            'je 0x1028',
            'cmp rax, rdi',
            'je 0x102a',
            'mov rbx, rax ; sets rbx',
            'mov rax, qword ptr [rax] ; sets rax',
            'test rax, rax',
            'je 0x1028',
            'cmp rax, rdi',
            'jne 0x1012',
            'mov rax, qword ptr [rdi] ; sets rax',
            'mov qword ptr [rbx], rax',
            'pop rbx ; sets rbx',
            'ret',
            'lea rbx, [rip + 0x3fcf] ; sets rbx',
            'jmp 0x1022 ; jump 0x1022',
        ),
        data={
            0x5000: 'g',
        },
        got={
            0x5000: None,
        },
        effect=(
            'read g',
            'read *g',
            'write *g',
            'write g',
        )),
    Row('aarch64-hand', 'aarch64', 0x1000,
        (
            '20000090004000911f0000b9e1008052010400b922000090431040b9240002108548613846d03bd5'
            'fd7bbea9e00b00f9e00b40f9fd7bc2a8300000b0110240f920023fd6300000b0110640f920021fd6'
        ),
        (
            'adrp x0, #0x5000 ; sets x0',
            'add x0, x0, #0x10 ; sets x0',
            'str wzr, [x0]',
            'mov w1, #7 ; sets x1',
            'str w1, [x0, #4]',
            'adrp x2, #0x5000 ; sets x2',
            'ldr w3, [x2, #0x10] ; sets x3',
            'adr x4, #0x5020 ; sets x4',
            'ldrb w5, [x4, w1, uxtw] ; sets x5',
            'mrs x6, tpidr_el0 ; sets x6',
            'stp x29, x30, [sp, #-0x20]!',
            'str x0, [sp, #0x10]',
            'ldr x0, [sp, #0x10] ; sets x0',
            'ldp x29, x30, [sp], #0x20 ; sets x29,x30',
            'adrp x16, #0x6000 ; sets x16',
            'ldr x17, [x16] ; sets x17',
            'blr x17 ; call ?',
            'adrp x16, #0x6000 ; sets x16',
            'ldr x17, [x16, #8] ; sets x17',
            'br x17 ; jump ?',
        ),
        data={
            0x5010: 'g',
            0x5014: 'g',
            0x5020: 'h',
        },
        got={
            0x6000: ('puts', None, False, 2, False, None),
            0x6008: ('abort', None, False, 2, False, None),
        },
        effect=(
            'write g',
            'write g',
            'read g',
            'read h',
            'pass g to code not followed as 0',
            'pass h to code not followed as 4',
            'calls external puts',
            'calls external abort',
        )),
    Row('x86_64-store', 'x86_64', 0x1050,
        (
            '4883ec08e8d7ffffff488b15702f00008902e8c9ffffff83c0018905a42f00004883c408c3'
        ),
        (
            'sub rsp, 8 ; sets rsp',
            'call 0x1030 ; call 0x1030',
            'mov rdx, qword ptr [rip + 0x2f70] ; sets rdx',
            'mov dword ptr [rdx], eax',
            'call 0x1030 ; call 0x1030',
            'add eax, 1 ; sets rax',
            'mov dword ptr [rip + 0x2fa4], eax',
            'add rsp, 8 ; sets rsp',
            'ret',
        ),
        data={
            0x4014: 'hidden_value',
        },
        got={
            0x3fd0: ('exported', None, True, 1, False, 16408),
        },
        plt={
            0x1030: ('_Z7computev', None, False, 0, False, None),
        },
        functions={
            0x1030: None,
        },
        effect=(
            'address exported',
            'write exported',
            'write hidden_value',
            'calls external _Z7computev',
        )),
    Row('x86_64-string', 'x86_64', 0x1050,
        (
            '488b35712f0000488b3d622f0000488d15a32f0000488d461048c74608010000004889060fb70585'
            '0f000066894610e9acffffff'
        ),
        (
            'mov rsi, qword ptr [rip + 0x2f71] ; sets rsi',
            'mov rdi, qword ptr [rip + 0x2f62] ; sets rdi',
            'lea rdx, [rip + 0x2fa3] ; sets rdx',
            'lea rax, [rsi + 0x10] ; sets rax',
            'mov qword ptr [rsi + 8], 1',
            'mov qword ptr [rsi], rax',
            'movzx eax, word ptr [rip + 0xf85] ; sets rax',
            'mov word ptr [rsi + 0x10], ax',
            'jmp 0x1030 ; jump 0x1030',
        ),
        data={
            0x2000: None,
        },
        got={
            0x3fc8: ('_Z1sB5cxx11', None, True, 1, False, 16448),
            0x3fc0: (
                '_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev',
                None,
                False,
                2,
                False,
                None,
            ),
        },
        plt={
            0x1030: ('__cxa_atexit', None, False, 2, False, None),
        },
        functions={
            0x1030: None,
        },
        effect=(
            'address _Z1sB5cxx11',
            'write _Z1sB5cxx11',
            'write _Z1sB5cxx11',
            'write _Z1sB5cxx11',
            'atexit _Z1sB5cxx11 _ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev',
            'calls external __cxa_atexit',
        )),
    Row('x86_64-iostream', 'x86_64', 0x1070,
        (
            '53488d1da92f00004889dfe8d0ffffff488b3d592f00004889de5b488d15862f0000e999ffffff'
        ),
        (
            'push rbx',
            'lea rbx, [rip + 0x2fa9] ; sets rbx',
            'mov rdi, rbx ; sets rdi',
            'call 0x1050 ; call 0x1050',
            'mov rdi, qword ptr [rip + 0x2f59] ; sets rdi',
            'mov rsi, rbx ; sets rsi',
            'pop rbx ; sets rbx',
            'lea rdx, [rip + 0x2f86] ; sets rdx',
            'jmp 0x1030 ; jump 0x1030',
        ),
        data={
            0x4021: '_ZStL8__ioinit',
        },
        got={
            0x3fe0: ('_ZNSt8ios_base4InitD1Ev', None, False, 2, False, None),
        },
        plt={
            0x1050: ('_ZNSt8ios_base4InitC1Ev', None, False, 2, False, None),
            0x1030: ('__cxa_atexit', None, False, 2, False, None),
        },
        functions={
            0x1050: None,
            0x1030: None,
        },
        effect=(
            'write _ZStL8__ioinit',
            'atexit _ZStL8__ioinit _ZNSt8ios_base4InitD1Ev',
            'calls external _ZNSt8ios_base4InitC1Ev',
            'calls external __cxa_atexit',
            'constructs ios_base::Init',
        )),
    Row('x86_64-guard', 'x86_64', 0x10a0,
        (
            '55534883ec08488b1d332f00000fb60384c0741a488b2d1d2f00008b5500488b050b2f0000891048'
            '83c4085b5dc34889dfe85affffff85c074dae881ffffff488b2df22e00004889df894500e84fffff'
            'ffebc84889c5e995ffffff'
        ),
        (
            'push rbp',
            'push rbx',
            'sub rsp, 8 ; sets rsp',
            'mov rbx, qword ptr [rip + 0x2f33] ; sets rbx',
            'movzx eax, byte ptr [rbx] ; sets rax',
            'test al, al',
            'je 0x10ce',
            'mov rbp, qword ptr [rip + 0x2f1d] ; sets rbp',
            'mov edx, dword ptr [rbp] ; sets rdx',
            'mov rax, qword ptr [rip + 0x2f0b] ; sets rax',
            'mov dword ptr [rax], edx',
            'add rsp, 8 ; sets rsp',
            'pop rbx ; sets rbx',
            'pop rbp ; sets rbp',
            'ret',
            'mov rdi, rbx ; sets rdi',
            'call 0x1030 ; call 0x1030',
            'test eax, eax',
            'je 0x10b4',
            'call 0x1060 ; call 0x1060',
            'mov rbp, qword ptr [rip + 0x2ef2] ; sets rbp',
            'mov rdi, rbx ; sets rdi',
            'mov dword ptr [rbp], eax',
            'call 0x1040 ; call 0x1040',
            'jmp 0x10bb ; jump 0x10bb',
            'mov rbp, rax ; sets rbp',
            'jmp 0x1090 ; jump 0x1090',
        ),
        got={
            0x3fe0: ('_ZGVZ8instancevE5value', None, True, 1, False, 16448),
            0x3fd8: ('_ZZ8instancevE5value', None, True, 1, False, 16456),
            0x3fd0: ('first', None, True, 1, False, 16444),
        },
        plt={
            0x1030: ('__cxa_guard_acquire', None, False, 2, False, None),
            0x1060: ('_Z7computev', None, False, 0, False, None),
            0x1040: ('__cxa_guard_release', None, False, 2, False, None),
            0x1090: None,
            0x1050: ('__cxa_guard_abort', None, False, 2, False, None),
            0x1070: ('_Unwind_Resume', None, False, 2, False, None),
        },
        functions={
            0x1030: None,
            0x1060: None,
            0x1040: None,
            0x1090: ('_GLOBAL__sub_I_guard.cpp.cold', 16),
            0x1050: None,
            0x1070: None,
        },
        # _GLOBAL__sub_I_guard.cpp.cold: mov rdi, rbx; call __cxa_guard_abort;
        # mov rdi, rbp; call _Unwind_Resume.
        tails={0x1090: '4889dfe8b8ffffff4889efe8d0ffffff'},
        effect=(
            'address _ZGVZ8instancevE5value',
            'read _ZGVZ8instancevE5value',
            'guard variable _ZGVZ8instancevE5value',
            'guard taken',
            'pass _ZGVZ8instancevE5value to code not followed as 0',
            'address _ZZ8instancevE5value',
            'write _ZZ8instancevE5value',
            'guard given back',
            'pass _ZGVZ8instancevE5value to code not followed as 0',
            'address _ZZ8instancevE5value',
            'read _ZZ8instancevE5value',
            'address first',
            'write first',
            'read _ZZ8instancevE5value',
            'address first',
            'write first',
            'calls external __cxa_guard_acquire',
            'calls external _Z7computev',
            'calls external __cxa_guard_release',
        )),
    Row('x86_64-atexit', 'x86_64', 0x1050,
        (
            '4883ec08488d3dd5000000e8e0000000488b15592f000089024883c408c3'
        ),
        (
            'sub rsp, 8 ; sets rsp',
            'lea rdi, [rip + 0xd5] ; sets rdi',
            'call 0x1140 ; call 0x1140',
            'mov rdx, qword ptr [rip + 0x2f59] ; sets rdx',
            'mov dword ptr [rdx], eax',
            'add rsp, 8 ; sets rsp',
            'ret',
        ),
        got={
            0x3fc0: ('registered', None, True, 1, False, 16404),
        },
        functions={
            0x1140: ('atexit', 14),
            0x1130: ('_ZL3byev', 1),
        },
        effect=(
            'atexit None _ZL3byev',
            'address registered',
            'write registered',
            'calls atexit',
        )),
    Row('x86_64-indirect', 'x86_64', 0x1040,
        (
            '4883ec08488b058d2f0000488b00ffd0488b15612f000089024883c408c3'
        ),
        (
            'sub rsp, 8 ; sets rsp',
            'mov rax, qword ptr [rip + 0x2f8d] ; sets rax',
            'mov rax, qword ptr [rax] ; sets rax',
            'call rax ; call ?',
            'mov rdx, qword ptr [rip + 0x2f61] ; sets rdx',
            'mov dword ptr [rdx], eax',
            'add rsp, 8 ; sets rsp',
            'ret',
        ),
        got={
            0x3fd8: ('hook', None, False, 0, False, None),
            0x3fb8: ('hooked', None, True, 1, False, 16396),
        },
        effect=(
            'address hook',
            'read hook',
            'not followed from here: indirect call',
            'address hooked',
            'write hooked',
            'stopped: indirect call',
        )),
    Row('x86_64-tls', 'x86_64', 0x1050,
        (
            '4883ec0866488d3d442f0000666648e8ccffffff488b156d2f00008b0083c0018902488b05372f00'
            '00488b15502f0000648b0083c00289024883c408c3'
        ),
        (
            'sub rsp, 8 ; sets rsp',
            'lea rdi, [rip + 0x2f44] ; sets rdi',
            'call 0x1030 ; call 0x1030',
            'mov rdx, qword ptr [rip + 0x2f6d] ; sets rdx',
            'mov eax, dword ptr [rax] ; sets rax',
            'add eax, 1 ; sets rax',
            'mov dword ptr [rdx], eax',
            'mov rax, qword ptr [rip + 0x2f37] ; sets rax',
            'mov rdx, qword ptr [rip + 0x2f50] ; sets rdx',
            'mov eax, dword ptr fs:[rax] ; sets rax',
            'add eax, 2 ; sets rax',
            'mov dword ptr [rdx], eax',
            'add rsp, 8 ; sets rsp',
            'ret',
        ),
        data={
            0x3fa0: None,
        },
        got={
            0x3fa0: ('tv', None, False, 6, False, None),
            0x3fd8: ('copy_tv', None, True, 1, False, 16408),
            0x3fb0: ('ie', None, False, 6, False, None),
            0x3fd0: ('copy_ie', None, True, 1, False, 16404),
        },
        plt={
            0x1030: ('__tls_get_addr', None, False, 2, False, None),
        },
        functions={
            0x1030: None,
        },
        effect=(
            'read tv',
            'address copy_tv',
            'write copy_tv',
            'address ie',
            'address copy_ie',
            'read ie',
            'write copy_ie',
            'calls external __tls_get_addr',
        )),
    Row('x86_64-switch', 'x86_64', 0x10d0,
        (
            '4883ec08488b05f52e00008b0083f8070f87daffffff488d15130f0000486304824801d0ffe0e875'
            'ffffffba4c000000488b05b92e000089104883c408c3e88dffffffba57000000ebe6e871ffffffba'
            '0a000000ebdae825ffffffba15000000ebcee829ffffffba20000000ebc2e8fdfeffffba2b000000'
            'ebb6e8e1feffffba36000000ebaae825ffffffba41000000eb9e'
        ),
        (
            'sub rsp, 8 ; sets rsp',
            'mov rax, qword ptr [rip + 0x2ef5] ; sets rax',
            'mov eax, dword ptr [rax] ; sets rax',
            'cmp eax, 7',
            'ja 0x10c0',
            'lea rdx, [rip + 0xf13] ; sets rdx',
            'movsxd rax, dword ptr [rdx + rax*4] ; sets rax',
            'add rax, rdx ; sets rax',
            'jmp rax ; jump ?',
            'call 0x1070 ; call 0x1070',
            'mov edx, 0x4c ; sets rdx',
            'mov rax, qword ptr [rip + 0x2eb9] ; sets rax',
            'mov dword ptr [rax], edx',
            'add rsp, 8 ; sets rsp',
            'ret',
            'call 0x10a0 ; call 0x10a0',
            'mov edx, 0x57 ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1090 ; call 0x1090',
            'mov edx, 0xa ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1050 ; call 0x1050',
            'mov edx, 0x15 ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1060 ; call 0x1060',
            'mov edx, 0x20 ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1040 ; call 0x1040',
            'mov edx, 0x2b ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1030 ; call 0x1030',
            'mov edx, 0x36 ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
            'call 0x1080 ; call 0x1080',
            'mov edx, 0x41 ; sets rdx',
            'jmp 0x1100 ; jump 0x1100',
        ),
        data={
            0x2000: None,
        },
        got={
            0x3fd0: ('selector', None, False, 0, False, None),
            0x3fc0: ('picked', None, True, 1, False, 16460),
        },
        plt={
            0x1070: ('_Z2f6v', None, False, 0, False, None),
            0x10a0: ('_Z2f7v', None, False, 0, False, None),
            0x1090: ('_Z2f0v', None, False, 0, False, None),
            0x1050: ('_Z2f1v', None, False, 0, False, None),
            0x1060: ('_Z2f2v', None, False, 0, False, None),
            0x1040: ('_Z2f3v', None, False, 0, False, None),
            0x1030: ('_Z2f4v', None, False, 0, False, None),
            0x1080: ('_Z2f5v', None, False, 0, False, None),
        },
        functions={
            0x1070: None,
            0x10a0: None,
            0x1090: None,
            0x1050: None,
            0x1060: None,
            0x1040: None,
            0x1030: None,
            0x1080: None,
        },
        tables={
            0x2000: '1af1ffff26f1ffff32f1ffff3ef1ffff4af1ffff56f1fffff6f0ffff0ef1ffff011b033b',
        },
        effect=(
            'address selector',
            'read selector',
            'address picked',
            'write picked',
            'address picked',
            'write picked',
            'calls external _Z2f6v',
            'calls external _Z2f7v',
            'calls external _Z2f0v',
            'calls external _Z2f1v',
            'calls external _Z2f2v',
            'calls external _Z2f3v',
            'calls external _Z2f4v',
            'calls external _Z2f5v',
        )),
    Row('aarch64-store', 'aarch64', 0x500,
        (
            'fd7bbfa9fd030091f2ffff97e10000f021e847f9200000b9eeffff970101009000040011fd7bc1a8'
            '202400b9c0035fd6'
        ),
        (
            'stp x29, x30, [sp, #-0x10]!',
            'mov x29, sp ; sets x29',
            'bl #0x4d0 ; call 0x4d0',
            'adrp x1, #0x1f000 ; sets x1',
            'ldr x1, [x1, #0xfd0] ; sets x1',
            'str w0, [x1]',
            'bl #0x4d0 ; call 0x4d0',
            'adrp x1, #0x20000 ; sets x1',
            'add w0, w0, #1 ; sets x0',
            'ldp x29, x30, [sp], #0x10 ; sets x29,x30',
            'str w0, [x1, #0x24]',
            'ret',
        ),
        data={
            0x20024: 'hidden_value',
        },
        got={
            0x1ffd0: ('exported', None, True, 1, False, 131112),
        },
        plt={
            0x4d0: ('_Z7computev', None, False, 0, False, None),
        },
        functions={
            0x4d0: None,
        },
        effect=(
            'address exported',
            'write exported',
            'write hidden_value',
            'calls external _Z7computev',
        )),
    Row('aarch64-string', 'aarch64', 0x5f0,
        (
            'e10000f021e447f9240080d2e00000f000e047f925400091030f80520201009042600091251000a9'
            '23200079edffff17'
        ),
        (
            'adrp x1, #0x1f000 ; sets x1',
            'ldr x1, [x1, #0xfc8] ; sets x1',
            'mov x4, #1 ; sets x4',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfc0] ; sets x0',
            'add x5, x1, #0x10 ; sets x5',
            'mov w3, #0x78 ; sets x3',
            'adrp x2, #0x20000 ; sets x2',
            'add x2, x2, #0x18 ; sets x2',
            'stp x5, x4, [x1]',
            'strh w3, [x1, #0x10]',
            'b #0x5d0 ; jump 0x5d0',
        ),
        got={
            0x1ffc8: ('_Z1sB5cxx11', None, True, 1, False, 131112),
            0x1ffc0: (
                '_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev',
                None,
                False,
                2,
                False,
                None,
            ),
        },
        plt={
            0x5d0: ('__cxa_atexit', None, False, 2, False, None),
        },
        functions={
            0x5d0: None,
        },
        effect=(
            'address _Z1sB5cxx11',
            'write _Z1sB5cxx11',
            'write _Z1sB5cxx11',
            'atexit _Z1sB5cxx11 _ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev',
            'calls external __cxa_atexit',
        )),
    Row('aarch64-iostream', 'aarch64', 0x6f0,
        (
            'fd7bbea9fd030091f30b00f91301009073e20091e00313aaf2ffff97e10313aa02010090f30b40f9'
            '42a00091fd7bc2a8e00000f000f047f9e2ffff17'
        ),
        (
            'stp x29, x30, [sp, #-0x20]!',
            'mov x29, sp ; sets x29',
            'str x19, [sp, #0x10]',
            'adrp x19, #0x20000 ; sets x19',
            'add x19, x19, #0x38 ; sets x19',
            'mov x0, x19 ; sets x0',
            'bl #0x6d0 ; call 0x6d0',
            'mov x1, x19 ; sets x1',
            'adrp x2, #0x20000 ; sets x2',
            'ldr x19, [sp, #0x10] ; sets x19',
            'add x2, x2, #0x28 ; sets x2',
            'ldp x29, x30, [sp], #0x20 ; sets x29,x30',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfe0] ; sets x0',
            'b #0x6b0 ; jump 0x6b0',
        ),
        data={
            0x20038: '_ZStL8__ioinit',
        },
        got={
            0x1ffe0: ('_ZNSt8ios_base4InitD1Ev', None, False, 2, False, None),
        },
        plt={
            0x6d0: ('_ZNSt8ios_base4InitC1Ev', None, False, 2, False, None),
            0x6b0: ('__cxa_atexit', None, False, 2, False, None),
        },
        functions={
            0x6d0: None,
            0x6b0: None,
        },
        effect=(
            'write _ZStL8__ioinit',
            'atexit _ZStL8__ioinit _ZNSt8ios_base4InitD1Ev',
            'calls external _ZNSt8ios_base4InitC1Ev',
            'calls external __cxa_atexit',
            'constructs ios_base::Init',
        )),
    Row('aarch64-guard', 'aarch64', 0x7d0,
        (
            'fd7bbea9fd030091e00000f000f047f9f30b00f901fcdfc841010036f30000f073ee47f9e00000f0'
            '00e847f9610240b9f30b40f9010000b9fd7bc2a8c0035fd6d0ffff97c0feff34e6ffff97e103002a'
            'f30000f073ee47f9e00000f000f047f9610200b9d3ffff97efffff17f30300aae00000f000f047f9'
            'd2ffff97e00313aadcffff97'
        ),
        (
            'stp x29, x30, [sp, #-0x20]!',
            'mov x29, sp ; sets x29',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfe0] ; sets x0',
            'str x19, [sp, #0x10]',
            'ldar x1, [x0] ; sets x1',
            'tbz w1, #0, #0x810',
            'adrp x19, #0x1f000 ; sets x19',
            'ldr x19, [x19, #0xfd8] ; sets x19',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfd0] ; sets x0',
            'ldr w1, [x19] ; sets x1',
            'ldr x19, [sp, #0x10] ; sets x19',
            'str w1, [x0]',
            'ldp x29, x30, [sp], #0x20 ; sets x29,x30',
            'ret',
            'bl #0x750 ; call 0x750',
            'cbz w0, #0x7ec',
            'bl #0x7b0 ; call 0x7b0',
            'mov w1, w0 ; sets x1',
            'adrp x19, #0x1f000 ; sets x19',
            'ldr x19, [x19, #0xfd8] ; sets x19',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfe0] ; sets x0',
            'str w1, [x19]',
            'bl #0x780 ; call 0x780',
            'b #0x7f4 ; jump 0x7f4',
            'mov x19, x0 ; sets x19',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfe0] ; sets x0',
            'bl #0x790 ; call 0x790',
            'mov x0, x19 ; sets x0',
            'bl #0x7c0 ; call 0x7c0',
        ),
        got={
            0x1ffe0: ('_ZGVZ8instancevE5value', None, True, 1, False, 131160),
            0x1ffd8: ('_ZZ8instancevE5value', None, True, 1, False, 131168),
            0x1ffd0: ('first', None, True, 1, False, 131156),
        },
        plt={
            0x750: ('__cxa_guard_acquire', None, False, 2, False, None),
            0x7b0: ('_Z7computev', None, False, 0, False, None),
            0x780: ('__cxa_guard_release', None, False, 2, False, None),
            0x790: ('__cxa_guard_abort', None, False, 2, False, None),
            0x7c0: ('_Unwind_Resume', None, False, 2, False, None),
        },
        functions={
            0x750: None,
            0x7b0: None,
            0x780: None,
            0x790: None,
            0x7c0: None,
        },
        effect=(
            'address _ZGVZ8instancevE5value',
            'read _ZGVZ8instancevE5value',
            'guard variable _ZGVZ8instancevE5value',
            'guard taken',
            'pass _ZGVZ8instancevE5value to code not followed as 0',
            'address _ZZ8instancevE5value',
            'address _ZGVZ8instancevE5value',
            'write _ZZ8instancevE5value',
            'guard given back',
            'pass _ZGVZ8instancevE5value to code not followed as 0',
            'address _ZZ8instancevE5value',
            'address first',
            'read _ZZ8instancevE5value',
            'write first',
            'guard given back',
            'address first',
            'read _ZZ8instancevE5value',
            'write first',
            'calls external __cxa_guard_acquire',
            'calls external _Z7computev',
            'calls external __cxa_guard_release',
            'calls external __cxa_guard_abort',
            'calls external _Unwind_Resume',
        )),
    Row('aarch64-atexit', 'aarch64', 0x540,
        (
            'fd7bbfa90000009000401991fd03009144000094e10000f021e047f9200000b9fd7bc1a8c0035fd6'
        ),
        (
            'stp x29, x30, [sp, #-0x10]!',
            'adrp x0, #0 ; sets x0',
            'add x0, x0, #0x650 ; sets x0',
            'mov x29, sp ; sets x29',
            'bl #0x660 ; call 0x660',
            'adrp x1, #0x1f000 ; sets x1',
            'ldr x1, [x1, #0xfc0] ; sets x1',
            'str w0, [x1]',
            'ldp x29, x30, [sp], #0x10 ; sets x29,x30',
            'ret',
        ),
        got={
            0x1ffc0: ('registered', None, True, 1, False, 131108),
        },
        functions={
            0x660: ('atexit', 16),
            0x650: ('_ZL3byev', 4),
        },
        effect=(
            'atexit None _ZL3byev',
            'address registered',
            'write registered',
            'calls atexit',
        )),
    Row('aarch64-indirect', 'aarch64', 0x4e0,
        (
            'e00000f000ec47f9fd7bbfa9fd030091000040f900003fd6e10000f021dc47f9200000b9fd7bc1a8'
            'c0035fd6'
        ),
        (
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfd8] ; sets x0',
            'stp x29, x30, [sp, #-0x10]!',
            'mov x29, sp ; sets x29',
            'ldr x0, [x0] ; sets x0',
            'blr x0 ; call ?',
            'adrp x1, #0x1f000 ; sets x1',
            'ldr x1, [x1, #0xfb8] ; sets x1',
            'str w0, [x1]',
            'ldp x29, x30, [sp], #0x10 ; sets x29,x30',
            'ret',
        ),
        got={
            0x1ffd8: ('hook', None, False, 0, False, None),
            0x1ffb8: ('hooked', None, True, 1, False, 131100),
        },
        effect=(
            'address hook',
            'read hook',
            'not followed from here: indirect call',
            'address hooked',
            'write hooked',
            'stopped: indirect call',
        )),
    Row('aarch64-tls', 'aarch64', 0x560,
        (
            'fd7bbfa941d03bd5e20000f042d447f9fd03009100010090030840f90040009160003fd6e40000f0'
            '84e447f9e30000f063e847f9226862b8206860b842080011820000b900040011600000b9fd7bc1a8'
            'c0035fd6'
        ),
        (
            'stp x29, x30, [sp, #-0x10]!',
            'mrs x1, tpidr_el0 ; sets x1',
            'adrp x2, #0x1f000 ; sets x2',
            'ldr x2, [x2, #0xfa8] ; sets x2',
            'mov x29, sp ; sets x29',
            'adrp x0, #0x20000 ; sets x0',
            'ldr x3, [x0, #0x10] ; sets x3',
            'add x0, x0, #0x10 ; sets x0',
            'blr x3 ; call ?',
            'adrp x4, #0x1f000 ; sets x4',
            'ldr x4, [x4, #0xfc8] ; sets x4',
            'adrp x3, #0x1f000 ; sets x3',
            'ldr x3, [x3, #0xfd0] ; sets x3',
            'ldr w2, [x1, x2] ; sets x2',
            'ldr w0, [x1, x0] ; sets x0',
            'add w2, w2, #2 ; sets x2',
            'str w2, [x4]',
            'add w0, w0, #1 ; sets x0',
            'str w0, [x3]',
            'ldp x29, x30, [sp], #0x10 ; sets x29,x30',
            'ret',
        ),
        got={
            0x1ffa8: ('ie', None, False, 6, False, None),
            0x20010: ('tv', None, False, 6, False, None),
            0x1ffc8: ('copy_ie', None, True, 1, False, 131116),
            0x1ffd0: ('copy_tv', None, True, 1, False, 131120),
        },
        effect=(
            'address ie',
            'address tv',
            'read tv',
            'address copy_ie',
            'address copy_tv',
            'write copy_ie',
            'write copy_tv',
        )),
    Row('aarch64-switch', 'aarch64', 0x720,
        (
            'e00000f000e847f9fd7bbfa9fd030091000040b91f100071000500548c0100541f08007180030054'
            '1f0c007181020054d0ffff9761058052e00000f000e047f9010000b9fd7bc1a8c0035fd61f180071'
            '800200541f1c007181000054e1ffff97e10a8052f5ffff171f140071c1020054d4ffff9721088052'
            'f0ffff17800100341f04007101020054c2ffff97a1028052eaffff17c3ffff9701048052e7ffff17'
            'c4ffff9781098052e4ffff17c9ffff9741018052e1ffff17aaffff97c1068052deffff1701008052'
            'dcffff17'
        ),
        (
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfd0] ; sets x0',
            'stp x29, x30, [sp, #-0x10]!',
            'mov x29, sp ; sets x29',
            'ldr w0, [x0] ; sets x0',
            'cmp w0, #4',
            'b.eq #0x7d8',
            'b.gt #0x76c',
            'cmp w0, #2',
            'b.eq #0x7b4',
            'cmp w0, #3',
            'b.ne #0x79c',
            'bl #0x690 ; call 0x690',
            'mov w1, #0x2b ; sets x1',
            'adrp x0, #0x1f000 ; sets x0',
            'ldr x0, [x0, #0xfc0] ; sets x0',
            'str w1, [x0]',
            'ldp x29, x30, [sp], #0x10 ; sets x29,x30',
            'ret',
            'cmp w0, #6',
            'b.eq #0x7c0',
            'cmp w0, #7',
            'b.ne #0x788',
            'bl #0x700 ; call 0x700',
            'mov w1, #0x57 ; sets x1',
            'b #0x758 ; jump 0x758',
            'cmp w0, #5',
            'b.ne #0x7e4',
            'bl #0x6e0 ; call 0x6e0',
            'mov w1, #0x41 ; sets x1',
            'b #0x758 ; jump 0x758',
            'cbz w0, #0x7cc',
            'cmp w0, #1',
            'b.ne #0x7e4',
            'bl #0x6b0 ; call 0x6b0',
            'mov w1, #0x15 ; sets x1',
            'b #0x758 ; jump 0x758',
            'bl #0x6c0 ; call 0x6c0',
            'mov w1, #0x20 ; sets x1',
            'b #0x758 ; jump 0x758',
            'bl #0x6d0 ; call 0x6d0',
            'mov w1, #0x4c ; sets x1',
            'b #0x758 ; jump 0x758',
            'bl #0x6f0 ; call 0x6f0',
            'mov w1, #0xa ; sets x1',
            'b #0x758 ; jump 0x758',
            'bl #0x680 ; call 0x680',
            'mov w1, #0x36 ; sets x1',
            'b #0x758 ; jump 0x758',
            'mov w1, #0 ; sets x1',
            'b #0x758 ; jump 0x758',
        ),
        got={
            0x1ffd0: ('selector', None, False, 0, False, None),
            0x1ffc0: ('picked', None, True, 1, False, 131164),
        },
        plt={
            0x690: ('_Z2f3v', None, False, 0, False, None),
            0x700: ('_Z2f7v', None, False, 0, False, None),
            0x6e0: ('_Z2f5v', None, False, 0, False, None),
            0x6b0: ('_Z2f1v', None, False, 0, False, None),
            0x6c0: ('_Z2f2v', None, False, 0, False, None),
            0x6d0: ('_Z2f6v', None, False, 0, False, None),
            0x6f0: ('_Z2f0v', None, False, 0, False, None),
            0x680: ('_Z2f4v', None, False, 0, False, None),
        },
        functions={
            0x690: None,
            0x700: None,
            0x6e0: None,
            0x6b0: None,
            0x6c0: None,
            0x6d0: None,
            0x6f0: None,
            0x680: None,
        },
        effect=(
            'address selector',
            'read selector',
            'address picked',
            'write picked',
            'address picked',
            'write picked',
            'calls external _Z2f3v',
            'calls external _Z2f7v',
            'calls external _Z2f5v',
            'calls external _Z2f1v',
            'calls external _Z2f2v',
            'calls external _Z2f6v',
            'calls external _Z2f0v',
            'calls external _Z2f4v',
        )),
)


@pytest.mark.parametrize("row", CORPUS, ids=lambda row: row.name)
def test_decode_is_pinned(row: Row) -> None:
    """capstone decodes the corpus's bytes exactly as when the walkers were validated."""
    assert decode_lines(row.machine, row.start, bytes.fromhex(row.code)) == row.decode


@pytest.mark.parametrize("row", CORPUS, ids=lambda row: row.name)
def test_walker_reading_is_pinned(row: Row) -> None:
    """The walker derives the same events from the same decode and the same answers."""
    assert rendered(replay(row)) == row.effect


# -- the snippets compiled here, now ---------------------------------------------------------
STRING_DTOR = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"
EXPECTED: dict[str, dict[str, Any]] = {
    "store": {"writes": {"exported", "hidden_value"}, "external_calls": {"_Z7computev"}},
    "string": {"writes": {"_Z1sB5cxx11"}, "atexit": {("_Z1sB5cxx11", STRING_DTOR)}},
    "iostream": {"ios_init": True,
                 "atexit": {("_ZStL8__ioinit", "_ZNSt8ios_base4InitD1Ev")}},
    "guard": {"writes": {"first"},
              "external_calls": {"__cxa_guard_acquire", "__cxa_guard_release", "_Z7computev"}},
    "atexit": {"writes": {"registered"}, "atexit": {(None, "_ZL3byev")}},
    "indirect": {"writes": {"hooked"}, "reads": {"hook"}, "complete": False},
    "tls": {"writes": {"copy_tv", "copy_ie"}, "reads": {"tv", "ie"}},
    # aarch64's initial-exec load, ldr w2, [x1, x2] with x1 = tpidr_el0 and x2 the
    # variable's offset from its GOT slot, is not read as a read of ie (yet).
    "aarch64-tls": {"writes": {"copy_tv", "copy_ie"}, "reads": {"tv"}},
    "switch": {"writes": {"picked"}, "reads": {"selector"}, "complete": True,
               "external_calls": {f"_Z2f{n}v" for n in range(8)}},
}


def toolchain(machine: str) -> Any:
    from elfpatch.fixtures import build

    found = build.host_toolchain() if machine == "x86_64" else build.cross_toolchain(machine)
    if found is None or not found.available():
        package = "g++" if machine == "x86_64" else "g++-aarch64-linux-gnu"
        pytest.skip(f"{COMPILERS[machine]} is not installed (apt-get install {package})")
    return found


def compiled(machine: str, snippet: str) -> tuple[Path, int, int]:
    """The snippet built as a shared library: its path, and its initializer's address
    and size."""
    from elfpatch.fixtures import build
    from elftools.elf.elffile import ELFFile

    path = build.build_shared({f"{snippet}.cpp": SNIPPETS[snippet]}, f"corpus_{snippet}",
                              FLAGS, toolchain=toolchain(machine))
    with path.open("rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        (found,) = [(s["st_value"], s["st_size"]) for s in symbols.iter_symbols()
                    if s.name.startswith("_GLOBAL__sub_I_") and not s.name.endswith(".cold")]
    return path, *found


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("snippet", SNIPPETS)
def test_compiled_snippet(machine: str, snippet: str) -> None:
    """The snippet as g++ compiles it today: the effects its source says it has."""
    from elfpatch.analysis.effects import initializer_effects
    from elfpatch.elf.file import ElfFile

    path, address, _size = compiled(machine, snippet)
    with ElfFile.open(str(path)) as elf:
        effects = initializer_effects(elf, address)
    wanted = EXPECTED.get(f"{machine}-{snippet}", EXPECTED[snippet])
    assert wanted.get("writes", set()) <= set(effects.writes)
    assert wanted.get("reads", set()) <= set(effects.reads)
    assert wanted.get("external_calls", set()) <= set(effects.external_calls)
    assert wanted.get("atexit", set()) <= {(a.object, a.destructor) for a in effects.atexit}
    assert effects.constructs_ios_init == wanted.get("ios_init", False)
    if "complete" in wanted:
        assert effects.complete == wanted["complete"]


# -- recording the corpus afresh -----------------------------------------------------------
class RecordingIndex:
    """A real ``AddressIndex`` whose answers about addresses are written down."""

    has_local_symbols = knows_functions = True

    def __init__(self, index: Any, start: int, size: int) -> None:
        self.index, self.start, self.size = index, start, size
        self.data: dict[int, str | None] = {}
        self.got: dict[int, tuple | None] = {}
        self.plt: dict[int, tuple | None] = {}
        self.functions: dict[int, tuple[str | None, int] | None] = {}
        self.tails: dict[int, str] = {}

    def prepare(self) -> None:
        self.index.prepare()

    def data_symbol(self, address: int) -> str | None:
        found = self.data[address] = self.index.data_symbol(address)
        return found

    def data_key(self, address: int, anchor: bool = False) -> str | None:
        return self.data_symbol(address)

    def got_entry(self, slot: int) -> GotEntry | None:
        found = self.index.got_entry(slot)
        self.got[slot] = _fields(found)
        return found

    def plt_entry(self, stub: int) -> GotEntry | None:
        found = self.index.plt_entry(stub)
        self.plt[stub] = _fields(found)
        return found

    def function_at(self, address: int) -> tuple[str | None, int] | None:
        found = self.index.function_at(address)
        if address != self.start:
            self.functions[address] = found
        return found

    def code_at(self, address: int, limit: int) -> memoryview | None:
        found = self.index.code_at(address, limit)
        if found is not None and not self.start <= address < self.start + self.size:
            self.tails[address] = bytes(found).hex()
        return found

    # What the rows do not pin, answered as the replay answers (``ReplayIndex``).
    def constant_key(self, address: int) -> str | None:
        return None

    def read_only_data(self, address: int) -> bool:
        return False

    def zero_initialized(self, address: int) -> bool:
        return False


class RecordingElf:
    """A real ``ElfFile`` whose jump tables read are written down."""

    def __init__(self, elf: Any, start: int, size: int) -> None:
        self.elf, self.start, self.end = elf, start, start + size
        self.tables: dict[int, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.elf, name)

    def vaddr_to_offset(self, vaddr: int, what: str) -> int:
        """The table's entries while they lead into the function, and the first that
        does not (where the walker stops)."""
        offset = self.elf.vaddr_to_offset(vaddr, what)
        entries = b""
        while offset + len(entries) + 4 <= self.elf.size:
            entry = bytes(self.elf.view[offset + len(entries) : offset + len(entries) + 4])
            entries += entry
            if not self.start <= vaddr + int.from_bytes(entry, "little", signed=True) < self.end:
                break
        self.tables[vaddr] = entries.hex()
        return offset


def _fields(entry: GotEntry | None) -> tuple | None:
    if entry is None:
        return None
    return (entry.symbol, entry.address, entry.defined, entry.symbol_type,
            entry.weak_undefined, entry.definition)


def record(machine: str, snippet: str) -> Row:
    """The row of one compiled snippet's initializer, as the walker reads it today."""
    from elfpatch.elf.file import ElfFile

    path, start, size = compiled(machine, snippet)
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        analyzer.index.prepare()
        code = bytes(analyzer.index.code_at(start, size) or b"")
        index = RecordingIndex(analyzer.index, start, size)
        recording = RecordingElf(elf, start, size)
        replaying = CorpusAnalyzer(recording, index)
        summary = replaying.summary(start)
        return Row(f"{machine}-{snippet}", machine, start, code.hex(),
                   decode_lines(machine, start, code), index.data, index.got, index.plt,
                   index.functions, recording.tables, rendered(summary), index.tails)


def source_of(row: Row) -> str:
    """A row as Python source, for ``CORPUS``."""
    code = "\n".join(f"            {row.code[i : i + 80]!r}"
                     for i in range(0, len(row.code), 80))
    decode = "".join(f"\n            {line!r}," for line in row.decode)
    effect = "".join(f"\n            {line!r}," for line in row.effect)
    answers = "".join(f"\n        {name}={_mapping(getattr(row, name))},"
                      for name in ("data", "got", "plt", "functions", "tables")
                      if getattr(row, name))
    tails = f",\n        tails={_mapping(row.tails)}" if row.tails else ""
    return (f"    Row({row.name!r}, {row.machine!r}, {row.start:#x},\n        (\n{code}\n"
            f"        ),\n        ({decode}\n        ),{answers}\n"
            f"        effect=({effect}\n        ){tails}),\n")


def _mapping(mapping: dict[int, Any]) -> str:
    """A dict with hexadecimal keys, one entry a line, long values split by field."""
    lines = []
    for key, value in mapping.items():
        line = f"            {key:#x}: {value!r},"
        if len(line) > 100 and isinstance(value, tuple):
            fields = "".join(f"\n                {item!r}," for item in value)
            line = f"            {key:#x}: ({fields}\n            ),"
        lines.append(line)
    return "{\n" + "\n".join(lines) + "\n        }"


# Forms g++ did not emit above, assembled with gas at 0x1000: stores of an immediate
# and of a register to a global, read-modify-write, a spill and reload, fs: and
# tpidr_el0, calls and jumps through GOT slots (notrack, bnd), adr, indexed loads.
HAND = {
    "x86_64-hand-stores": ("x86_64", "f30f1efac705f23f00002a00000048893df33f00008305e43f000001"
                                     "f30f1105e43f0000803dd53f000000488d05ce3f0000c74004070000"
                                     "0064488b142500000000488b3db74f0000ff15b14f00003effe0"),
    "x86_64-hand-spill": ("x86_64", "488d35f93f0000488975e8488b7de8488d15f23f0000ff15e44f0000"
                                    "f2ff25e54f0000"),
    # Vector moves: capstone 5 marks the stores (movups, vmovdqu) as reads of memory.
    "x86_64-hand-vector": ("x86_64", "488d35f93f0000660fefc00f1106c5fe7f06f30f7e0dee3f0000c3"),
    # Unlinking a node from a list: when it is the first, a block laid out at the end
    # loads the head's address and jumps back into the shared tail, which stores there.
    "x86_64-hand-tail": ("x86_64", "53488b05f83f00004885c0741b4839f874184889c3488b004885c074"
                                   "0b4839f875f0488b074889035bc3488d1dcf3f0000ebef"),
    "aarch64-hand": ("aarch64", "20000090004000911f0000b9e1008052010400b922000090431040b9"
                                "240002108548613846d03bd5fd7bbea9e00b00f9e00b40f9fd7bc2a8"
                                "300000b0110240f920023fd6300000b0110640f920021fd6"),
}
# Where gas put the globals (each 8 bytes) and the GOT slots of the hand rows.
HAND_DATA = {"x86_64": {0x5000: "g", 0x5008: "h"}, "aarch64": {0x5010: "g", 0x5020: "h"}}
HAND_GOT = {0x6000: ("puts", None, False, 2, False, None),
            0x6008: ("abort", None, False, 2, False, None)}


class HandIndex:
    """The answers about a hand-assembled row's addresses: its globals and GOT slots."""

    def __init__(self, machine: str, start: int, code: bytes) -> None:
        self.data, self.start, self.code = HAND_DATA[machine], start, code

    def prepare(self) -> None:
        pass

    def data_symbol(self, address: int) -> str | None:
        return next((name for at, name in self.data.items() if at <= address < at + 8), None)

    def got_entry(self, slot: int) -> GotEntry | None:
        return GotEntry(*HAND_GOT[slot]) if slot in HAND_GOT else None

    def plt_entry(self, stub: int) -> GotEntry | None:
        return None

    def function_at(self, address: int) -> tuple[str | None, int] | None:
        return ("hand", len(self.code)) if address == self.start else None

    def code_at(self, address: int, limit: int) -> memoryview | None:
        return memoryview(self.code)[address - self.start : address - self.start + limit]


def record_hand(name: str) -> Row:
    machine, text = HAND[name]
    start, code = 0x1000, bytes.fromhex(text)
    index = RecordingIndex(HandIndex(machine, start, code), start, len(code))
    elf = ReplayElf(Row(name, machine, start, text, ()))
    summary = CorpusAnalyzer(elf, index).summary(start)
    return Row(name, machine, start, text, decode_lines(machine, start, code), index.data,
               index.got, index.plt, index.functions, {}, rendered(summary))


def main() -> int:
    rows = [record_hand(name) for name in HAND]
    for machine in MACHINES:
        for snippet in SNIPPETS:
            try:
                rows.append(record(machine, snippet))
            except pytest.skip.Exception as skipped:
                print(f"# {machine} {snippet}: {skipped}", file=sys.stderr)
    print("CORPUS: tuple[Row, ...] = (\n" + "".join(source_of(row) for row in rows) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
