"""A constant-initialized table whose destructor its TU registers
(``fixtures/name_table``).

ZDoom's name table has no constructor: its bytes are zeros in the file, it
is filled on first use, and its TU's initializer only registers its
destructor.  That registration counted as the table's construction, so the
names other TUs' initializers add before it were "written into (a
registration) before ... constructs it, and the constructor then discards
... what was written": a false init-order error or link-order warning, by
link order (ViZDoom 1.3's ``vizdoom``: 9 errors and 99 warnings).  The oracle
is what the programs print; ``inits`` must report no order risk, stripped or
not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario

PROGRAMS = ["actors_first", "names_first"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_a_registered_destructor_builds_nothing(machine: str, program: str,
                                                tmp_path: Path) -> None:
    built = scenario("name_table", machine)
    assert printed(built, program) == {"names": "3", "player": "1", "monster": "1"}
    assert order_risks_when_stripped(machine, built.path(program), tmp_path) == []
