"""C++17 inline variables under -flto (``fixtures/inline_constants``).

gcc -flto moves each guarded construction of an inline variable past the
merged initializer's return and jumps back; every read still comes after
it.  The program prints the same in every build; ``inits`` must report no
init-order finding, stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
    strip_unneeded,
)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["first_lto", "second_lto", "first"])
def test_nothing_is_charged(machine: str, program: str) -> None:
    """The guard's test and set are read off the instructions: x86-64's ``cmp byte ptr
    [guard], 0`` and ``mov byte ptr [guard], 1``, aarch64's ``ldr x1, [x2, #0x10]``,
    ``tbz w1, #0`` and ``str x3, [x2, #0x10]`` with x3 = 1 (before, each aarch64 -flto
    build had false init-order errors)."""
    built = scenario("inline_constants", machine)
    if machine == "x86_64":
        assert printed(built, program) == {"both": "91", "twice": "90", "third": "51"}
    assert risks(inits_of(built.path(program)), *ORDER_KINDS) == []


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["first_lto", "second_lto", "first"])
def test_nothing_is_charged_when_stripped(machine: str, program: str, tmp_path: Path) -> None:
    """Without symbols, the guard byte right past the string it guards is an object of
    its own (before, it was taken for the string's member, so the string was read
    before it was built: 2 false errors in each -flto build), and the string's
    constructor, known only by its code, is its first touch."""
    built = scenario("inline_constants", machine)
    stripped = same_when_stripped(machine, built.path(program), tmp_path)
    assert risks(stripped, *ORDER_KINDS) == []


def test_guard_bytes_are_known_by_code(tmp_path: Path) -> None:
    """A byte tested against zero and set to 1 where it is zero is a guard, built by
    no one, with or without its ``_ZGV`` name."""
    from elftools.elf.elffile import ELFFile

    from elfpatch.analysis import init_order
    from elfpatch.elf.file import ElfFile

    built = scenario("inline_constants")
    with built.path("first_lto").open("rb") as stream:
        guards = {f"{symbol['st_value']:#x}"
                  for symbol in ELFFile(stream).get_section_by_name(".symtab").iter_symbols()
                  if symbol.name.startswith("_ZGVN5names")}
    path = str(strip_unneeded("x86_64", built.path("first_lto"), tmp_path))
    elf = ElfFile(Path(path).read_bytes(), path)
    lazy = set().union(*(item.effects.lazy
                         for item in init_order.analyse_object_fully(elf, path).analysed))
    assert len(guards) == 2 and guards <= lazy


@pytest.mark.parametrize(("symbol", "lazy"), [
    ("_ZGVN5names4leftB5cxx11E", True),  # an inline variable's guard
    ("_ZGVN5FacetIcE2idE", True),  # a template static member's guard
    ("_ZGVZ8instancevE5value", True),  # a function-local static's guard
    ("_ZZ8instancevE5value", True),  # the function-local static
    ("_ZN5names4leftB5cxx11E", False),  # the inline variable itself
])
def test_guard_variables_are_set_only_by_what_they_guard(symbol: str, lazy: bool) -> None:
    """A guard byte is never built by an initializer, whichever part sets it first
    (xgboost 2.1.4's -flto program: 9 errors on ``tree_field`` guards otherwise)."""
    from elfpatch.analysis.risks import is_lazily_initialised

    assert is_lazily_initialised(symbol) is lazy
