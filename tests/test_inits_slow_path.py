"""A lock's slow path declared cold (``fixtures/slow_path``): laid out as code never
expected to run, it is not followed.

``user.cpp``'s initializer takes a free lock; the lock's slow path (``cold``, as
abseil's ``Mutex::LockSlow`` is) writes ``journal``, which ``journal.cpp`` builds
later, but never runs: the program prints ``contended=0``.  The oracle for the
layout is the compiler's own choice: which functions each object file puts in
``.text.unlikely``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits_of,
    order_risks_when_stripped,
    printed,
    risks,
    scenario,
    strip_unneeded,
    toolchain,
)
from support.readelf import readelf_symbol_sections, readelf_symbols, symtab_address
from support.tools import require_tool

from elfpatch.elf.eh_frame import FunctionBounds
from elfpatch.elf.file import ElfFile
from elfpatch.elf.layout import unlikely_code

QUIET = {"value": "7", "contended": "0", "name": "table lock"}


@pytest.mark.parametrize("machine", MACHINES)
def test_the_cold_slow_path_is_not_followed(machine: str, tmp_path: Path) -> None:
    built = scenario("slow_path", machine)
    assert printed(built, "user_first") == QUIET
    assert risks(inits_of(built.path("user_first")), *ORDER_KINDS) == []
    assert order_risks_when_stripped(machine, built.path("libuser_first.so"), tmp_path) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_the_same_path_laid_out_with_the_rest_is_followed(machine: str) -> None:
    """Without ``cold`` the slow path is the code's like any other: its write counts
    (the lock word that keeps it from running is a value the analysis does not know)."""
    built = scenario("slow_path", machine)
    assert printed(built, "user_first_warm") == QUIET
    found = risks(inits_of(built.path("user_first_warm")), *ORDER_KINDS)
    assert [(r["severity"], r["kind"], r["object"]) for r in found] == [
        ("error", "init-order", "journal")]


def _function_starts(path: Path) -> list[int]:
    with ElfFile.open(str(path)) as elf:
        return list(FunctionBounds(elf).starts)


def _unlikely_functions(path: Path) -> set[str]:
    """The function symbols of ``path`` that start in its ``unlikely_code``."""
    with ElfFile.open(str(path)) as elf:
        unlikely = unlikely_code(elf, FunctionBounds(elf).starts)
    return {s.name for s in readelf_symbols(path) if s.type == "FUNC" and s.value in unlikely}


def _compiled_unlikely(compiler: str, folder: Path, sources: list[Path],
                       flags: tuple[str, ...]) -> set[str]:
    """The functions ``compiler`` files under ``.text.unlikely`` (split-off parts
    included) in the objects of ``sources``, compiled with ``flags``."""
    names: set[str] = set()
    for source in sources:
        target = folder / f"{source.stem}.o"
        subprocess.run([compiler, *flags, "-c", str(source), "-o", str(target)],
                       check=True, capture_output=True)
        sections = readelf_symbol_sections(target)
        names.update(s.name for s in readelf_symbols(target) if s.type == "FUNC"
                     and sections.get(s.name, "").startswith(".text.unlikely"))
    return names


@pytest.mark.parametrize("machine", MACHINES)
def test_the_unlikely_code_is_what_the_compiler_put_in_text_unlikely(
        machine: str, tmp_path: Path) -> None:
    built = scenario("slow_path", machine)
    compiler = toolchain(machine).cxx
    sources = _sources(machine)
    expected = _compiled_unlikely(compiler, tmp_path, sources, ("-O2", "-g0"))
    assert {"_Z9lock_slowP4Lock", "_Z15note_contentionv"} <= expected
    assert _unlikely_functions(built.path("user_first")) == expected
    assert _unlikely_functions(built.path("user_first_gold")) == expected  # gold lays out alike
    # Laid out with the rest: nothing is unlikely, and nothing is taken to be.
    assert _compiled_unlikely(compiler, tmp_path, sources,
                              ("-O2", "-g0", "-DWARM_SLOW_PATH")) == set()
    assert _unlikely_functions(built.path("user_first_warm")) == set()


def _sources(machine: str) -> list[Path]:
    """The fixture's sources, in user_first's link order."""
    folder = scenario("slow_path", machine).scenario.folder
    return [folder / name for name in ("user.cpp", "lock.cpp", "journal.cpp", "main.cpp")]


def _linked(machine: str, folder: Path, *flags: str) -> Path:
    """The fixture's user_first linked here with ``flags`` (lld is found through -B,
    by the cross g++ too)."""
    driver_tools = folder / "bin"
    driver_tools.mkdir(exist_ok=True)
    if not (driver_tools / "ld.lld").exists():
        (driver_tools / "ld.lld").symlink_to(require_tool("ld.lld"))
    program = folder / ("user_first" + "".join(f.replace("=", "_").replace(",", "_")
                                               for f in flags))
    subprocess.run([toolchain(machine).cxx, "-O2", "-g0", *flags, f"-B{driver_tools}",
                    *map(str, _sources(machine)), "-o", str(program)],
                   check=True, capture_output=True)
    return program


@pytest.mark.parametrize("machine", MACHINES)
def test_lld_lays_the_unlikely_code_out_among_the_rest(machine: str, tmp_path: Path) -> None:
    """lld (unless told ``-z keep-text-section-prefix``) puts each object's text
    sections one after the other as they come, the unlikely ones among the rest:
    the layout the rule reads is not there, so nothing is taken to be unlikely and
    the slow path is followed, as in the build without ``cold``."""
    program = _linked(machine, tmp_path, "-fuse-ld=lld")
    compiled = _compiled_unlikely(toolchain(machine).cxx, tmp_path,
                                  _sources(machine), ("-O2", "-g0"))
    initializers = [symtab_address(program, name) for name in (
        "_GLOBAL__sub_I_user_value", "_GLOBAL__sub_I__ZN7JournalC2Ev")]
    # Laid out as the objects come: lock.cpp's cold functions between user.cpp's
    # initializer and journal.cpp's.
    assert all(min(initializers) < symtab_address(program, name) < max(initializers)
               for name in compiled), compiled
    assert _unlikely_functions(program) == set()
    found = risks(inits_of(program), *ORDER_KINDS)
    assert [(r["severity"], r["kind"], r["object"]) for r in found] == [
        ("error", "init-order", "journal")]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("linker", ["lld", "gold"])
def test_an_unlikely_section_kept_apart_is_the_unlikely_code(linker: str, machine: str,
                                                            tmp_path: Path) -> None:
    """Told ``-z keep-text-section-prefix``, lld and gold keep what gcc filed under
    ``.text.unlikely`` in a section of that name: that section is the unlikely code,
    and the cold slow path is not followed (GNU ld ignores the option)."""
    program = _linked(machine, tmp_path, f"-fuse-ld={linker}", "-Wl,-z,keep-text-section-prefix")
    with ElfFile.open(str(program)) as elf:
        assert elf.section_by_name(".text.unlikely") is not None
    compiled = _compiled_unlikely(toolchain(machine).cxx, tmp_path,
                                  _sources(machine), ("-O2", "-g0"))
    assert _unlikely_functions(program) == compiled
    assert risks(inits_of(program), *ORDER_KINDS) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_build_for_size_knows_no_unlikely_code(machine: str) -> None:
    """-Os aligns no function, initializers included: the layout the rule reads is not
    there (a startup helper may be unaligned too), so nothing is taken to be unlikely."""
    built = scenario("slow_path", machine)
    path = built.path("user_first_small")
    assert printed(built, "user_first_small") == QUIET
    with ElfFile.open(str(path)) as elf:
        assert not unlikely_code(elf, FunctionBounds(elf).starts)
    initializers = [symtab_address(path, name) for name in (
        "_GLOBAL__sub_I_user_value", "_GLOBAL__sub_I__ZN7JournalC2Ev")]
    above = [start for start in _function_starts(path) if start >= min(initializers)]
    assert any(address % 16 in (8, 12) for address in [*initializers, *above]), initializers


@pytest.mark.parametrize("machine", MACHINES)
def test_a_slow_path_named_as_abseil_names_it_is_not_followed(machine: str,
                                                               tmp_path: Path) -> None:
    """Built for size, the layout says nothing, and the slow path is followed: an error.
    Under abseil's name (``absl::Mutex::LockSlow``), it is known for a lock's slow
    path and not followed, in a program and in a library; stripped, the library
    keeps the name in .dynsym, the program loses it and the error comes back."""
    built = scenario("slow_path", machine)
    error = [("error", "init-order", "journal")]
    found = risks(inits_of(built.path("user_first_small")), *ORDER_KINDS)
    assert [(r["severity"], r["kind"], r["object"]) for r in found] == error
    program = built.path("user_first_small_named")
    assert printed(built, "user_first_small_named") == QUIET
    assert "_ZN4absl12lts_202605265Mutex8LockSlowEP4Lock" in {
        s.name for s in readelf_symbols(program) if s.type == "FUNC"}
    with ElfFile.open(str(program)) as elf:
        assert not unlikely_code(elf, FunctionBounds(elf).starts)
    assert risks(inits_of(program), *ORDER_KINDS) == []
    library = built.path("libuser_first_small_named.so")
    assert risks(inits_of(library), *ORDER_KINDS) == []
    assert order_risks_when_stripped(machine, library, tmp_path) == []
    stripped = inits_of(strip_unneeded(machine, program, tmp_path))
    assert [(r["severity"], r["kind"]) for r in risks(stripped, *ORDER_KINDS)] == [
        ("error", "init-order")]
