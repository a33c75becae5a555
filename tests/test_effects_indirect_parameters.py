"""What a function does with its parameters although it calls through a register.

A call whose target is a register (a virtual call, a callback) is code not
followed; a function that makes one used to be unknown as a whole, so every
pointer passed to it was taken to be read.  Now the parameters in argument
registers at such a call are handed to it, taken to be read, and so is any
its own code uses; those it never touches, or only passes on in place to
functions it calls by address, are known.

A caller whose callee has no name passes all the argument registers, and a
register past the callee's parameters may hold an address its caller left
there (aarch64 nvJitLink 12.9: a cl::opt's address left in x7 across the
option's ``setArgStr``, handed down through LLVM's ``ManagedStatic`` to its
creator callback, 112 false warnings).  A function is taken to receive the
parameters up to the last it handles itself; what lies past them at a call
through a register is not handed on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import compile_linked
from support.inits import local_objects, strip_unneeded, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.summary import USE_ASSUMED, USE_READ, read_seen
from elfpatch.elf.file import ElfFile

# probe leaves anchor's address in the last argument register and calls setter,
# which takes one parameter and calls through a pointer it loads from it.
# forward(a, b, callback) calls callback(a, b): a and b are handed on.
# reader(p) reads through p, then calls through a register.
AARCH64 = """
    .text
    .globl probe
    .type probe, %function
probe:
    stp x29, x30, [sp, #-16]!
    adrp x7, anchor
    add x7, x7, :lo12:anchor
    adrp x0, table
    add x0, x0, :lo12:table
    bl setter
    ldp x29, x30, [sp], #16
    ret
    .size probe, .-probe
    .type setter, %function
setter:
    stp x29, x30, [sp, #-16]!
    ldr x16, [x0]
    blr x16
    ldp x29, x30, [sp], #16
    ret
    .size setter, .-setter
    .globl forward
    .type forward, %function
forward:
    mov x16, x2
    br x16
    .size forward, .-forward
    .globl reader
    .type reader, %function
reader:
    stp x29, x30, [sp, #-16]!
    ldr x9, [x0]
    adrp x16, table
    ldr x16, [x16, :lo12:table]
    blr x16
    ldp x29, x30, [sp], #16
    ret
    .size reader, .-reader
""" + local_objects(anchor=8, table=8)
X86_64 = """
    .intel_syntax noprefix
    .text
    .globl probe
    .type probe, @function
probe:
    sub rsp, 8
    lea r9, [rip + anchor]
    lea rdi, [rip + table]
    call setter
    add rsp, 8
    ret
    .size probe, .-probe
    .type setter, @function
setter:
    sub rsp, 8
    mov rax, [rdi]
    call rax
    add rsp, 8
    ret
    .size setter, .-setter
    .globl forward
    .type forward, @function
forward:
    sub rsp, 8
    mov rax, rdx
    call rax
    add rsp, 8
    ret
    .size forward, .-forward
    .globl reader
    .type reader, @function
reader:
    sub rsp, 8
    mov rcx, [rdi]
    call [rip + table]
    add rsp, 8
    ret
    .size reader, .-reader
""" + local_objects(anchor=8, table=8)
SOURCES = {"aarch64": AARCH64, "x86_64": X86_64}
LAST = {"aarch64": 7, "x86_64": 5}  # the last argument register's position


@pytest.fixture(params=["x86_64", "aarch64"])
def machine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def library(machine: str, tmp_path: Path) -> Path:
    (tmp_path / "built").mkdir()
    path = tmp_path / "built" / "libprobe.so"
    compile_linked(toolchain(machine).cc, "assembler", path, SOURCES[machine],
                   soname=path.name)
    return path


def test_an_address_left_past_the_parameters_is_not_read(machine: str, library: Path,
                                                         tmp_path: Path) -> None:
    setter = symtab_address(library, "setter")
    anchor = symtab_address(library, "anchor")
    for path in (library, strip_unneeded(machine, library, tmp_path)):
        with ElfFile.open(str(path)) as elf:
            analyzer = EffectsAnalyzer(elf)
            assert analyzer.parameter_use(setter, LAST[machine]) == 0
            assert analyzer.parameter_use(setter, 0) & USE_READ
            reads = analyzer.effects(symtab_address(library, "probe")).reads
        assert not any(key.lstrip("@^") in ("anchor", f"{anchor:#x}") for key in reads), reads


def test_parameters_handed_on_in_place_are_taken_to_be_read(library: Path,
                                                            machine: str) -> None:
    forward = symtab_address(library, "forward")
    with ElfFile.open(str(library)) as elf:
        analyzer = EffectsAnalyzer(elf)
        for position in (0, 1):
            use = analyzer.parameter_use(forward, position)
            assert use & USE_READ and use & USE_ASSUMED, (position, use)
        assert analyzer.parameter_use(forward, LAST[machine]) == 0
        # What it does with a parameter it uses itself is only assumed, the read seen
        # included, as before: a path its callers never take may be all there is to it.
        use = analyzer.parameter_use(symtab_address(library, "reader"), 0)
        assert use & USE_READ and not read_seen(use)
