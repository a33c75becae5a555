"""A short ``std::string`` key built in place on the stack.

For a ``const std::string&`` parameter gcc builds a short name on the
caller's stack in libstdc++'s layout: a pointer to its own buffer, 16 bytes
in, the length at 8, the bytes from 16, each stored as a number (on x86-64
immediates; on aarch64 loaded from the literal first).  The call is then
keyed by that text, as a string literal would be.  Only what the stores just
before the call leave is read: a call, a join of two paths, a store through
a pointer that may point to the stack, a move of the stack pointer, or any
instruction but a move, load or store in between (a register's number
computed) and the name is no key.  Where gcc calls libstdc++'s
``_M_construct(place, begin, end)`` instead (many strings in one function), a
call passed a place on the stack and a literal's bounds builds that string:
the next call passed the place is keyed by it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import compile_linked
from support.inits import MACHINES, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile

# Each probe builds "circle" 16 bytes past the stack pointer (then edits it, or not)
# and calls lookup(&name); no argument register holds the literal's address (a call
# passed that is keyed by the literal, as before).
X86_64 = {
    "head": "    .intel_syntax noprefix\n    .text\n",
    "enter": "    sub rsp, 56\n",
    "build": """
    lea rax, [rsp + 32]
    mov qword ptr [rsp + 16], rax
    mov dword ptr [rsp + 32], 0x63726963
    mov eax, 0x656c
    mov word ptr [rsp + 36], ax
    mov qword ptr [rsp + 24], 6
    mov byte ptr [rsp + 38], 0
""",
    # Fifteen bytes: two overlapping eight-byte numbers, the length stored through rbp.
    "long": """
    movabs rax, 0x6867666564636261
    lea rbx, [rsp + 32]
    mov qword ptr [rsp + 32], rax
    movabs rax, 0x6f6e6d6c6b6a6968
    mov qword ptr [rsp + 39], rax
    mov qword ptr [rsp + 16], rbx
    mov rbp, rsp
    mov qword ptr [rbp + 24], 15
    mov byte ptr [rsp + 47], 0
""",
    "construct": """
    lea rdx, [rip + literal + 6]
    lea rsi, [rip + literal]
    lea rdi, [rsp + 16]
    call construct@PLT
""",
    "lookup": "    lea rdi, [rsp + 16]\n    call lookup@PLT\n    add rsp, 56\n    ret\n",
    "type": "@function",
    "data": "    .data\ntable:\n    .quad 0\n    .section .rodata\nliteral:\n"
            "    .ascii \"circle\\0\\0\"\nlong_literal:\n    .ascii \"abcdefghijklmno\\0\"\n",
}
AARCH64 = {
    "head": "    .text\n",
    "enter": "    stp x29, x30, [sp, #-64]!\n    mov x29, sp\n",
    "build": """
    add x2, sp, #32
    str x2, [sp, #16]
    adrp x9, literal
    add x9, x9, :lo12:literal
    ldr w3, [x9]
    ldrh w4, [x9, #4]
    str w3, [sp, #32]
    strh w4, [sp, #36]
    mov x5, #6
    str x5, [sp, #24]
    strb wzr, [sp, #38]
""",
    # Fifteen bytes: two overlapping eight-byte loads, the second stored through x19.
    "long": """
    adrp x9, long_literal
    add x9, x9, :lo12:long_literal
    add x19, sp, #32
    mov x2, #15
    stp x19, x2, [sp, #16]
    ldr x3, [x9]
    ldur x4, [x9, #7]
    str x3, [sp, #32]
    strb wzr, [sp, #47]
    stur x4, [x19, #7]
""",
    "construct": """
    adrp x1, literal
    add x1, x1, :lo12:literal
    add x2, x1, #6
    add x0, sp, #16
    bl construct
""",
    "lookup": "    add x0, sp, #16\n    bl lookup\n    ldp x29, x30, [sp], #64\n    ret\n",
    "type": "%function",
    "data": "    .data\ntable:\n    .quad 0\n    .section .rodata\nliteral:\n"
            "    .ascii \"circle\\0\\0\"\nlong_literal:\n    .ascii \"abcdefghijklmno\\0\"\n",
}
EDITS = {
    "x86_64": {
        "in_place": "",
        "edited": "    mov byte ptr [rsp + 32], 0x78\n",
        "after_a_call": "    call other@PLT\n",
        "through_a_pointer": "    mov rcx, qword ptr [rip + table]\n    mov byte ptr [rcx], 0x78\n",
        "after_a_join": "    test esi, esi\n    je 1f\n    mov byte ptr [rsp + 33], 0x78\n1:\n",
        "length_computed": "    mov eax, 6\n    add eax, 1\n    mov qword ptr [rsp + 24], rax\n",
        "moved_stack": "    push rbx\n    pop rbx\n",
        "long": "",
        "constructed": "",
        "constructed_then_a_call": "    call other@PLT\n",
        "constructed_then_edited": "    mov byte ptr [rsp + 32], 0x78\n",
        "constructed_then_stored_through_a_pointer": "    mov rcx, qword ptr [rip + table]\n"
                                                     "    mov byte ptr [rcx], 0x78\n",
    },
    "aarch64": {
        "in_place": "",
        "edited": "    mov w6, #0x78\n    strb w6, [sp, #32]\n",
        "after_a_call": "    bl other\n",
        "through_a_pointer": "    adrp x6, table\n    ldr x6, [x6, :lo12:table]\n"
                             "    strb wzr, [x6]\n",
        "after_a_join": "    cbz w1, 1f\n    strb wzr, [sp, #33]\n1:\n",
        "length_computed": "    mov x5, #6\n    add x5, x5, #1\n    str x5, [sp, #24]\n",
        "moved_stack": "    sub sp, sp, #16\n    add sp, sp, #16\n",
        "long": "",
        "constructed": "",
        "constructed_then_a_call": "    bl other\n",
        "constructed_then_edited": "    mov w6, #0x78\n    strb w6, [sp, #32]\n",
        "constructed_then_stored_through_a_pointer": "    adrp x6, table\n"
                                                     "    ldr x6, [x6, :lo12:table]\n"
                                                     "    strb wzr, [x6]\n",
    },
}
SOURCES = {"x86_64": X86_64, "aarch64": AARCH64}
# What each probe's call is keyed by (None: no key).
EXPECTED = {"in_place": "string:circle", "edited": "string:xircle", "after_a_call": None,
            "through_a_pointer": None, "after_a_join": None, "length_computed": None,
            "moved_stack": None, "long": "string:abcdefghijklmno",
            # Built by a call passed the place and the literal's bounds (_M_construct).
            "constructed": "string:circle", "constructed_then_a_call": None,
            "constructed_then_edited": None, "constructed_then_stored_through_a_pointer": None}


# The probes that build their name otherwise than ``build``.
_BUILDS = {"long": "long", "constructed": "construct"}


def _source(machine: str) -> str:
    parts = SOURCES[machine]
    functions = "".join(f"""
    .globl {name}
    .type {name}, {parts["type"]}
{name}:
{parts["enter"]}{parts[_BUILDS.get(name.partition("_")[0], "build")]}{edit}\
{parts["lookup"]}    .size {name}, .-{name}
""" for name, edit in EDITS[machine].items())
    return parts["head"] + functions + parts["data"]


@pytest.fixture(scope="module", params=MACHINES)
def library(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Path:
    machine = request.param
    path = tmp_path_factory.mktemp(f"stack_keys_{machine}") / "libprobe.so"
    return compile_linked(toolchain(machine).cc, "assembler", path, _source(machine),
                          soname=path.name)


@pytest.mark.parametrize("probe", sorted(EXPECTED))
def test_the_name_is_a_key_only_as_stored_just_before_the_call(probe: str,
                                                                library: Path) -> None:
    with ElfFile.open(str(library)) as elf:
        effects = EffectsAnalyzer(elf).effects(symtab_address(library, probe))
    keys = [call.key for call in effects.keyed_calls if call.function == "lookup"]
    assert keys == ([EXPECTED[probe]] if EXPECTED[probe] else []), keys
