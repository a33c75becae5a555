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
