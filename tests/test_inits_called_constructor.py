"""A global built by a call, read right after by its own TU (``fixtures/called_constructor``).

Nothing but the call says ``counter`` is built: no destructor, and no name for
the constructor once the program is stripped.  What the program prints and
ASan's init-order checker are the oracle: ``early.cpp`` linked first reads 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_DEFAULT,
    MACHINES,
    ORDER_KINDS,
    asan_build,
    asan_reader,
    inits_of,
    order_risks_when_stripped,
    printed,
    risks,
    scenario,
    strip_unneeded,
)


@pytest.mark.parametrize(("program", "early", "reader"), [("early_first", "0", "early.cpp"),
                                                          ("counter_first", "40", None)])
def test_the_oracles(program: str, early: str, reader: str | None) -> None:
    assert printed(scenario("called_constructor"), program) == {"first": "42", "early": early}
    assert asan_reader(asan_build("called_constructor") / program, ASAN_DEFAULT) == reader


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "severity", "kind"), [
    ("early_first", "error", "init-order"),
    ("counter_first", "warning", "link-order-dependence")])
def test_the_read_is_charged_stripped_or_not(machine: str, program: str, severity: str,
                                            kind: str, tmp_path: Path) -> None:
    path = scenario("called_constructor", machine).path(program)
    (found,) = order_risks_when_stripped(machine, path, tmp_path)
    assert (found["severity"], found["kind"], found["object"]) == (severity, kind, "counter")
    assert found["message"].startswith("early.cpp reads counter")


@pytest.mark.parametrize("machine", MACHINES)
def test_stripped_it_is_a_read_not_a_registration(machine: str, tmp_path: Path) -> None:
    """The stripped warning is worded as the unstripped one: ``early_value``, set from
    ``counter`` by an initializer that only reads ``counter``, is not its member."""
    path = scenario("called_constructor", machine).path("counter_first")
    (found,) = risks(inits_of(strip_unneeded(machine, path, tmp_path)), *ORDER_KINDS)
    assert " reads 0x" in found["message"] and "registration" not in found["message"]
