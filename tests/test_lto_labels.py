"""Objects -flto renames (``_ZL5label.lto_priv.0``) are shown demangled, the copy
apart: c++filt and the C++ runtime's demangler leave such a variable's name as it
is (they read a clone suffix only on a function).

A ``static const std::string`` in a header gives each TU including it its own
object; with -flto gcc tells them apart by a suffix on the mangled name.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from elfpatch.fixtures import build
from support.build import invoke
from support.inits import toolchain
from support.readelf import readelf_symbols

HEADER = """#pragma once
#include <string>
static const std::string kGreeting = "a greeting longer than any short string";
int first();
int second();
"""
SOURCES = {
    "greeting.h": HEADER,
    "first.cpp": '#include "greeting.h"\nint first() { return int(kGreeting.size()); }\n',
    "second.cpp": '#include "greeting.h"\nint second() { return int(kGreeting[0]); }\n',
    "main.cpp": '#include "greeting.h"\n#include <cstdio>\n'
                'int main() { std::printf("%d %d\\n", first(), second()); }\n',
}


def _program() -> Path:
    toolchain("x86_64")
    folder = build.build_targets(SOURCES, [
        build.Target("greeting_lto", ("first.cpp", "second.cpp", "main.cpp"),
                     flags=("-flto",))], ["-O2", "-g0"], label="lto-labels")
    return folder / "greeting_lto"


def test_renamed_objects_are_shown_demangled_with_their_copy() -> None:
    program = _program()
    assert subprocess.run([str(program)], capture_output=True, text=True,
                          check=True).stdout == "39 97\n"
    renamed = sorted(s.name for s in readelf_symbols(program)
                     if s.name.startswith("_ZL9kGreeting.lto_priv."))
    assert len(renamed) == 3, renamed  # one per TU including the header
    assert subprocess.run(["c++filt", renamed[0]], capture_output=True, text=True,
                          check=True).stdout.strip() == renamed[0]  # the oracle refuses it
    labels = {f"kGreeting [clone {name.removeprefix('_ZL9kGreeting')}]" for name in renamed}
    for command in (("check",), ("inits", "-v")):
        result = invoke(*command, str(program))
        assert result.exception is None, result.exception
        assert "_ZL9kGreeting" not in result.stdout, command
        assert any(label in result.stdout for label in labels), (command, result.stdout)
