"""A table built behind a hand-made once-only flag (``fixtures/once_flag``).

``ensure_table()`` returns at once when ``table_ready`` is set, else fills
the table in and sets the flag (to true, or to the table's address); two
initializers reach it, one after a look at the table.  The oracle is what
each build prints: the same in every order.  ``inits`` must charge neither
TU, stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    order_risks_when_stripped,
    printed,
    scenario,
)

# ``_pointer``: the flag is a pointer set to the table's address (nvJitLink 12.9's
# once-only set-up of its mutex has that shape: a false init-order error before).
# ``_block``: only a block runs while the pointer flag is null; what follows it runs
# on every call (NVIDIA's ptxas and cuobjdump set up a lock and a thread key so,
# from two initializers: a false init-order error before).  ``_fixed``: a
# fixed-address executable, where the flag is set with an immediate address.
PROGRAMS = ["beta_first", "alpha_first", "beta_first_lto", "beta_first_pointer",
            "alpha_first_pointer", "beta_first_block", "alpha_first_block",
            "beta_first_block_fixed"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_no_order_is_charged(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("once_flag", machine)
    assert printed(built, program) == {"count": "2", "first": "-1", "sum": "30"}
    assert order_risks_when_stripped(machine, built.path(program), tmp_path) == []


# ``_exported``: the pointer flag is reached through the GOT, and the stack
# protector checks the frame between the flag's load and its test, and on the
# way out (nvJitLink 12.9's once-only set-up on aarch64).
@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", ["libbeta_first.so", "libbeta_first_exported.so",
                                  "libbeta_first_block.so"])
def test_the_stripped_library_the_same(machine: str, name: str, tmp_path: Path) -> None:
    library = scenario("once_flag", machine).path(name)
    assert order_risks_when_stripped(machine, library, tmp_path) == []
