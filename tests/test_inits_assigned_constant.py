"""A constant-initialized local global that another TU's initializer assigns
(``fixtures/assigned_constant``).

``setup.cpp``'s initializer stores into ``levels.cpp``'s ``min_level`` through
``set_level``, a function of ``levels.cpp``; ``reader.cpp``'s reads it first.
The program prints the 2 it was initialized to: nothing is read before it is
built, and ASan has nothing to say.  The symbol table's STT_FILE entries say
``min_level`` is ``levels.cpp``'s, and a TU's initializer builds only its own
objects, so ``setup.cpp``'s store is an update.  Before, it was taken for the
construction: a false init-order error (jaxlib 0.10.2's ``libjax_common.so``:
130 of them, and 10 link-order warnings, all about absl's ``min_log_level``,
which ``logging_initializer.cc`` sets through ``absl::SetMinLogLevel``).
Built at run time by ``levels.cpp`` instead (``dynamic_level``), the read is
the real bug, and stays an error.
"""

from __future__ import annotations

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario
from support.readelf import symtab_address

LEVEL = "_ZN12_GLOBAL__N_19min_levelE"
# program: (what reader.cpp sees, the errors and who constructs the level there)
PROGRAMS = {
    "reader_first": ("2", []),
    "dynamic_level": ("0", ["levels.cpp"]),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_an_assignment_from_another_file_is_no_construction(machine: str,
                                                            program: str) -> None:
    built = scenario("assigned_constant", machine)
    seen, constructors = PROGRAMS[program]
    assert printed(built, program) == {"early_level": seen, "final_level": "4"}
    path = built.path(program)
    found = risks(inits_of(path), *ORDER_KINDS)
    errors = [r for r in found if r["severity"] == "error"]
    assert [r["message"].split(" constructs it")[0].rsplit(" before ", 1)[1]
            for r in errors] == constructors, found
    for risk in errors:
        assert risk["object_address"] == symtab_address(path, LEVEL)
        assert risk["message"].startswith("reader.cpp reads ")
