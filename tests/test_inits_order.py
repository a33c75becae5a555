"""The initializer order `elfpatch inits` predicts equals the order programs print at run time.

Each translation unit's initializer prints its TU's name; the program is
built in two link orders, with init_priority, as PIE and non-PIE, with and
without packed relative relocations, with and without DWARF, for x86-64 and
aarch64 (run under qemu-user when it is installed).
"""

from __future__ import annotations

import subprocess

import pytest

from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf.file import ElfFile

build = pytest.importorskip("elfpatch.fixtures.build")

UNIT = """
#include <cstdio>
namespace {{
struct Announce {{ explicit Announce(const char* what) {{ std::printf("%s\\n", what); }} }};
{priority_line}
Announce announce_{name}("{name}.cpp");
}}
"""

PRIORITY_LINE = ('__attribute__((init_priority({priority}))) Announce early_{name}'
                 '("{name}.cpp");')

MAIN = """
#include <cstdio>
int main() { std::printf("main\\n"); return 0; }
"""


def unit_source(name: str, priority: int | None = None) -> str:
    line = PRIORITY_LINE.format(priority=priority, name=name) if priority else ""
    return UNIT.format(name=name, priority_line=line)


def predicted_units(path: str) -> list[str]:
    with ElfFile.open(path) as elf:
        listing = list_initializers(elf, path)
    units = [e.translation_unit for e in listing.initializers if not e.is_runtime]
    assert all(units), f"an initializer without a translation unit: {listing.initializers}"
    return [u.rsplit("/", 1)[-1] for u in units if u]


def printed_units(path: str, toolchain: object = None) -> list[str]:
    runner = list(getattr(toolchain, "runner", []) or [])
    output = subprocess.run([*runner, str(path)], capture_output=True, text=True, check=True,
                            timeout=60).stdout
    return [line for line in output.splitlines() if line.endswith(".cpp")]


def _toolchain(machine: str) -> object:
    if not build.compiler_available():
        pytest.skip("no C++ compiler installed")
    if machine == "x86_64":
        return build.host_toolchain()
    toolchain = build.cross_toolchain(machine)
    if toolchain is None:
        pytest.skip(f"no {machine} cross compiler installed")
    return toolchain


LAYOUTS = {
    "pie": ["-fPIE", "-pie"],
    "no-pie": ["-fno-PIE", "-no-pie"],
    "pie-relr": ["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs"],
    "pie-dwarf": ["-fPIE", "-pie", "-g"],
}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("order", [("t1", "t2", "t3"), ("t3", "t1", "t2")])
@pytest.mark.parametrize("with_priority", [False, True])
def test_executable_order_matches_run(machine: str, layout: str, order: tuple[str, ...],
                                      with_priority: bool) -> None:
    toolchain = _toolchain(machine)
    sources = {f"{name}.cpp": unit_source(name, 200 if with_priority and name == "t2" else None)
               for name in order}
    sources["main.cpp"] = MAIN
    # The dictionary order is the link order.
    program = build.build_executable(sources, "prog", LAYOUTS[layout], toolchain=toolchain)
    predicted = predicted_units(str(program))
    if not getattr(toolchain, "runner", None) and machine != "x86_64" \
            and not toolchain.runner_available():  # type: ignore[attr-defined]
        pytest.skip("qemu-user not installed: cannot run the aarch64 program")
    assert predicted == printed_units(str(program), toolchain)
    if with_priority:
        assert predicted[0] == "t2.cpp"


@pytest.mark.parametrize("flags", [[], ["-Wl,-z,pack-relative-relocs"]])
def test_shared_library_order_matches_run(flags: list[str]) -> None:
    toolchain = _toolchain("x86_64")
    library = build.build_shared({"s2.cpp": unit_source("s2"), "s1.cpp": unit_source("s1", 300)},
                                 "libinits", ["-fPIC", *flags], toolchain=toolchain)
    program = build.build_executable({"main.cpp": MAIN}, "host", [],
                                     toolchain=toolchain,
                                     link=["-Wl,--no-as-needed", str(library),
                                           f"-Wl,-rpath,{library.parent}"])
    printed = printed_units(str(program))
    assert printed == predicted_units(str(library)) == ["s1.cpp", "s2.cpp", "s1.cpp"]


def test_translation_units_named_without_dwarf() -> None:
    toolchain = _toolchain("x86_64")
    sources = {"t1.cpp": unit_source("t1") + "int first_global_t1 = 1;\n",
               "main.cpp": MAIN}
    program = build.build_executable(sources, "named", ["-fPIE", "-pie"], toolchain=toolchain)
    with ElfFile.open(program) as elf:
        entries = [e for e in list_initializers(elf, str(program)).initializers
                   if not e.is_runtime]
    assert [e.symbol for e in entries] == ["_GLOBAL__sub_I_first_global_t1"]
    assert entries[0].translation_unit == "the TU defining first_global_t1"
    assert entries[0].translation_unit_source == "symbol name"
