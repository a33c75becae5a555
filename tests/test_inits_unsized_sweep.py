"""Initializers of unknown extent in a stripped file (``fixtures/unsized_sweep``).

Built without unwind tables and stripped, no function's size is known.
``a.cpp``'s initializer is one tail jump to a function in ``.text``, past the
other initializers and ``main``: swept until that jump's target, it was
charged with what they do (warp 1.19's ``warp.so``: an initializer charged
with the next one's construction).  ``c.cpp`` builds ``config`` by handing it
to the string's move constructor and ``b.cpp`` reads its size, 8 bytes past
its start: the stripped copy took that for an object of its own and lost the
real bug.  The oracle is what each program prints: ``seen=0`` where ``b.cpp``
runs first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, order_risks_when_stripped, printed, scenario, strip_unneeded
from support.readelf import tu_initializer

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile

PROGRAMS = {"config_last": ("error", "init-order", "0"),
            "config_first": ("warning", "link-order-dependence", "12")}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_the_reader_alone_is_reported_stripped_or_not(machine: str, program: str,
                                                      tmp_path: Path) -> None:
    built = scenario("unsized_sweep", machine)
    severity, kind, seen = PROGRAMS[program]
    assert printed(built, program) == {"registered": "1", "seen": seen}
    path = built.path(program)
    found = order_risks_when_stripped(machine, path, tmp_path)
    reader = tu_initializer(path, "seen")
    assert [(r["severity"], r["kind"], r["reader_address"]) for r in found] == [
        (severity, kind, reader)], found


@pytest.mark.parametrize("machine", MACHINES)
def test_a_sweep_of_unknown_length_ends_at_the_next_initializer(machine: str,
                                                                tmp_path: Path) -> None:
    """The stripped copy's sweep of ``a.cpp``'s initializer follows its one jump and
    nothing else: not the code of ``b.cpp``'s initializer or ``main`` below it."""
    path = scenario("unsized_sweep", machine).path("config_first")
    start = tu_initializer(path, "a.cpp")
    assert start is not None
    copy = strip_unneeded(machine, path, tmp_path)
    with ElfFile.open(str(copy)) as elf:
        analyzer = EffectsAnalyzer(elf)
        assert analyzer.index.function_at(start) is None  # no size known
        effects = analyzer.effects(start)
    assert not effects.external_calls  # main's printf, before
    assert not effects.reads or set(effects.reads) == set(effects.writes)  # registered += 1
