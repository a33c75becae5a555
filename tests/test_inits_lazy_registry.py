"""A registry behind a function-local static pointer, filled under -flto
(``fixtures/lazy_registry``).

The accessor reads the pointer before its guard, on the way taken when the
map exists; what the code under the guard writes first is built on first
use.  Every build prints ``flags=21``, and ``inits`` must report no
init-order finding, stripped or not (the stripped -flto builds had a false
error or warning before).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_STRICT,
    MACHINES,
    asan_build,
    asan_reader,
    printed,
    risks,
    same_when_stripped,
    scenario,
)

ORDER_KINDS = ("init-order", "link-order-dependence")
PROGRAMS = ("flags_first_lto", "flags_last_lto", "flags_first")


def test_asan_sees_nothing() -> None:
    assert asan_reader(asan_build("lazy_registry") / "flags_first", ASAN_STRICT) is None


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_nothing_is_charged_stripped_or_not(machine: str, program: str,
                                            tmp_path: Path) -> None:
    built = scenario("lazy_registry", machine)
    if machine == "x86_64":
        assert printed(built, program) == {"flags": "21"}
    found = risks(same_when_stripped(machine, built.path(program), tmp_path), *ORDER_KINDS)
    assert found == []
