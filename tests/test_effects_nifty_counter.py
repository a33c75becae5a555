"""A nifty counter guards what its function does on the first call only.

``if (users++ == 0) { … }`` is how ``std::ios_base::Init``'s constructor, which
every TU that includes ``<iostream>`` calls, builds the standard streams once.
Unnamed in a stripped copy of the C++ runtime linked in, its body was taken to
run in every caller: cuFFT's 470 initializers were each charged with what the
first call builds (113 false link-order warnings).  The body is now guarded by
the count, as a hand-made flag's is, and what it builds is built on first use.
A count bumped on every call with no such test guards nothing.
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
        "}\n"),
    "main.cpp": ("void stream_init();\nvoid counted(int);\n"
                 "int main(int argc, char**) { stream_init(); counted(argc); return 0; }\n"),
}


@pytest.fixture(scope="module")
def program() -> Path:
    return build.build_executable(SOURCES, "nifty_counter", ["-O2", "-g0"],
                                  toolchain=toolchain("x86_64"))


@pytest.mark.parametrize("stripped", [False, True], ids=["unstripped", "stripped"])
def test_the_first_call_alone_runs_what_the_count_guards(program: Path, tmp_path: Path,
                                                        stripped: bool) -> None:
    guarded, counted, table = (symtab_address(program, name) for name in
                               ("_Z11stream_initv", "_Z7countedi", "stream_table"))
    path = strip_unneeded("x86_64", program, tmp_path) if stripped else program
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        events = analyzer.summary(guarded).events
        guards = [event for event in events if event[0] == GUARD]
        assert [event[1] for event in guards] == [True, False]
        assert events[-1] == guards[-1]  # the body runs to the end under the count
        lazy = analyzer.effects(guarded).lazy  # built on first use (a bare address stripped)
        assert f"{table:#x}" in lazy or f"@{table:#x}" in lazy, lazy
        assert not [event for event in analyzer.summary(counted).events if event[0] == GUARD]
