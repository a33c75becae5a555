"""A read four calls down, past eighty helpers (``fixtures/many_helpers``).

The walk follows at most 64 functions that call others; the helpers call
none, so they do not use up that budget before the way down to the read.
What each build prints is the oracle (``seen=0`` where ``early.cpp``'s
initializer read ``config_name`` before ``config.cpp`` built it), and ASan's
init-order checker for the builds without -flto.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_DEFAULT,
    MACHINES,
    asan_build,
    asan_reader,
    order_risks_when_stripped,
    printed,
    scenario,
)

# What each build does (x86-64 runs it: ``seen``), and what inits must find; -flto runs
# the TUs in reverse, and fixes the order it made (nothing to warn of).
EXPECTED = {
    "early_first": ("0", [("error", "init-order")]),
    "config_first": ("11", [("warning", "link-order-dependence")]),
    "early_first_lto": ("11", []),
    "config_first_lto": ("0", [("error", "init-order")]),
}


@pytest.mark.parametrize(("program", "reader"), [("early_first", "early.cpp"),
                                                 ("config_first", None)])
def test_asan_agrees_with_what_the_program_prints(program: str, reader: str | None) -> None:
    assert asan_reader(asan_build("many_helpers") / program, ASAN_DEFAULT) == reader


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", list(EXPECTED))
def test_the_read_past_the_helpers_is_found(machine: str, program: str,
                                            tmp_path: Path) -> None:
    built = scenario("many_helpers", machine)
    seen, expected = EXPECTED[program]
    if machine == "x86_64":
        assert printed(built, program) == {"seen": seen}
    found = order_risks_when_stripped(machine, built.path(program), tmp_path)
    assert [(r["severity"], r["kind"]) for r in found] == expected
    assert all(r["object"] == "_Z11config_nameB5cxx11" for r in found)
