"""A registry behind a function-local static pointer, filled under -flto
(``fixtures/lazy_registry``).

The accessor reads the pointer before its guard, on the way taken when the
map exists; what the code under the guard writes first is built on first
use.  Every build prints ``flags=21``, and ``inits`` must report no
init-order finding, stripped or not (the stripped -flto builds had a false
error or warning before).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_STRICT,
    MACHINES,
    asan_build,
    asan_reader,
    order_risks_when_stripped,
    printed,
    scenario,
    strip_unneeded,
)

PROGRAMS = ("flags_first_lto", "flags_last_lto", "flags_first", "flags_first_static")


def test_asan_sees_nothing() -> None:
    assert asan_reader(asan_build("lazy_registry") / "flags_first", ASAN_STRICT) is None


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_nothing_is_charged_stripped_or_not(machine: str, program: str,
                                            tmp_path: Path) -> None:
    built = scenario("lazy_registry", machine)
    if machine == "x86_64":
        assert printed(built, program) == {"flags": "21"}
    found = order_risks_when_stripped(machine, built.path(program), tmp_path)
    if program.endswith("_static") and machine != "x86_64":
        # aarch64's runtime, linked in after the program's objects, builds the exception
        # allocator's emergency pool from an initializer of its own, which a registration
        # reaches (on the way taken when malloc fails): a finding of the runtime's.
        found = [r for r in found if "emergency_pool" not in r["object"]]
    assert found == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_guard_known_by_its_code(machine: str, tmp_path: Path) -> None:
    """With the C++ runtime linked in and stripped, ``__cxa_guard_acquire`` is a function
    without a name: called with a byte the code tested, its result branched on, it is
    still the guard, and the static it guards is built on first use, as its ``_ZZ``
    and ``_ZGV`` names say in the unstripped program."""
    from elftools.elf.elffile import ELFFile

    from elfpatch.analysis import init_order
    from elfpatch.elf.file import ElfFile

    program = scenario("lazy_registry", machine).path("flags_first_static")
    with program.open("rb") as stream:
        named = {f"{symbol['st_value']:#x}"
                 for symbol in ELFFile(stream).get_section_by_name(".symtab").iter_symbols()
                 if symbol.name.startswith(("_ZZ5flags", "_ZGVZ5flags"))}
    stripped = str(strip_unneeded(machine, program, tmp_path))
    analysis = init_order.analyse_object_fully(ElfFile(Path(stripped).read_bytes(), stripped),
                                               stripped)
    lazy = set().union(*(item.effects.lazy for item in analysis.analysed))
    assert len(named) == 2 and named <= lazy
