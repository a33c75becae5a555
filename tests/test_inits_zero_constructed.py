"""A constructor that stores only zeros into .bss (``fixtures/zero_constructed``).

``reader.cpp`` reads ``hits`` early: it reads the loader's zero, which is
what the constructor stores.  ``registrar.cpp`` writes into it early: the
constructor wipes what it wrote.  The oracle is what the programs print
(``seen=1`` always; ``hits=0`` where the registration was lost).  ``inits``
must charge ``reader.cpp`` with nothing and report ``registrar.cpp`` exactly
where the program shows the bug, in a program and in a library (where the
object is reached through the GOT), stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded


def findings(path: Path) -> list[tuple[str, bool]]:
    """(severity, whether registrar.cpp is the one) of each order risk."""
    return [(r["severity"], "registrar.cpp" in r["message"])
            for r in risks(inits_of(path), *ORDER_KINDS)]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["counter_last", "counter_first"])
def test_only_the_early_write_is_reported(machine: str, program: str) -> None:
    built = scenario("zero_constructed", machine)
    output = printed(built, program)
    assert output["seen"] == "1"
    expected = "error" if output["hits"] == "0" else "warning"
    assert findings(built.path(program)) == [(expected, True)]


@pytest.mark.parametrize("machine", MACHINES)
def test_in_a_library_and_stripped(machine: str, tmp_path: Path) -> None:
    library = scenario("zero_constructed", machine).path("libcounter_last.so")
    assert findings(library) == [("error", True)]
    for program in (library, scenario("zero_constructed", machine).path("counter_last")):
        copy = strip_unneeded(machine, program, tmp_path)
        assert [severity for severity, _ in findings(copy)] == ["error"], program.name
