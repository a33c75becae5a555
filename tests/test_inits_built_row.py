"""A global between two objects one initializer builds (``fixtures/built_row``).

Stripped, an address only read near one the code takes as a pointer is taken
for a member of that object.  ``between`` lies just past a 16-byte handle
whose builder stores its 16 bytes and goes on to the next handle: taken for
the first handle's member, a read of it by an earlier initializer was a false
init-order error (open3d 0.20's ``libOpen3D.so``: 98).  The oracle is what
the program prints; ``inits`` must report no order risk, stripped or not,
on both machines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario
from support.readelf import symtab_address


@pytest.mark.parametrize("machine", MACHINES)
def test_what_the_builder_skips_is_no_member(machine: str, tmp_path: Path) -> None:
    built = scenario("built_row", machine)
    assert printed(built, "reader_first") == {"seen_between": "0", "first": "first",
                                              "closed": "first"}
    path = built.path("reader_first")
    # The layout the test is about (what -fno-toplevel-reorder gives).
    first, between, second = (symtab_address(path, name) for name in
                              ("first_handle", "between", "second_handle"))
    assert first + 16 == between < second
    assert order_risks_when_stripped(machine, path, tmp_path) == []
