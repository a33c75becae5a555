"""A table in large data, reached as the GOT's address plus an offset
(``fixtures/large_data``, x86-64's medium code model).

``big.cpp`` builds ``rows`` with stores to ``[offset + GOT]``; ``reader.cpp``
reads it.  The walk took a memory operand's base register alone: with the
offset in the base it saw no store (the bug went unreported), with the GOT's
address there it charged the stores to what lies past the GOT (libcufft.so.11:
1,287 false errors).  The oracle is what each program prints: ``seen=0``
where ``reader.cpp`` runs first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import order_risks_when_stripped, printed, scenario
from support.readelf import symtab_address, tu_initializer

PROGRAMS = {"reader_first": ("error", "init-order", "0"),
            "table_first": ("warning", "link-order-dependence", "3")}


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_read_of_the_table_is_reported_stripped_or_not(program: str,
                                                            tmp_path: Path) -> None:
    built = scenario("large_data")
    severity, kind, seen = PROGRAMS[program]
    assert printed(built, program) == {"first": "3", "seen": seen}
    path = built.path(program)
    found = order_risks_when_stripped("x86_64", path, tmp_path)
    assert [(r["severity"], r["kind"], r["reader_address"], r["object_address"])
            for r in found] == [(severity, kind, tu_initializer(path, "first_seen"),
                                 symtab_address(path, "rows"))], found
