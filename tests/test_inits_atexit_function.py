"""A function registered with ``atexit`` from an initializer (``fixtures/atexit_function``).

It destroys no object, so it is no exit-time destructor to leak; but it runs
at exit among the destructors, in the reverse order of registration, and what
it reads then is checked: linked before the string's TU, it is registered
first, runs last and reads the string destroyed (``farewell_intact=0``).

Each object links its own copy of libc's ``atexit`` (from libc_nonshared.a),
a local function that a stripped object no longer names.  Known by its code
(it hands its first argument to ``__cxa_atexit`` with no object), the
stripped program's findings are the unstripped one's; before, the function
registered was not known, and each call looked like a TU of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    DESTRUCTOR,
    MACHINES,
    errors,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
)

PREFIX = "_Z10log_prefixB5cxx11"
# program: (what farewell() sees at exit, the errors)
PROGRAMS = {
    "farewell_first": ("0", [("destruction-order", PREFIX)]),
    "prefix_first": ("1", []),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_an_atexit_function_reading_a_destroyed_string(machine: str, program: str,
                                                       tmp_path: Path) -> None:
    built = scenario("atexit_function", machine)
    intact, expected = PROGRAMS[program]
    assert printed(built, program) == {"main": "done", "farewell_intact": intact}
    record = same_when_stripped(machine, built.path(program), tmp_path)
    assert errors(record) == expected
    if expected:
        (risk,) = risks(record, "destruction-order")
        assert risk["reader"] == "_ZL8farewellv"
        assert "prefix.cpp registered that destructor after farewell.cpp registered this " \
            "one" in risk["message"]
    # The string is the one object destroyed at exit; farewell() destroys none.
    assert [r["object"] for r in risks(record, DESTRUCTOR)] == [PREFIX]
    # Stripped, each TU is one initializer still, not a merge of one part per call.
    stripped = inits_of(tmp_path / program)
    assert [entry for entry in stripped["initializers"] if "parts" in entry] == []
