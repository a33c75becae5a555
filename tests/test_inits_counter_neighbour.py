"""Globals next to a nifty counter's one-byte init objects (``fixtures/counter_neighbour``).

A stripped file says nothing of how big an object is: an address only read,
near one the code takes as a pointer, is taken for a member of that object.
Next to one-byte init objects that put a pointer 7 bytes (aarch64: 8) past
one of them and the counter's counts past another, and the stripped copy had
four false destruction-order errors (NVIDIA's ``ptxas-blackwell``: one).  The
oracle is what the program prints, at exit too; ``inits`` must report no
destruction-order risk, stripped or not, on both machines, and its stripped
copy must see the counts, and the pointer where it lies a number of bytes past
the init object that is no multiple of 8, as objects of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    printed,
    risks,
    same_when_stripped,
    scenario,
    strip_unneeded,
)
from support.readelf import readelf_symbols, symtab_address


def _layout(path: Path) -> tuple[int, int, list[int], int, int]:
    """``late_init``, ``current``, every ``init_here``, ``users`` and ``noted``."""
    found = [s.value for s in readelf_symbols(path)
             if s.table == ".symtab" and s.name == "_ZN7logbookL9init_hereE"]
    return (symtab_address(path, "_ZL9late_init"), symtab_address(path, "_ZL7current"),
            found, symtab_address(path, "_ZN7logbookL5usersE"),
            symtab_address(path, "_ZN7logbookL5notedE"))


@pytest.mark.parametrize("machine", MACHINES)
def test_no_neighbour_is_taken_for_a_member(machine: str, tmp_path: Path) -> None:
    built = scenario("counter_neighbour", machine)
    assert printed(built, "early_first") == {"started": "1", "flushed": "1", "noted": "1"}
    path = built.path("early_first")
    # The layout the test is about (what -fno-toplevel-reorder gives).
    late_init, current, init_objects, users, noted = _layout(path)
    assert 0 < current - late_init <= 8
    assert any(0 < users - start < noted - start < 32 for start in init_objects)
    assert risks(same_when_stripped(machine, path, tmp_path), "destruction-order") == []


@pytest.mark.parametrize("machine", MACHINES)
def test_the_stripped_copy_sees_the_globals_apart(machine: str, tmp_path: Path) -> None:
    from elfpatch.analysis.init_order import analyse_object_fully
    from elfpatch.elf.file import ElfFile

    path = scenario("counter_neighbour", machine).path("early_first")
    late_init, current, _init_objects, users, noted = _layout(path)
    flusher = symtab_address(path, "_ZN7FlusherD1Ev")
    counter = symtab_address(path, "_ZN7logbook4InitD1Ev")
    stripped = strip_unneeded(machine, path, tmp_path)
    with ElfFile.open(str(stripped)) as elf:
        exit_code = analyse_object_fully(elf, str(stripped)).exit_code
    # One destructor for four objects: what it reads at a fixed address is its own.
    assert {hex(users), hex(noted)} <= set(exit_code[counter].reads)
    if (current - late_init) % 8:  # x86-64; aarch64 puts it 8 bytes past
        assert hex(current) in exit_code[flusher].reads
