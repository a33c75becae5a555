"""Look-ups and registrations that -flto inlines into one initializer
(``fixtures/lto_registry``).

gcc's link-time optimisation merges every TU's initializer into one function
and runs the TUs in an order of its choosing: a plugin's look-up inlined
before another TU's registrations finds nothing, and no second initializer
is left to pair it with.  Each TU's part fetches the registry from its
accessor again, so the look-up is the code after one fetch that only reads
the registry, the registration the code after a later one that inserts.
The oracle is what each program prints: ``found=0`` where the look-up ran
first.  The stripped copy must give the same findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, printed, risks, same_when_stripped, scenario

# Program -> (what it prints, the order findings expected: (severity, kind)).
PROGRAMS = {
    "ops_first_lto": ("0", [("error", "registration-order")]),
    "plugin_first_lto": ("1", []),
    "zlib_first_lto": ("0", [("error", "registration-order")]),
    # The registration's insertion is laid out after the look-up's fetch: it still
    # belongs to the registration.
    "reader_first_lto": ("1", []),
    "ops_first": ("1", [("warning", "link-order-dependence")]),
    "plugin_first": ("0", [("error", "registration-order")]),
}
KINDS = ("init-order", "link-order-dependence", "registration-order")


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_the_look_up_that_runs_first_is_reported(machine: str, program: str,
                                                 tmp_path: Path) -> None:
    built = scenario("lto_registry", machine)
    found, expected = PROGRAMS[program]
    if machine == "x86_64":
        assert printed(built, program) == {"found": found}
    record = same_when_stripped(machine, built.path(program), tmp_path)
    reported = risks(record, *KINDS)
    assert [(r["severity"], r["kind"]) for r in reported] == expected, reported


@pytest.mark.parametrize("machine", MACHINES)
def test_the_merged_initializer_is_the_reader(machine: str, tmp_path: Path) -> None:
    """The error names the merged initializer as the code that looks up, and the
    registry: the map the accessor returns (a function-local static)."""
    built = scenario("lto_registry", machine)
    record = same_when_stripped(machine, built.path("ops_first_lto"), tmp_path)
    (error,) = risks(record, "registration-order")
    assert error["reader"] == error["constructed_by"] == "_sub_I_65535_0.0"
    assert error["object"].startswith("_ZZ") and "operators" in error["object"], error
    assert "before the code inlined after it registers into it" in error["message"]
