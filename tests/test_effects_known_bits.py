"""Bits a caller stores into an object decide the callee's test of them.

Each probe clears, sets or leaves alone bit 2 of byte 10 of ``setting`` (a
zeroed object of the library's own), then calls ``rename(&setting)``, which
reads ``journal`` only when that bit is set (``test byte ptr [rdi + 10], 4``,
or the byte loaded and its register tested; ``ldrb w1, [x0, #10]; tbnz w1,
#2``).  A bit cleared in place (x86-64 ``and`` on memory), in a register
stored back (``and``, aarch64 ``bfi``/``bfc``), or by a store of a number is
known there: the read is on a path the call never takes.  A bit set takes
it; a bit not known (another cleared, the register computed on after its
AND, or anything known forgotten: a call, a store through a pointer not
known, a join of two paths before the call) keeps both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import compile_linked
from support.inits import MACHINES, local_objects, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.bits import anded, exactly, inserted, ored, selected
from elfpatch.elf.file import ElfFile


def _x86_callee(name: str, test: str) -> str:
    return f"""
    .type {name}, @function
{name}:
    {test}
    jne 1f
    ret
1:
    mov eax, dword ptr [rip + journal]
    ret
    .size {name}, .-{name}
"""


X86_64 = {
    "head": "    .intel_syntax noprefix\n    .text\n",
    "type": "@function",
    "call": "    lea rdi, [rip + setting]\n    call rename\n    ret\n",
    # Each reads journal only when bit 2 of byte 10 is set, tested as the test lines
    # say (``_x86_callee``).
    "callee": "".join(_x86_callee(name, test) for name, test in (
        ("rename", "test byte ptr [rdi + 10], 4"),
        ("rename_loaded", "movzx eax, byte ptr [rdi + 10]\n    test al, 4"),
        ("rename_word", "mov eax, dword ptr [rdi + 8]\n    test eax, 0x40000"))),
    "probes": {
        "cleared_in_place": "    and word ptr [rip + setting + 10], 0xfffb\n",
        # The callee loads the byte, then tests the register (``rename_loaded``).
        "cleared_in_place_then_loaded": "    and word ptr [rip + setting + 10], 0xfffb\n",
        "set_then_loaded": "    or byte ptr [rip + setting + 10], 4\n",
        # The callee loads the word around it, then tests the register (``rename_word``).
        "cleared_in_place_then_word": "    and word ptr [rip + setting + 10], 0xfffb\n",
        "cleared_in_a_register": "    movzx eax, byte ptr [rip + setting + 10]\n"
                                 "    and eax, 0xfb\n    mov byte ptr [rip + setting + 10], al\n",
        "stored_zero": "    mov byte ptr [rip + setting + 10], 0\n",
        "set": "    or byte ptr [rip + setting + 10], 4\n",
        "cleared_then_computed": "    movzx eax, byte ptr [rip + setting + 10]\n"
                                 "    and eax, 0xfb\n    add eax, 4\n"
                                 "    mov byte ptr [rip + setting + 10], al\n",
        "another_bit_cleared": "    and byte ptr [rip + setting + 10], 0xfe\n",
        "cleared_then_a_call": "    and word ptr [rip + setting + 10], 0xfffb\n"
                               "    call other@PLT\n",
        "cleared_then_a_store_through_a_pointer":
            "    and word ptr [rip + setting + 10], 0xfffb\n"
            "    mov rcx, qword ptr [rip + table]\n    mov byte ptr [rcx], 4\n",
        "cleared_then_a_join": "    and word ptr [rip + setting + 10], 0xfffb\n"
                               "    test esi, esi\n    je 1f\n    nop\n1:\n",
        # rbp is an ordinary register at -O2: it may point anywhere.
        "cleared_then_a_store_through_the_frame_register":
            "    and word ptr [rip + setting + 10], 0xfffb\n    mov byte ptr [rbp + 10], 4\n",
        # Into the object, at an index not known (the bit set, as it happens).
        "cleared_then_an_indexed_store":
            "    and word ptr [rip + setting + 10], 0xfffb\n    lea rcx, [rip + setting]\n"
            "    mov byte ptr [rcx + rax], 4\n",
    },
}
AARCH64 = {
    "head": "    .text\n",
    "type": "%function",
    "call": "    adrp x0, setting\n    add x0, x0, :lo12:setting\n    bl rename\n"
            "    ldp x29, x30, [sp], #16\n    ret\n",
    "callee": """
    .type rename, %function
rename:
    ldrb w1, [x0, #10]
    tbnz w1, #2, 1f
    ret
1:
    adrp x2, journal
    ldr w0, [x2, :lo12:journal]
    ret
    .size rename, .-rename
""",
    "probes": {
        "cleared_by_an_insert": "    ldrb w1, [x9, #10]\n    mov w3, #0\n"
                                "    bfi w1, w3, #2, #1\n    strb w1, [x9, #10]\n",
        # Read back as bfc w1, #2, #1 (the alias ARMv8.2 names).
        "cleared_by_a_bit_field_clear": "    ldrb w1, [x9, #10]\n    bfi w1, wzr, #2, #1\n"
                                        "    strb w1, [x9, #10]\n",
        "cleared_in_a_register": "    ldrh w1, [x9, #10]\n    and w1, w1, #0xfffffffb\n"
                                 "    strh w1, [x9, #10]\n",
        "stored_zero": "    strb wzr, [x9, #10]\n",
        "set": "    ldrb w1, [x9, #10]\n    orr w1, w1, #4\n    strb w1, [x9, #10]\n",
        "cleared_then_computed": "    ldrb w1, [x9, #10]\n    and w1, w1, #0xfffffffb\n"
                                 "    add w1, w1, #4\n    strb w1, [x9, #10]\n",
        "another_bit_cleared": "    ldrb w1, [x9, #10]\n    and w1, w1, #0xfe\n"
                               "    strb w1, [x9, #10]\n",
        "cleared_then_a_call": "    strb wzr, [x9, #10]\n    bl other\n",
        "cleared_then_a_store_through_a_pointer":
            "    strb wzr, [x9, #10]\n"
            "    adrp x6, table\n    ldr x6, [x6, :lo12:table]\n    strb wzr, [x6]\n",
        "cleared_then_a_join": "    strb wzr, [x9, #10]\n    cbz w2, 1f\n    nop\n1:\n",
        "cleared_then_a_store_through_the_frame_register":
            "    strb wzr, [x9, #10]\n    mov w3, #4\n    strb w3, [x29, #10]\n",
        "cleared_then_an_indexed_store":
            "    strb wzr, [x9, #10]\n    mov w3, #4\n    strb w3, [x9, x2]\n",
        "cleared_then_set_with_a_writeback":
            "    strb wzr, [x9, #10]\n    mov w3, #4\n    strb w3, [x9, #10]!\n",
    },
}
_AARCH64_ENTER = ("    stp x29, x30, [sp, #-16]!\n"
                  "    adrp x9, setting\n    add x9, x9, :lo12:setting\n")
SOURCES = {"x86_64": X86_64, "aarch64": AARCH64}
# Whether the probe's call reads journal (the path the bit selects, or both).
READS_JOURNAL = {
    "cleared_in_place": False,
    "cleared_in_place_then_loaded": False,
    "set_then_loaded": True,
    "cleared_in_place_then_word": False,
    "cleared_then_computed": True,
    "cleared_in_a_register": False,
    "cleared_by_an_insert": False,
    "cleared_by_a_bit_field_clear": False,
    "stored_zero": False,
    "set": True,
    "another_bit_cleared": True,
    "cleared_then_a_call": True,
    "cleared_then_a_store_through_a_pointer": True,
    "cleared_then_a_join": True,
    "cleared_then_a_store_through_the_frame_register": True,
    "cleared_then_an_indexed_store": True,
    "cleared_then_set_with_a_writeback": True,
}


def _call(parts: dict[str, object], probe: str) -> str:
    call = parts["call"]
    assert isinstance(call, str)
    for ending, callee in (("_loaded", "rename_loaded"), ("_word", "rename_word")):
        if probe.endswith(ending):
            return call.replace("rename", callee)
    return call


def _source(machine: str) -> str:
    parts = SOURCES[machine]
    enter = _AARCH64_ENTER if machine == "aarch64" else ""
    probes = parts["probes"]
    assert isinstance(probes, dict)
    functions = "".join(f"""
    .globl {name}
    .type {name}, {parts["type"]}
{name}:
{enter}{body}{_call(parts, name)}    .size {name}, .-{name}
""" for name, body in probes.items())
    return (f'{parts["head"]}{functions}{parts["callee"]}    .data\ntable:\n    .quad 0\n'
            + local_objects(setting=16, journal=8))


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = {}
    for machine in MACHINES:
        path = tmp_path_factory.mktemp(f"known_bits_{machine}") / "libprobe.so"
        found[machine] = compile_linked(toolchain(machine).cc, "assembler", path,
                                        _source(machine), soname=path.name)
    return found


@pytest.mark.parametrize(("machine", "probe"), [
    (machine, probe) for machine in MACHINES for probe in SOURCES[machine]["probes"]])
def test_a_bit_the_caller_fixed_decides_the_callee(machine: str, probe: str,
                                                   libraries: dict[str, Path]) -> None:
    path = libraries[machine]
    with ElfFile.open(str(path)) as elf:
        effects = EffectsAnalyzer(elf).effects(symtab_address(path, probe))
    journal = f"{symtab_address(path, 'journal'):#x}"  # an object of this file alone
    assert (journal in effects.reads) is READS_JOURNAL[probe], effects.reads


def test_what_each_operation_leaves_known() -> None:
    unknown = (0, 0)
    # A 32-bit AND zeroes the upper half; an 8-bit one leaves it as it was.
    assert anded(unknown, 0xFB, 32) == ((1 << 64) - 1 ^ 0xFB, 0)
    assert anded(exactly(0xFF00), 0xFB, 8) == ((1 << 64) - 1, 0xFF00)
    assert ored(unknown, 4, 64) == (4, 4)
    assert inserted(unknown, exactly(0), 2, 1, 32) == (((1 << 64) - 1) ^ 0xFFFF_FFFF | 4, 0)
    assert selected(anded(unknown, 0xFB, 8), 4) == 0
    assert selected(anded(unknown, 0xFE, 8), 4) is None
