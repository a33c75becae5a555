"""Guarded initializations in the initializer's split-off part (``fixtures/cold_guards``).

gcc may move a guarded initialization into the function's ``.cold`` part,
below it: the guard's test jumps down, the code sets the guard, builds and
jumps back up.  Swept after the function's own code, that construction came
after the read that follows the branch, so another initializer that builds
the same object without a detour counted as its constructor (TVM 0.27's
``libtvm_compiler.so``: 70 false init-order errors).  The oracle is what the
program prints, and the disassembly that shows the shape; the initializer's
first touch of each index it allocates must be the allocation's store.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario
from support.tools import require_tool

from elfpatch.analysis.init_order import analyse_object_fully
from elfpatch.elf.file import ElfFile

INDICES = ("_ZN9TypeIndexI5AlphaE5valueE", "_ZN9TypeIndexI4BetaE5valueE")


@pytest.mark.parametrize("machine", MACHINES)
def test_a_guarded_initialization_in_the_cold_part_runs_where_it_is_jumped_to(
        machine: str, tmp_path: Path) -> None:
    built = scenario("cold_guards", machine)
    assert printed(built, "one_first") == {"alpha": "100", "beta": "101", "gamma": "202"}
    path = built.path("one_first")
    assert order_risks_when_stripped(machine, path, tmp_path) == []
    if machine != "x86_64":  # what the test is about: x86-64's split-off detours
        return
    listing = subprocess.run([require_tool("objdump"), "-d", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
    assert "je " in listing and "<_GLOBAL__sub_I_first_value.cold" in listing
    with ElfFile.open(path) as elf:
        analysis = analyse_object_fully(elf, str(path))
    (first,) = [item for item in analysis.analysed if item.label == "_GLOBAL__sub_I_first_value"]
    # Objects of a program's own are known by their symbol's address.
    keys = [f"{address:#x}" for address in symbol_addresses(path, INDICES)]
    assert [first.effects.written_first(key) for key in keys] == [True, True]


def symbol_addresses(path: Path, names: tuple[str, ...]) -> list[int]:
    """The addresses ``nm`` gives for ``names`` in ``path``, in that order."""
    listing = subprocess.run([require_tool("nm"), str(path)], capture_output=True, text=True,
                             check=True).stdout
    found = {parts[2]: int(parts[0], 16) for parts in map(str.split, listing.splitlines())
             if len(parts) == 3}
    return [found[name] for name in names]
