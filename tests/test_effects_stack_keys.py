"""A short ``std::string`` key built in place on the stack (x86-64).

For a ``const std::string&`` parameter gcc builds a short name on the
caller's stack in libstdc++'s layout: a pointer to its own buffer, 16 bytes
in, the length at 8, the bytes from 16, each stored as a number.  The call
is then keyed by that text, as a string literal would be.  Only what the
stores just before the call leave is read: a call, a join of two paths, a
store through a pointer that may point to the stack, or any instruction but
a move in between (a register's number computed) and the name is no key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import compile_linked
from support.inits import toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile

# Each probe builds "circle" at rsp (then edits it, or not) and calls lookup(&name).
BUILD = """
    lea rax, [rsp + 16]
    mov qword ptr [rsp], rax
    mov dword ptr [rsp + 16], 0x63726963
    mov eax, 0x656c
    mov word ptr [rsp + 20], ax
    mov qword ptr [rsp + 8], 6
    mov byte ptr [rsp + 22], 0
"""
LOOKUP = """
    mov rdi, rsp
    call lookup@PLT
    add rsp, 40
    ret
"""
PROBES = {
    "in_place": "",
    "edited": "    mov byte ptr [rsp + 16], 0x78\n",
    "after_a_call": "    call other@PLT\n",
    "through_a_pointer": "    mov rcx, qword ptr [rip + table]\n    mov byte ptr [rcx], 0x78\n",
    "after_a_join": "    test esi, esi\n    je 1f\n    mov byte ptr [rsp + 17], 0x78\n1:\n",
    "length_computed": "    mov eax, 6\n    add eax, 1\n    mov qword ptr [rsp + 8], rax\n",
    "moved_stack": "    push rbx\n    sub rsp, 8\n",
}
# What each probe's call is keyed by (None: no key).
EXPECTED = {"in_place": "string:circle", "edited": "string:xircle", "after_a_call": None,
            "through_a_pointer": None, "after_a_join": None, "length_computed": None,
            "moved_stack": None}


def _source() -> str:
    functions = "".join(f"""
    .globl {name}
    .type {name}, @function
{name}:
    sub rsp, 40
{BUILD}{edit}{LOOKUP}    .size {name}, .-{name}
""" for name, edit in PROBES.items())
    return f"""
    .intel_syntax noprefix
    .text
{functions}
    .data
table:
    .quad 0
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stack_keys") / "libprobe.so"
    return compile_linked(toolchain("x86_64").cc, "assembler", path, _source(),
                          soname=path.name)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_the_name_is_a_key_only_as_stored_just_before_the_call(probe: str,
                                                                library: Path) -> None:
    with ElfFile.open(str(library)) as elf:
        effects = EffectsAnalyzer(elf).effects(symtab_address(library, probe))
    keys = [call.key for call in effects.keyed_calls if call.function == "lookup"]
    assert keys == ([EXPECTED[probe]] if EXPECTED[probe] else []), keys
