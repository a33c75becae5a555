"""What a function that calls itself does with its pointer parameter: what its own
code does, the call to itself adding nothing (gflags' ``FindFlagLocked`` looks a
flag up again under its name without a ``no`` prefix)."""

from __future__ import annotations

import pytest
from elfpatch.fixtures import build
from elftools.elf.elffile import ELFFile

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.summary import CALL, USE_READ, USE_READ_FIRST
from elfpatch.elf.file import ElfFile

SOURCES = {"names.cpp": """
#include <cstring>
struct Names { int count; const char* names[8]; };
__attribute__((noinline)) void note(int found);
__attribute__((noinline)) int position(const Names* names, const char* name) {
    for (int i = 0; i < names->count; ++i)
        if (std::strcmp(names->names[i], name) == 0) return i;
    if (std::strncmp(name, "no", 2) != 0) return -1;
    int found = position(names, name + 2);  // not a tail call: the note comes after
    note(found);
    return found;
}
int last;
void note(int found) { last = found; }
Names table = {2, {"a", "b"}};
int main(int argc, char** argv) { return position(&table, argv[argc - 1]); }
"""}


def test_a_call_to_itself_adds_nothing_to_a_parameter_use() -> None:
    if not build.compiler_available():
        pytest.skip("no C++ compiler installed (apt-get install g++)")
    program = build.build_executable(SOURCES, "names", ["-O2"])
    elf = ElfFile.open(str(program))
    analyzer = EffectsAnalyzer(elf)
    analyzer.index.prepare()
    with program.open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".symtab")
        (address,) = [s["st_value"] for s in table.iter_symbols()
                      if s.name == "_Z8positionPK5NamesPKc"]
    calls = {event[1] for event in analyzer.summary(address).events if event[0] == CALL}
    assert address in calls  # it calls itself
    # Read, first, and neither built nor handed to code not followed.
    assert analyzer.parameter_use(address, 0) == USE_READ | USE_READ_FIRST
