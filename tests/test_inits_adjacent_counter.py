"""A counter right after an object in .bss, bumped by every option
(``fixtures/adjacent_counter``), in stripped builds.

``registry.cpp``'s initializer builds ``name`` and bumps ``counted``, which
lies right after it; ``options.cpp``'s options bump ``counted`` too;
``reader.cpp`` really reads ``name`` early.  The oracle is what the programs
print (``counted=3`` always; ``early_length=0`` where the read came first).
Stripped, the objects are bare addresses: ``counted`` must stay an object of
its own, so that ``options.cpp`` is charged with nothing and ``reader.cpp``
is the one finding, an error exactly where the program shows the bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded
from support.readelf import readelf_symbols

# Each output, with the program whose run tells whether the read came first.
OUTPUTS = [("options_first", "options_first"), ("registry_first", "registry_first"),
           ("liboptions_first.so", "options_first"), ("libregistry_first.so", "registry_first")]


def reader_initializer(path: Path) -> int:
    """reader.cpp's initializer: gcc names it after the TU's first global, or its file."""
    return next(s.value for s in readelf_symbols(path) if s.table == ".symtab"
                and s.name in ("_GLOBAL__sub_I_early_length", "_GLOBAL__sub_I_reader.cpp"))


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("output", "program"), OUTPUTS)
def test_the_counter_is_no_member_of_the_name(machine: str, output: str, program: str,
                                              tmp_path: Path) -> None:
    built = scenario("adjacent_counter", machine)
    shown = printed(built, program)
    assert shown["counted"] == "3"
    original = built.path(output)
    found = risks(inits_of(strip_unneeded(machine, original, tmp_path)), *ORDER_KINDS)
    expected = "error" if shown["early_length"] == "0" else "warning"
    assert [(r["severity"], r["reader_address"]) for r in found] == \
        [(expected, reader_initializer(original))], found
