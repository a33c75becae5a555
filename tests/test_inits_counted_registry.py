"""A registry whose TU looks at it, then builds it (``fixtures/counted_registry``).

The initializer that registers a registry's destructor counts its entries
first, then builds it: it is the constructor, and another TU's registration
before it is lost.  Whether a destructor registered is a construction is
decided by what the initializer's own code stores (``fixtures/name_table``:
a table filled only through calls is built by no one); taking the count for
the first touch missed this bug.  The oracle is what the programs print:
the registration lost in ``plugin_first``, kept in ``registry_first``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario

# program: (what it prints, the finding expected)
PROGRAMS = {
    "plugin_first": ({"seen_first": "1", "entries": "0"}, ("error", "init-order")),
    "registry_first": ({"seen_first": "0", "entries": "1"},
                       ("warning", "link-order-dependence")),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_lost_registration_is_reported(machine: str, program: str,
                                           tmp_path: Path) -> None:
    expected_output, expected_risk = PROGRAMS[program]
    built = scenario("counted_registry", machine)
    assert printed(built, program) == expected_output
    found = order_risks_when_stripped(machine, built.path(program), tmp_path)
    assert [(r["severity"], r["kind"]) for r in found] == [expected_risk], found
    assert "entries" in found[0]["object"]
