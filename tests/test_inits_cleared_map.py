"""A destructor that shuts down a registry destroyed before it (``fixtures/cleared_map``,
the shape of Ghidra's decompiler's translators).

The oracle is ASan: ``capability_first`` reads the destroyed map's freed nodes at
exit (``heap-use-after-free`` in ``shutdown()``, called from the capability's
destructor); ``translators_first`` runs cleanly.  ``inits`` reports the
``destruction-order`` error in the one and nothing in the other, and the same
stripped: ``clear()`` stores to the map's header, not to its start, and those
stores must still be the map's when no symbol says where it starts (before, the
stripped copies of Ghidra's tests lost their destruction-order errors so).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import (
    ASAN,
    MACHINES,
    compiler_runs,
    printed,
    risks,
    same_when_stripped,
    scenario,
    toolchain,
)

ORDER = "destruction-order"


@pytest.mark.parametrize("machine", MACHINES)
def test_the_map_read_before_it_is_destroyed_is_fine(machine: str) -> None:
    built = scenario("cleared_map", machine)
    assert printed(built, "translators_first") == {"main": "done", "shutdown_total": "7"}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "expected"), [
    ("capability_first", [(ORDER, "translators")]),
    ("translators_first", []),
])
def test_the_shutdown_of_a_destroyed_map_is_reported_stripped_or_not(
        machine: str, program: str, expected: list[tuple[str, str]], tmp_path: Path) -> None:
    built = scenario("cleared_map", machine)
    record = same_when_stripped(machine, built.path(program), tmp_path)
    assert [(r["kind"], r["object"]) for r in risks(record, ORDER)] == expected


@pytest.mark.parametrize(("program", "reported"), [
    ("capability_first", True),
    ("translators_first", False),
])
def test_asan_agrees(program: str, reported: bool) -> None:
    if not compiler_runs(ASAN):
        pytest.skip("cannot link with -fsanitize=address (apt-get install libasan8)")
    fixture = build.SCENARIOS["cleared_map"]
    folder = build.build_targets(fixture.sources(), list(fixture.targets),
                                 (*fixture.flags, *ASAN), toolchain("x86_64"),
                                 label="cleared_map-asan")
    result = subprocess.run([str(folder / program)], capture_output=True, text=True,
                            env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}, timeout=60)
    assert ("ERROR: AddressSanitizer: heap-use-after-free" in result.stderr) == reported, \
        result.stderr[-2000:]
    if reported:
        assert "shutdown()" in result.stderr and "Capability::~Capability" in result.stderr
