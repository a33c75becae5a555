"""An option object read before its construction, in code -flto inlined (LLVM's cl::opt).

``passes.cpp`` defines ``Threshold``, an option whose constructor stores its
name (a string literal) and value and registers it into a list behind a
function-local static; its destructor is trivial, so nothing registers one at
exit.  ``stats.cpp`` computes ``limit = Threshold.value * 2`` in its own
initializer.  Built -O2 with and without -flto, in both link orders, and
stripped: the program prints the limit it saw (0 when it read the option
before its construction).  ``inits`` reports an ``init-order`` error exactly
where it printed 0: with -flto the read and the construction sit in one
function, and what tells the construction from a counter being bumped is the
store of a read-only address (the name) into the object.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import errors, inits_of, toolchain

SOURCES = {
    "CommandLine.h": (
        "#include <vector>\n"
        "namespace cl {\n"
        "struct Option;\n"
        "std::vector<Option*>& RegisteredOptions();\n"
        "struct Option {\n"
        "    const char* name; int value;\n"
        "    Option(const char* n, int v) : name(n), value(v) {"
        " RegisteredOptions().push_back(this); }\n"
        "};\n"
        "}\n"
    ),
    "CommandLine.cpp": (
        '#include "CommandLine.h"\n'
        "std::vector<cl::Option*>& cl::RegisteredOptions() {\n"
        "    static std::vector<cl::Option*> options;\n"
        "    return options;\n"
        "}\n"
    ),
    "passes.cpp": '#include "CommandLine.h"\ncl::Option Threshold("threshold", 7);\n',
    "stats.cpp": ('#include "CommandLine.h"\nextern cl::Option Threshold;\n'
                  "int limit = Threshold.value * 2;\n"),
    "main.cpp": ('#include <cstdio>\nextern int limit;\n'
                 'int main() { std::printf("limit=%d\\n", limit); }\n'),
}
ORDERS = {"stats_first": ("stats.cpp", "passes.cpp", "CommandLine.cpp", "main.cpp"),
          "passes_first": ("passes.cpp", "stats.cpp", "CommandLine.cpp", "main.cpp")}


@pytest.mark.parametrize("lto", [False, True], ids=["O2", "O2-lto"])
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_error_exactly_where_the_option_was_read_unconstructed(order: str, lto: bool,
                                                               tmp_path: Path) -> None:
    compiler = toolchain("x86_64")
    flags = ("-O2", "-flto") if lto else ("-O2",)
    sources = {name: SOURCES[name] for name in ("CommandLine.h", *ORDERS[order])}
    program = build.build_executable(sources, f"option_{order}", flags, toolchain=compiler)
    limit = subprocess.run([str(program)], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert limit in ("limit=0", "limit=14")
    expected = limit == "limit=0"
    assert bool([e for e in errors(inits_of(program)) if e[0] == "init-order"]) == expected
    if shutil.which("strip") is None:
        pytest.skip("strip is not installed (apt-get install binutils)")
    copy = tmp_path / program.name
    shutil.copy(program, copy)
    subprocess.run(["strip", "--strip-unneeded", str(copy)], check=True)
    assert bool([e for e in errors(inits_of(copy)) if e[0] == "init-order"]) == expected
