"""C++17 inline variables under -flto (``fixtures/inline_constants``).

gcc -flto moves each guarded construction of an inline variable past the
merged initializer's return and jumps back; every read still comes after
it.  The program prints the same in every build; ``inits`` must report no
init-order finding (the stripped -flto builds are a known gap: README).
"""

from __future__ import annotations

import pytest
from support.inits import inits_of, printed, risks, scenario

ORDER_KINDS = ("init-order", "link-order-dependence")


@pytest.mark.parametrize("program", ["first_lto", "second_lto", "first"])
def test_nothing_is_charged(program: str) -> None:
    """x86-64: the guard byte's test and set are read off the instructions."""
    built = scenario("inline_constants")
    assert printed(built, program) == {"both": "91", "twice": "90"}
    assert risks(inits_of(built.path(program)), *ORDER_KINDS) == []
