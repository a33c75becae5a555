"""What a call passing a constant gets back, and files under, seen through the walk the
constant selects (``EffectsAnalyzer.specialised``).

``pick(1)`` returns ``&alpha``, any other number ``&beta``: the plain walk knows no
one global it returns, the walk knowing 1 does, so the store through its result
is a write of ``alpha`` (an accessor's return, ``returned_global``).
``file_under(2)`` files its entry under "circle", any other number under
"square": only the key the constant selects is a keyed call of the initializer.
"""

from __future__ import annotations

import pytest
from elfpatch.fixtures import build
from support.inits import MACHINES, toolchain
from support.readelf import readelf_symbols

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile

SOURCES = {
    "pick.cpp": """
extern int alpha, beta;
__attribute__((noipa)) void note(const char* key) { asm volatile("" :: "r"(key) : "memory"); }

// One global or another: which, only a known argument says.
__attribute__((noipa)) int* pick(int which) {
    if (which == 1) return &alpha;
    note("other");
    return &beta;
}

// An entry filed under one key or another.
__attribute__((noipa)) void file_under(int kind) {
    if (kind == 2) {
        note("circle");
        return;
    }
    note("square");
}
""",
    "init.cpp": """
int alpha, beta;
int* pick(int which);
void file_under(int kind);
struct Init { Init() { *pick(1) = 7; file_under(2); } } init;
""",
    "main.cpp": "int main() { return 0; }\n",
}


@pytest.mark.parametrize("machine", MACHINES)
def test_the_selected_path_says_what_comes_back_and_what_is_filed(machine: str) -> None:
    path = build.build_executable(SOURCES, "specialised_accessor", ("-O2",),
                                  toolchain=toolchain(machine))
    (initializer,) = [s.value for s in readelf_symbols(path) if s.table == ".symtab"
                      and s.name.startswith("_GLOBAL__sub_I_")]
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        effects = analyzer.labelled(analyzer.effects(initializer))
    assert "alpha" in effects.writes
    assert "beta" not in (*effects.writes, *effects.reads)
    assert [call.key for call in effects.keyed_calls] == ["string:circle"]
    assert effects.branches[0] >= 2, "pick's and file_under's branches decided"
