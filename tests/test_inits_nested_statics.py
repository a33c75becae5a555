"""A function-local static's destructor is registered once, by the first initializer.

``fixtures/nested_statics``: two TUs reach an outer static (``catalog()``), whose
constructor reaches an inner one (``names()``); a TU run last reaches the inner
one alone.  Every TU's code registers both destructors as far as its own code
goes, yet at run time only the first initializer does, inner first, so the
outer one's destructor reads a live inner object (``names_alive_at_catalog_exit=1``).
Taking each TU's registration for one that happens put the last TU's second
registration of the inner object after the outer's: a false destruction-order
error, as on nvJitLink 12.9 (22 of them, each checked in a real process: the
inner destructor ran last).  When the outer's constructor does not use the
inner one, the last TU really builds it after, and the error is real (``=0``).
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

ORDER = "destruction-order"
NAMES = "_ZZ5namesvE9the_names"
CATALOG = "_ZZ7catalogvE11the_catalog"
# program: (what the catalog's destructor sees, the errors, who registers each static)
PROGRAMS = {
    "nested": ("1", [], {CATALOG: "first.cpp", NAMES: "first.cpp"}),
    "nested_calls": ("1", [], {CATALOG: "first.cpp", NAMES: "first.cpp"}),
    "lazy_names": ("0", [(ORDER, NAMES)], {CATALOG: "first.cpp", NAMES: "late.cpp"}),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_destruction_order_of_statics_several_tus_reach(machine: str, program: str,
                                                        tmp_path: Path) -> None:
    built = scenario("nested_statics", machine)
    alive, expected, _registrars = PROGRAMS[program]
    assert printed(built, program) == {"main": "done", "names_alive_at_catalog_exit": alive}
    record = same_when_stripped(machine, built.path(program), tmp_path)
    assert errors(record) == expected
    if expected:
        (risk,) = risks(record, ORDER)
        assert risk["reader"].startswith("_ZN7CatalogD")
        assert "late.cpp registered that destructor after first.cpp registered this one" \
            in risk["message"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_each_static_is_registered_once_by_the_first_tu(machine: str, program: str) -> None:
    """One exit-time-destructor warning per static, the first initializer to reach it
    its registrar: not one per TU whose code reaches it."""
    built = scenario("nested_statics", machine)
    found = risks(inits_of(built.path(program)), DESTRUCTOR)
    registrars = {r["object"]: r["message"].partition(" registers ")[0] for r in found}
    assert len(found) == len(registrars) == 2, found
    assert registrars == PROGRAMS[program][2]
