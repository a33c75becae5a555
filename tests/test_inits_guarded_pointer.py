"""A lock reached through a function-local static pointer (``fixtures/guarded_pointer``).

``on_shutdown()`` keeps a ``Mutex`` behind ``static Mutex* mutex = new Mutex``
and locks it; ``Mutex::lock`` takes ``global_lock``, which ``lock.cpp``'s
initializer builds (a store of zero).  gcc lays the guarded construction out
after the code that uses the pointer: that code is not the construction.
ASan's init-order checker is the oracle: it stops in ``early.cpp`` when it
runs first, and the run is clean the other way round.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_DEFAULT,
    MACHINES,
    asan_build,
    asan_reader,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
)

ORDER_KINDS = ("init-order", "link-order-dependence")


@pytest.mark.parametrize(("program", "reader"), [("early_first", "early.cpp"),
                                                 ("lock_first", None)])
def test_asan_agrees(program: str, reader: str | None) -> None:
    assert printed(scenario("guarded_pointer"), program) == {"used": "1", "word": "0"}
    assert asan_reader(asan_build("guarded_pointer") / program, ASAN_DEFAULT) == reader


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "severity", "kind"), [
    ("early_first", "error", "init-order"),
    ("lock_first", "warning", "link-order-dependence")])
def test_the_lock_is_charged_stripped_or_not(machine: str, program: str, severity: str,
                                            kind: str, tmp_path: Path) -> None:
    path = scenario("guarded_pointer", machine).path(program)
    (found,) = risks(same_when_stripped(machine, path, tmp_path), *ORDER_KINDS)
    assert (found["severity"], found["kind"]) == (severity, kind)
    assert "early.cpp writes into global_lock" in inits_of(path)["risks"][0]["message"]
    assert found["via"] == ["on_shutdown()", "Mutex::lock()"]
    if severity == "error":
        assert "only stores zeros" in found["message"] and "constinit" in found["message"]

