"""An object with a dynamic member and a constant part (``fixtures/constant_part``):
gcc writes the constant part into the file, and a read of it before the object's
initializer runs sees the right numbers.  Found in diamond 2.1, whose score
matrices are built so: read in the reversed link order, the numbers a
``Reduction`` sums are there (gdb at the reader's entry: the vector still empty,
the frequencies in place); ASan, which poisons the whole object, reported it,
and so did ``inits``, keyed by the object.

The oracle is what each program prints: the total of the constant part is right
in both link orders, the size of the vector is 0 when its reader runs first.
``inits`` reports the vector's reader alone, in the program and in the library
(where the matrix is exported and reached through the GOT), stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario

GAPS_READ = ("gaps.cpp", "blosum")


@pytest.mark.parametrize("machine", MACHINES)
def test_the_constant_part_is_right_in_either_order(machine: str) -> None:
    built = scenario("constant_part", machine)
    assert printed(built, "readers_first") == {"background_total": "1.000",
                                               "parameters_seen": "0"}
    assert printed(built, "matrix_first") == {"background_total": "1.000",
                                              "parameters_seen": "3"}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "severity", "kind"), [
    ("readers_first", "error", "init-order"),
    ("matrix_first", "warning", "link-order-dependence"),
    ("libreaders_first.so", "error", "init-order"),
])
def test_only_the_dynamic_part_is_read_too_early(machine: str, program: str, severity: str,
                                                 kind: str, tmp_path: Path) -> None:
    built = scenario("constant_part", machine)
    found = order_risks_when_stripped(machine, built.path(program), tmp_path)
    assert [(r["severity"], r["kind"], r["object"]) for r in found] == [
        (severity, kind, "blosum")]
    assert "gaps.cpp" in found[0]["message"] and "reduction.cpp" not in found[0]["message"]
