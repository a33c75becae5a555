"""A lock taken where nothing is inserted holds no entry (``fixtures/creation_lock``).

Both TUs create an object on first use through ``made_once``, which takes a
creation lock made on first use (LLVM's ``ManagedStatic``); ``alpha.cpp`` also
inserts into a map of its own, not under that lock.  A registration takes its
registry's lock around its insertion, so a lock counted as a registry when the
code inserts anywhere made ``alpha.cpp`` register into the creation lock and
``beta.cpp``, which takes it and inserts nothing, look it up: a false
``registration-order`` error where ``beta.cpp`` runs first, a false
link-order warning where it runs second.  The oracle is what the programs
print: the same in both orders (both objects made).  A lock counts only where
the function taking it inserts, itself or through what it calls; the gflags
shape (a registry's own lock around its map's insertion and look-up) is
``fixtures/early_lookup``'s, still found there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded

KINDS = (*ORDER_KINDS, "registration-order")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["beta_first", "alpha_first"])
def test_a_creation_lock_is_no_registry(machine: str, program: str) -> None:
    built = scenario("creation_lock", machine)
    assert printed(built, program) == {"managed": "2", "alpha": "1", "beta": "1"}
    assert risks(inits_of(built.path(program)), *KINDS) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_in_a_library_and_stripped(machine: str, tmp_path: Path) -> None:
    library = scenario("creation_lock", machine).path("libbeta_first.so")
    assert risks(inits_of(library), *KINDS) == []
    assert risks(inits_of(strip_unneeded(machine, library, tmp_path)), *KINDS) == []
