"""Template static members bound to a singleton at start-up, under -flto
(``fixtures/singleton_members``).

boost::serialization's ``singleton<T>::m_instance`` is a reference each TU that
uses it binds behind a guard byte.  gcc -flto moves each binding past the merged
initializer's return, where it runs when the guard is clear and jumps back; it
stores the previous value computed between the guard's compare and its branch,
and inlines the accessor, whose own static is built further down still.  The
compare was not taken for a guard's, nor the binding for a detour: "part 1
reads singleton<Gamma>::m_instance before part 3 constructs it", false errors
(GTSAM 4.3's ``gtsam_unstable`` module: 1).  The oracle is what the programs
print; ``inits`` must report no order risk, stripped or not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    merged_initializer,
    order_risks_when_stripped,
    printed,
    scenario,
)

from elfpatch.analysis.init_order import analyse_object_fully
from elfpatch.elf.file import ElfFile

PROGRAMS = ["three_first_lto", "one_first_lto"]
PRINTED = {"first": "41", "second": "42", "third": "43", "fourth": "44",
           "alpha": "5", "beta": "4", "gamma": "5", "delta": "5"}
# A guard byte's compare, a move or more, then the branch.
_SPLIT_TEST = re.compile(r"cmpb\s+\$0x0,[^\n]*\n(?:[^\n]*\bmov[^\n]*\n)+[^\n]*\bje\b")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_a_bound_member_is_built_where_its_guard_is_tested(machine: str, program: str,
                                                           tmp_path: Path) -> None:
    built = scenario("singleton_members", machine)
    assert printed(built, program) == PRINTED
    path = built.path(program)
    if machine == "x86_64":  # what the test is about: moves between a guard's test and branch
        assert _SPLIT_TEST.search(merged_initializer(path))
    assert order_risks_when_stripped(machine, path, tmp_path) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_guard_reached_through_its_got_slot_is_a_guard(machine: str, tmp_path: Path) -> None:
    """In a shared library the guards have default visibility and are reached through
    their GOT slots (x86-64: ``mov slot(%rip), %rax; cmpb $0x0, (%rax); je``;
    aarch64: ``adrp``, ``ldr x2, [x2, #slot]``, ``ldr x3, [x2]``, ``tbz``); the
    binding below, which sets the guard through the same register, is a detour
    swept where it runs: each TU's initializer binds a member before it reads it.
    MindSpore 2.10's libraries had 572 false init-order errors of this kind."""
    built = scenario("singleton_members", machine)
    assert printed(built, "shared_host") == PRINTED
    library = built.path("libsingletons.so")
    assert order_risks_when_stripped(machine, library, tmp_path) == []
    with ElfFile.open(library) as elf:
        analysis = analyse_object_fully(elf, str(library))
    first = {item.label: item.effects for item in analysis.analysed}
    members = {"_GLOBAL__sub_I_three.cpp": ("Gamma", "Delta"),
               "_GLOBAL__sub_I_one.cpp": ("Alpha", "Beta")}
    for initializer, classes in members.items():
        for name in classes:
            member = f"_ZN9singletonI{len(name)}{name}E10m_instanceE"
            assert first[initializer].written_first(member), (initializer, member)
