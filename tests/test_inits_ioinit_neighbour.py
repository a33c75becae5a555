"""A template static member's guard byte next to a one-byte ``<iostream>`` object
(``fixtures/ioinit_neighbour``): stripped, the same findings as unstripped.

The guard of ``Facet<char>::id`` is tested and set with plain byte moves in
the -flto merged initializer, which later builds an ``std::ios_base::Init``
object laid out just before the guard.  An object that constructor builds is
one byte: nothing past it joins it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    printed,
    risks,
    same_when_stripped,
    scenario,
)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["facets_lto", "facets"])
def test_stripped_or_not_nothing_is_charged(machine: str, program: str,
                                            tmp_path: Path) -> None:
    built = scenario("ioinit_neighbour", machine)
    assert printed(built, program) == {"same": "1"}
    plain = same_when_stripped(machine, built.path(program), tmp_path)
    assert risks(plain, *ORDER_KINDS) == []
