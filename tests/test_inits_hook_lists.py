"""Registration lists whose heads every registration reads and replaces, under -flto
(``fixtures/hook_lists``).

z3's shape: inline registration variables push onto constant-initialized list
heads; gcc -flto inlines most into the merged initializer and keeps one TU's
initializer a function of its own.  The inlined pushes counted as the heads'
construction and the other TU's pushes as registrations before it: false
init-order errors or link-order warnings, by link order (z3-solver 5.4.1's
``z3``: 788 and 1,773).  The oracle is what the programs print; ``inits`` must
report no order risk on both machines, stripped or not.  Stripped, where the
heads have no name, a head lies next to the entries pushed onto it: each is an
object of its own (a push reads the head before storing the entry's address
there; a guard byte lies between an entry and the head laid out past it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, inits_of, order_risks_when_stripped, printed, scenario

PROGRAMS = ["modules_first_lto", "hooks_first_lto"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_no_push_is_a_construction(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("hook_lists", machine)
    assert printed(built, program) == {"started": "4"}
    path = built.path(program)
    # What the test is about: one TU's initializer kept apart from the merged one.
    record = inits_of(path)
    (merged,) = [entry for entry in record["initializers"] if entry.get("parts")]
    assert any(part["address"] is not None for part in merged["parts"])
    assert any(part["address"] is None for part in merged["parts"])
    assert order_risks_when_stripped(machine, path, tmp_path) == []
