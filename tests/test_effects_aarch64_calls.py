"""A flag aarch64 code reads that orders nothing.

libgcc's outline atomics (``__aarch64_ldadd4_acq_rel`` and the like, which gcc 10
and later call for every atomic operation on aarch64 unless ``-march`` names
LSE) read ``__aarch64_have_lse_atomics`` to choose between an LSE instruction
and an exclusive pair: the same operation either way, and the flag, set by
libgcc's own initializer after the program's, is read before it on purpose.
Stripped, the flag was taken for a member of whatever object lay just before
it: rdkit 2026.9's aarch64 wheel had 3 false init-order and 19 false
destruction-order errors of that kind.
"""

from __future__ import annotations

from pathlib import Path

from elfpatch.fixtures import build
from support.inits import strip_unneeded, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
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

