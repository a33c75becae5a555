"""A flag set once under a function-local static's guard (``fixtures/lazy_flag``).

``ensure_defaults_slow`` sets ``defaults_ready`` inside its static's guard,
after calling a function that builds a static of its own (released, and
aborted on the exception path).  ``a.cpp``'s initializer calls it directly,
``b.cpp``'s only when the flag is not set yet.  The oracle is what the
programs print: the same in both link orders.  ``inits`` must report no
order risk on the flag in either order, stripped or not; counting guards
instead of naming them, the inner static's abort gave the outer guard back,
and the flag looked constructed by ``a.cpp`` and registered into by
``b.cpp`` (a warning in one order, an error in the other).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded

LIBRARIES = ["liba_first.so", "libb_first.so", "liba_first_lto.so"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["a_first", "b_first"])
def test_both_orders_work(machine: str, program: str) -> None:
    output = printed(scenario("lazy_flag", machine), program)
    assert (output["a_length"], output["b_length"]) == ("40", "40")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("library", LIBRARIES)
def test_no_order_risk_on_the_flag(machine: str, library: str) -> None:
    record = inits_of(scenario("lazy_flag", machine).path(library))
    assert risks(record, *ORDER_KINDS) == []
    # Their code was read to its end (-flto merges the two initializers into one).
    coverage = record["coverage"]["initializers"]
    assert coverage == {"followed": 1 if "_lto" in library else 2, "complete": coverage["followed"]}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("library", LIBRARIES)
def test_stripped_the_same(machine: str, library: str, tmp_path: Path) -> None:
    copy = strip_unneeded(machine, scenario("lazy_flag", machine).path(library), tmp_path)
    assert risks(inits_of(copy), *ORDER_KINDS) == []


def test_each_guard_is_given_back_by_name() -> None:
    """Acquire, then release and abort (the exception path, laid out after it), of a
    static built inside another's guarded section: the outer guard stays held."""
    from elfpatch.analysis.effects.summary import GuardsHeld

    guards = GuardsHeld()
    for taken, guard in [(True, "outer"), (True, 0x4090), (False, 0x4090), (False, 0x4090)]:
        guards.event(taken, guard)
    assert len(guards) == 1
    guards.event(False, "outer")
    guards.event(False, "outer")
    assert len(guards) == 0
    # Guards not known by name are counted; an extra release never goes below zero.
    for taken in (True, True, False, False, False):
        guards.event(taken, None)
    assert len(guards) == 0
