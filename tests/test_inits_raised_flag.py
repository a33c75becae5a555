"""A flag that says "built", raised by whoever builds first (``fixtures/raised_flag``).

protobuf's ``InitProtobufDefaults()`` tests ``init_protobuf_defaults_state`` and
builds the defaults on first use, which sets it; an eager initializer sets it
too.  Each test was taken for a look-up in a registry built on first use, and
the eager set for a registration into it: 430 false registration-order errors
on mediapipe 1.2's ``libmediapipe.so``.  The oracle is what the programs print,
the same in both link orders; ``inits`` must report no order or registration
risk, stripped or not, on both machines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, printed, risks, same_when_stripped, scenario


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["readers_first", "defaults_first"])
def test_a_raised_flag_is_no_registry(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("raised_flag", machine)
    assert printed(built, program) == {"ready": "1", "alpha": "defaults", "beta": "defaults"}
    record = same_when_stripped(machine, built.path(program), tmp_path)
    assert risks(record, *ORDER_KINDS, "registration-order") == []
