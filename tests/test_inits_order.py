"""The initializer order `elfpatch inits` predicts equals the order programs print at run time.

Each translation unit's initializer prints its TU's name; the program is
built in two link orders, with init_priority, as PIE and non-PIE, with and
without packed relative relocations, with and without DWARF, for x86-64 and
aarch64 (run under qemu-user when it is installed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from elfpatch.fixtures import build
from support.readelf import readelf_sections, readelf_symbols

from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf.file import ElfFile

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
        pytest.skip("no C++ compiler installed (apt-get install g++)")
    if machine == "x86_64":
        return build.host_toolchain()
    toolchain = build.cross_toolchain(machine)
    if toolchain is None:
        pytest.skip(f"no {machine} cross compiler installed "
                    f"(apt-get install g++-{machine}-linux-gnu)")
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
    if not toolchain.runner_available():  # type: ignore[attr-defined]
        pytest.skip("qemu-aarch64 is not installed: cannot run the aarch64 program "
                    "(apt-get install qemu-user)")
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


NAMED_SOURCES = {"t1.cpp": unit_source("t1") + "int first_global_t1 = 1;\n", "main.cpp": MAIN}


def named_units(program: Path) -> list[tuple[str | None, str | None, str | None]]:
    """(symbol, translation unit, where its name came from) of each user initializer."""
    with ElfFile.open(program) as elf:
        return [(e.symbol, e.translation_unit, e.translation_unit_source)
                for e in list_initializers(elf, str(program)).initializers if not e.is_runtime]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_translation_units_named_without_dwarf(machine: str) -> None:
    """gcc names the initializer after the TU's first global; the STT_FILE symbol
    before it in .symtab names the file, as readelf shows it."""
    program = build.build_executable(NAMED_SOURCES, "named", ["-fPIE", "-pie"],
                                     toolchain=_toolchain(machine))
    assert any((s.type, s.binding, s.visibility, s.ndx, s.name)
               == ("FILE", "LOCAL", "DEFAULT", "ABS", "t1.cpp") for s in readelf_symbols(program))
    assert not any("debug_info" in s.name for s in readelf_sections(program))
    assert named_units(program) == [("_GLOBAL__sub_I_first_global_t1", "t1.cpp",
                                     "file symbol")]


def test_translation_unit_sources(tmp_path: Path) -> None:
    """DWARF first; without STT_FILE symbols, gcc's name for the initializer."""
    toolchain = _toolchain("x86_64")
    with_dwarf = build.build_executable(NAMED_SOURCES, "named_dwarf", ["-fPIE", "-pie", "-g"],
                                        toolchain=toolchain)
    assert named_units(with_dwarf) == [("_GLOBAL__sub_I_first_global_t1", "t1.cpp", "dwarf")]
    plain = build.build_executable(NAMED_SOURCES, "named", ["-fPIE", "-pie"],
                                   toolchain=toolchain)
    without_files = tmp_path / "no_file_symbols"
    require_tool("objcopy")
    subprocess.run(["objcopy", "--wildcard", "--strip-symbol=*.cpp", "--strip-symbol=*.c",
                    "--strip-symbol=*.o", str(plain), str(without_files)], check=True)
    assert named_units(without_files) == [("_GLOBAL__sub_I_first_global_t1",
                                           "the TU defining first_global_t1", "symbol name")]
