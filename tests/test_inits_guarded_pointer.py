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
    ORDER_KINDS,
    asan_build,
    asan_reader,
    inits_of,
    order_risks_when_stripped,
    printed,
    risks,
    same_when_stripped,
    scenario,
)


@pytest.mark.parametrize(("program", "reader"), [("early_first", "early.cpp"),
                                                 ("lock_first", None),
                                                 ("priority_users", "priority.cpp")])
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
    (found,) = order_risks_when_stripped(machine, path, tmp_path)
    assert (found["severity"], found["kind"]) == (severity, kind)
    assert "early.cpp writes into global_lock" in inits_of(path)["risks"][0]["message"]
    assert found["via"] == ["on_shutdown()", "Mutex::lock()"]
    if severity == "error":
        assert "only stores zeros" in found["message"] and "constinit" in found["message"]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_priority_initializer_is_charged(machine: str, tmp_path: Path) -> None:
    """``priority.cpp`` takes the lock at init_priority 101, before every default-
    priority initializer; ``early.cpp`` comes before ``lock.cpp`` in link order."""
    path = scenario("guarded_pointer", machine).path("priority_users")
    found = order_risks_when_stripped(machine, path, tmp_path)
    assert {(r["severity"], r["kind"]) for r in found} == {("error", "init-order")}
    assert sorted(r["message"].partition(" writes into ")[0] for r in found) == [
        "early.cpp", "priority.cpp"]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_merged_priority_initializer_is_charged(machine: str, tmp_path: Path) -> None:
    """protoc's -flto shape: gcc merges the two priority-101 TUs into one function,
    which takes the lock (a read, then a write) before the merged default-priority
    function stores its zero.  Its write is not a construction of the lock: the
    other function surely builds it.  Before, the merge's write counted as the
    construction, and the unstripped build had no finding (its stripped copy,
    where nothing says the function is a merge, had the error).  aarch64's stripped
    copy is not held to it: the merge reaches the lock, the counter and the guard
    from one base register, and without symbols they are taken for one object."""
    built = scenario("guarded_pointer", machine)
    assert printed(built, "priority_users_lto") == {"used": "1", "word": "0"}
    path = built.path("priority_users_lto")
    record = same_when_stripped(machine, path, tmp_path) if machine == "x86_64" \
        else inits_of(path)
    (found,) = risks(record, *ORDER_KINDS)
    assert (found["severity"], found["kind"]) == ("error", "init-order")
    assert found["message"].startswith("part 1 of _sub_I_00101_0.0 writes into global_lock")
    assert found["constructed_by"].startswith("_sub_I_65535_")
    # Each merge's name gives its priority (65535: the default).
    priorities = {entry["symbol"]: entry["priority"] for entry in inits_of(path)["initializers"]
                  if entry["symbol"] and entry["symbol"].startswith("_sub_I_")}
    assert priorities == {"_sub_I_00101_0.0": 101, "_sub_I_65535_1.1": None}
