"""A long NOP reads nothing (``fixtures/loop_padding``).

gcc pads a loop's head with a long NOP whose memory operand names a register
(``nopl 0x0(%rax,%rax,1)``); where that register holds a global's address, the
operand was taken for a read of it.  A table built in a loop then read itself
before its construction: in an -flto build, "reads settings before the code
inlined after it constructs it", a false init-order error (PySciPOpt 6.3's
``libscip``: 3, on SoPlex's parameter tables).  The oracle is what the
program prints; ``inits`` must report no order risk, stripped or not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    merged_initializer,
    order_risks_when_stripped,
    printed,
    scenario,
)

PRINTED = {"value": "3", "name": "first", "greeting": "hello, world"}
# A long NOP whose operand is based on the register the table's loops walk it with.
_PADDING = re.compile(r"\bnop[wl]?\s+(?:0x0)?\(%rax")


@pytest.mark.parametrize("machine", MACHINES)
def test_a_long_nop_reads_nothing(machine: str, tmp_path: Path) -> None:
    built = scenario("loop_padding", machine)
    assert printed(built, "padded_lto") == PRINTED
    path = built.path("padded_lto")
    if machine == "x86_64":  # what the test is about: the padding, where %rax is the table
        assert _PADDING.search(merged_initializer(path))
    assert order_risks_when_stripped(machine, path, tmp_path) == []
