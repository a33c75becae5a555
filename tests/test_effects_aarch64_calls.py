"""Two things aarch64 code reads or leaves in a register that order nothing.

libgcc's outline atomics (``__aarch64_ldadd4_acq_rel`` and the like, which gcc 10
and later call for every atomic operation on aarch64 unless ``-march`` names
LSE) read ``__aarch64_have_lse_atomics`` to choose between an LSE instruction
and an exclusive pair: the same operation either way, and the flag, set by
libgcc's own initializer after the program's, is read before it on purpose.
Stripped, the flag was taken for a member of whatever object lay just before
it: rdkit 2026.9's aarch64 wheel had 3 false init-order and 19 false
destruction-order errors of that kind.

And a by-value result's address travels in x8, not in an argument register:
``operator delete(void*, unsigned long)`` reads x0 and x1 only, not x2, which may
hold a global's address the code computed for itself (a section anchor:
pyarrow 26's aarch64 ``libarrow.so``, 1 false init-order error).
"""

from __future__ import annotations

from pathlib import Path

from elfpatch.fixtures import build
from support.inits import assembled_events, local_objects, strip_unneeded, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.summary import PASS, READ, UNKNOWN_PASS
from elfpatch.elf.file import ElfFile

SOURCES = {
    "first.cpp": ("int register_one();\nstatic const int first_id = register_one();\n"
                  "int first() { return first_id; }\n"),
    "counted.cpp": ("#include <atomic>\nstd::atomic<int> registrations{0};\n"
                    "int register_one() { return registrations.fetch_add(1) + 1; }\n"),
    "main.cpp": ("#include <cstdio>\nint first();\n"
                 'int main() { std::printf("first=%d\\n", first()); }\n'),
}
FLAG = "__aarch64_have_lse_atomics"
HELPER = "__aarch64_ldadd4_acq_rel"
# x2 holds ``anchor``'s address across a call that takes two arguments.
STALE_ARGUMENT = """
    .text
    .globl probe
    .type probe, %function
probe:
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    adrp x2, anchor
    add x2, x2, :lo12:anchor
    mov x1, #16
    bl _ZdlPvm
    ldp x29, x30, [sp], #16
    ret
    .size probe, .-probe
""" + local_objects(anchor=8)


def test_an_outline_atomic_reads_no_flag(tmp_path: Path) -> None:
    program = build.build_executable(SOURCES, "outline_atomics", ["-O2", "-g0"],
                                     toolchain=toolchain("aarch64"))
    helper, flag = symtab_address(program, HELPER), symtab_address(program, FLAG)
    caller = symtab_address(program, "_Z12register_onev")
    for path in (program, strip_unneeded("aarch64", program, tmp_path)):
        with ElfFile.open(str(path)) as elf:
            analyzer = EffectsAnalyzer(elf)
            assert analyzer.summary(helper).events == []  # the flag's read, and nothing else
            reads = analyzer.effects(caller).reads
        assert not any(key.lstrip("@^") in (FLAG, f"{flag:#x}") for key in reads), reads


def test_a_register_past_the_arguments_is_not_passed(tmp_path: Path) -> None:
    events = assembled_events(toolchain("aarch64").cc, STALE_ARGUMENT,
                              tmp_path / "libprobe.so", "probe")
    assert not [event for event in events if event[0] in (PASS, UNKNOWN_PASS, READ)], events
