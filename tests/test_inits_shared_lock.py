"""A lock every initializer takes (``fixtures/shared_lock``): built by none.

``table_lock`` is constant-initialized; ``alpha.cpp`` and ``beta.cpp`` take
it from their initializers, ``beta.cpp`` after reading its word.  The lock's
``acquire`` reads the word first, then writes it, and waits through a
function pointer (code not followed).  The oracle is what each build prints:
the same in every order.  ``inits`` must charge neither TU, stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits_of,
    order_risks_when_stripped,
    printed,
    risks,
    scenario,
)

from elfpatch.analysis.effects.summary import USE_READ, USE_READ_FIRST, USE_WRITE, unseen_use

PROGRAMS = ["beta_first", "alpha_first", "beta_first_lto"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_no_order_is_charged(machine: str, program: str) -> None:
    built = scenario("shared_lock", machine)
    assert printed(built, program) == {"entries": "2", "locked": "0", "sum": "30"}
    assert risks(inits_of(built.path(program)), *ORDER_KINDS) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_the_stripped_library_the_same(machine: str, tmp_path: Path) -> None:
    library = scenario("shared_lock", machine).path("libbeta_first.so")
    assert order_risks_when_stripped(machine, library, tmp_path) == []


def test_what_code_not_followed_does_first() -> None:
    """A pointer handed on (not as the object acted on) is read, first; as the object
    acted on, it may be built, which is no read first."""
    assert unseen_use(1) & USE_READ_FIRST and unseen_use(1) & USE_READ
    assert not unseen_use(0) & USE_READ_FIRST
    assert not unseen_use(0) & USE_WRITE
