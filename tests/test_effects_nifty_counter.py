"""A nifty counter guards what its function does on the first call only.

``if (users++ == 0) { … }`` is how ``std::ios_base::Init``'s constructor, which
every TU that includes ``<iostream>`` calls, builds the standard streams once.
Unnamed in a stripped copy of the C++ runtime linked in, its body was taken to
run in every caller: cuFFT's 470 initializers were each charged with what the
first call builds (113 false link-order warnings; the same on aarch64, where
the count is read whole and stored back, or bumped by an exclusive pair, or
by ``ldaddal``).  The body is now guarded by the count, as a hand-made flag's
is, and what it builds is built on first use.  A count bumped on every call
with no such test guards nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import strip_unneeded, toolchain
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.summary import GUARD
from elfpatch.elf.file import ElfFile

SOURCES = {
    "stream.cpp": (
        "static int users;\nint stream_table[8];\nstatic int calls;\nint call_table[8];\n"
        "void stream_init() {\n"
        "    if (users++ == 0)\n"
        "        for (int i = 0; i < 8; ++i) stream_table[i] = (i + 1) * 11;\n"
        "}\n"
        "void counted(int i) {\n"
        "    ++calls;\n"
        "    call_table[i & 7] = calls;\n"
        "}\n"
        "static int shared_users;\nint shared_table[8];\n"
        "void shared_init() {\n"
        "    if (__atomic_fetch_add(&shared_users, 1, __ATOMIC_ACQ_REL) == 0)\n"
        "        for (int i = 0; i < 8; ++i) shared_table[i] = (i + 1) * 13;\n"
        "}\n"),
    "main.cpp": ("void stream_init();\nvoid counted(int);\nvoid shared_init();\n"
                 "int main(int argc, char**) {\n"
                 "    stream_init(); counted(argc); shared_init(); return 0;\n}\n"),
}
# The atomic count: x86-64's lock xadd; aarch64's exclusive pair (no call to libgcc's
# helpers), and the LSE instruction.
BUILDS = {"x86_64": ("x86_64", ()), "aarch64": ("aarch64", ("-mno-outline-atomics",)),
          "aarch64_lse": ("aarch64", ("-march=armv8.1-a",))}


def program(build_name: str) -> tuple[str, Path]:
    machine, flags = BUILDS[build_name]
    return machine, build.build_executable(SOURCES, f"nifty_counter_{build_name}",
                                           ["-O2", "-g0", *flags],
                                           toolchain=toolchain(machine))


@pytest.mark.parametrize("stripped", [False, True], ids=["unstripped", "stripped"])
@pytest.mark.parametrize("build_name", BUILDS)
@pytest.mark.parametrize(("function", "table"), [("_Z11stream_initv", "stream_table"),
                                                 ("_Z11shared_initv", "shared_table")])
def test_the_first_call_alone_runs_what_the_count_guards(build_name: str, function: str,
                                                        table: str, tmp_path: Path,
                                                        stripped: bool) -> None:
    machine, built = program(build_name)
    guarded, counted, built_table = (symtab_address(built, name) for name in
                                     (function, "_Z7countedi", table))
    path = strip_unneeded(machine, built, tmp_path) if stripped else built
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        events = analyzer.summary(guarded).events
        guards = [event for event in events if event[0] == GUARD]
        assert [event[1] for event in guards] == [True, False], events
        assert events[-1] == guards[-1]  # the body runs to the end under the count
        lazy = analyzer.effects(guarded).lazy  # built on first use (a bare address stripped)
        assert f"{built_table:#x}" in lazy or f"@{built_table:#x}" in lazy, lazy
        assert not [event for event in analyzer.summary(counted).events if event[0] == GUARD]
