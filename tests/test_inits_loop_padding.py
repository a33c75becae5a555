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
import subprocess
from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario
from support.tools import require_tool

PRINTED = {"value": "3", "name": "first", "greeting": "hello, world"}
# A long NOP whose operand is based on the register the table's loops walk it with.
_PADDING = re.compile(r"\bnop[wl]?\s+(?:0x0)?\(%rax")


def merged_initializer(path: Path) -> str:
    """The disassembly of the function -flto merged the initializers into."""
    objdump = require_tool("objdump")
    listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
    start = listing.index("<_sub_I_65535_0.0>:")
    return listing[start:listing.find("\n\n", start)]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_long_nop_reads_nothing(machine: str, tmp_path: Path) -> None:
    built = scenario("loop_padding", machine)
    assert printed(built, "padded_lto") == PRINTED
    path = built.path("padded_lto")
    if machine == "x86_64":  # what the test is about: the padding, where %rax is the table
        assert _PADDING.search(merged_initializer(path))
    assert order_risks_when_stripped(machine, path, tmp_path) == []
