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


@pytest.mark.parametrize(("symbol", "lazy"), [
    ("_ZGVN5names4leftB5cxx11E", True),  # an inline variable's guard
    ("_ZGVN5FacetIcE2idE", True),  # a template static member's guard
    ("_ZGVZ8instancevE5value", True),  # a function-local static's guard
    ("_ZZ8instancevE5value", True),  # the function-local static
    ("_ZN5names4leftB5cxx11E", False),  # the inline variable itself
])
def test_guard_variables_are_set_only_by_what_they_guard(symbol: str, lazy: bool) -> None:
    """A guard byte is never built by an initializer, whichever part sets it first
    (xgboost 2.1.4's -flto program: 9 errors on ``tree_field`` guards otherwise)."""
    from elfpatch.analysis.risks import is_lazily_initialised

    assert is_lazily_initialised(symbol) is lazy
