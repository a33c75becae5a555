"""A CHECK whose failure message reads a global another TU builds later
(``fixtures/fatal_check``).

glog's ``LogMessageFatal`` destructor ends the process; glog ships it in a
library of its own, so nothing in the checking library's code says the
failure path dies, and a read made there counted: a false init-order error
(PaddlePaddle 3.3's ``libpaddle.so``: 63 link-order warnings through such
paths).  The oracle is what the program prints; ``inits`` must report no
order risk, stripped or not, on both machines.
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
from support.readelf import readelf_symbols


@pytest.mark.parametrize("machine", MACHINES)
def test_the_failure_path_of_a_check_is_no_finding(machine: str, tmp_path: Path) -> None:
    built = scenario("fatal_check", machine)
    assert printed(built, "check_first") == {"level": "3"}
    library = built.path("libcheck.so")
    # What the test is about: the failure path laid out in the function itself.
    names = {s.name for s in readelf_symbols(library) if s.table == ".symtab"}
    assert "_ZL13checked_levelv" in names and "_ZL13checked_levelv.cold" not in names
    assert order_risks_when_stripped(machine, library, tmp_path) == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_message_built_with_the_fatal_severity_ends_the_path(machine: str,
                                                                tmp_path: Path) -> None:
    """glog's ``LogMessage(file, line, severity)`` (as Arrow's ``ArrowLog`` and Ray's
    ``RayLog``) ends the process in its destructor only for FATAL: a failed check
    builds it with that constant, and the path dies there.  Built with a warning's
    severity instead, the message returns, and the read on its path counts."""
    built = scenario("fatal_check", machine)
    assert printed(built, "check_first_severity") == {"level": "3"}
    fatal = built.path("libcheck_severity.so")
    assert "_ZN6google10LogMessageC1EPKcii" in {
        s.name for s in readelf_symbols(fatal) if s.table == ".dynsym"}
    assert order_risks_when_stripped(machine, fatal, tmp_path) == []
    warned = risks(inits_of(built.path("libcheck_warning.so")), *ORDER_KINDS)
    assert [(r["severity"], r["kind"], r["object"]) for r in warned] == [
        ("error", "init-order", "_Z14component_nameB5cxx11")]
